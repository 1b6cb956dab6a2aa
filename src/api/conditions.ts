import type { Condition } from "./knative.ts";

// Condition types and reasons spelt exactly as the upstream Knative Operator writes them
// (pkg/apis/operator/base/common.go and reasons.go), so tools that read upstream CRs read ours.

export const ConditionType = {
  TargetClusterResolved: "TargetClusterResolved",
  DependenciesInstalled: "DependenciesInstalled",
  InstallSucceeded: "InstallSucceeded",
  DeploymentsAvailable: "DeploymentsAvailable",
  VersionMigrationEligible: "VersionMigrationEligible",
  Ready: "Ready",
} as const;
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

/** Why TargetClusterResolved is False. */
export const TargetClusterReason = {
  ClusterProfileNotFound: "ClusterProfileNotFound",
  ClusterProfileNotReady: "ClusterProfileNotReady",
  ClusterProfileUnavailable: "ClusterProfileUnavailable",
  AccessProviderFailed: "AccessProviderFailed",
  AccessProviderNotConfigured: "AccessProviderNotConfigured",
  MulticlusterDisabled: "MulticlusterDisabled",
  RemoteClientCreationFailed: "RemoteClientCreationFailed",
  RemoteClusterStale: "RemoteClusterStale",
  ClusterProviderClosed: "ClusterProviderClosed",
  // knative-fleet's own: the service runs with hub installs disabled (the chart's hubInstall.enabled=false).
  HubInstallDisabled: "HubInstallDisabled",
} as const;
export type TargetClusterReason = (typeof TargetClusterReason)[keyof typeof TargetClusterReason];

/**
 * The conditions Ready summarizes, in upstream's order. A CR without spec.clusterProfileRef still needs
 * TargetClusterResolved=True (upstream marks it so for local installs).
 */
export const READY_DEPENDENCIES = [
  ConditionType.DependenciesInstalled,
  ConditionType.DeploymentsAvailable,
  ConditionType.InstallSucceeded,
  ConditionType.VersionMigrationEligible,
  ConditionType.TargetClusterResolved,
] as const;

/** A condition's desired state; setCondition supplies lastTransitionTime. */
export type ConditionUpdate = Omit<Condition, "lastTransitionTime">;

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}

/**
 * Returns `conditions` with `update` applied, never mutating the input. lastTransitionTime moves only when the
 * status changes. When nothing changes the same array comes back, so callers can skip the status write.
 * Conditions stay sorted by type, as knative.dev/pkg keeps them.
 */
export function setCondition(conditions: Condition[], update: ConditionUpdate, now: Date): Condition[] {
  const existing = findCondition(conditions, update.type);
  if (existing && sameState(existing, update)) return conditions;
  const unchangedSince = existing?.status === update.status ? existing.lastTransitionTime : undefined;
  const next: Condition = {
    type: update.type,
    status: update.status,
    ...(update.severity ? { severity: update.severity } : {}),
    lastTransitionTime: unchangedSince ?? formatTime(now),
    ...(update.reason ? { reason: update.reason } : {}),
    ...(update.message ? { message: update.message } : {}),
  };
  return [...conditions.filter((condition) => condition.type !== update.type), next].sort((a, b) =>
    a.type < b.type ? -1 : a.type > b.type ? 1 : 0,
  );
}

/**
 * Ready from READY_DEPENDENCIES: False with the reason and message of the first False dependency, else Unknown
 * with those of the first Unknown (or missing) one, else True.
 */
export function computeReady(conditions: readonly Condition[]): ConditionUpdate {
  const dependencies = READY_DEPENDENCIES.map(
    (type): ConditionUpdate => findCondition(conditions, type) ?? { type, status: "Unknown" },
  );
  const blocking =
    dependencies.find((condition) => condition.status === "False") ??
    dependencies.find((condition) => condition.status === "Unknown");
  if (!blocking) return { type: ConditionType.Ready, status: "True" };
  return {
    type: ConditionType.Ready,
    status: blocking.status,
    reason: blocking.reason,
    message: blocking.message,
  };
}

/** Sets one dependency condition and recomputes Ready: what upstream's Mark* methods do. */
export function markCondition(conditions: Condition[], update: ConditionUpdate, now: Date): Condition[] {
  const updated = setCondition(conditions, update, now);
  return setCondition(updated, computeReady(updated), now);
}

function sameState(a: ConditionUpdate, b: ConditionUpdate): boolean {
  return (
    a.status === b.status &&
    (a.reason ?? "") === (b.reason ?? "") &&
    (a.message ?? "") === (b.message ?? "") &&
    (a.severity ?? "") === (b.severity ?? "")
  );
}

// RFC 3339 to the second, as metav1.Time and apis.VolatileTime serialize.
function formatTime(time: Date): string {
  return time.toISOString().replace(/\.\d{3}Z$/, "Z");
}
