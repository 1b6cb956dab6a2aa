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
  // knative-fleet's own, severity Info (Ready does not depend on it): someone else changed the install on its
  // cluster. True while the change is kept (report mode); False once it was put back, or is gone.
  Drifted: "Drifted",
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
  // knative-fleet's own: the ClusterProfile's namespace is not in allowedClusterProfileNamespaces. Unlike a
  // ClusterProfile that is gone, it does not release a CR being deleted: its cluster may still be there.
  ClusterProfileNotAllowed: "ClusterProfileNotAllowed",
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
type ConditionUpdate = Omit<Condition, "lastTransitionTime">;

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

// --- The condition set's Mark* helpers (upstream's knativeserving_lifecycle.go): every condition text once ---

/** Every dependency condition present (Unknown when never set), as upstream's InitializeConditions does. */
export function initializeConditions(conditions: Condition[], now: Date): Condition[] {
  let out = conditions;
  for (const type of READY_DEPENDENCIES) {
    if (!findCondition(out, type)) out = markCondition(out, { type, status: "Unknown" }, now);
  }
  return out;
}

export const markTargetResolved = (conditions: Condition[], now: Date): Condition[] =>
  markCondition(conditions, { type: ConditionType.TargetClusterResolved, status: "True" }, now);

export const markTargetNotResolved = (
  conditions: Condition[],
  reason: TargetClusterReason,
  message: string,
  now: Date,
): Condition[] =>
  markCondition(
    conditions,
    { type: ConditionType.TargetClusterResolved, status: "False", reason, message },
    now,
  );

/** The target cannot be resolved while the CR is being deleted: say how to release it without cleanup. */
export const markCleanupBlocked = (
  conditions: Condition[],
  reason: TargetClusterReason,
  message: string,
  cluster: string,
  abandonAnnotation: string,
  now: Date,
): Condition[] =>
  markTargetNotResolved(
    conditions,
    reason,
    `${message}. Cleanup of ${cluster} is retried with backoff; if the cluster is gone for good, ` +
      `annotate the CR ${abandonAnnotation}=true to release it without cleanup.`,
    now,
  );

export const markInstallFailed = (conditions: Condition[], message: string, now: Date): Condition[] =>
  markCondition(
    conditions,
    {
      type: ConditionType.InstallSucceeded,
      status: "False",
      reason: "Error",
      message: `Install failed with message: ${message}`,
    },
    now,
  );

/**
 * InstallSucceeded's reason when the cluster's Kubernetes is older than the release needs: nothing was
 * applied (knative-fleet's own, in the style of the TargetClusterResolved reasons).
 */
export const KUBERNETES_VERSION_UNSUPPORTED = "KubernetesVersionUnsupported";

/** The cluster's Kubernetes is too old for the release (`detail` says which versions): nothing is applied. */
export const markKubernetesVersionUnsupported = (
  conditions: Condition[],
  cluster: string,
  detail: string,
  now: Date,
): Condition[] =>
  markCondition(
    conditions,
    {
      type: ConditionType.InstallSucceeded,
      status: "False",
      reason: KUBERNETES_VERSION_UNSUPPORTED,
      message: `Cluster ${cluster}: ${detail}. Nothing is applied to it until it is upgraded.`,
    },
    now,
  );

/** InstallSucceeded True; DependenciesInstalled True unless something already reported on it. */
export function markInstallSucceeded(conditions: Condition[], now: Date): Condition[] {
  const out = markCondition(conditions, { type: ConditionType.InstallSucceeded, status: "True" }, now);
  const dependencies = findCondition(out, ConditionType.DependenciesInstalled)?.status ?? "Unknown";
  if (dependencies !== "Unknown") return out;
  return markCondition(out, { type: ConditionType.DependenciesInstalled, status: "True" }, now);
}

export const markDeploymentsNotReady = (conditions: Condition[], waiting: readonly string[], now: Date) =>
  markCondition(
    conditions,
    {
      type: ConditionType.DeploymentsAvailable,
      status: "False",
      reason: "NotReady",
      message: `Waiting on deployments: ${waiting.join(", ")}`,
    },
    now,
  );

/**
 * The Deployments are Available but some webhook Service has no ready endpoint (#39): knative-fleet's own
 * gate, on upstream's condition and reason, in the words of its deployment message, so every reader of
 * DeploymentsAvailable (and of Ready) waits on it without learning a new condition.
 */
export const markWebhooksNotServed = (conditions: Condition[], unserved: readonly string[], now: Date) =>
  markCondition(
    conditions,
    {
      type: ConditionType.DeploymentsAvailable,
      status: "False",
      reason: "NotReady",
      message: `Waiting on webhook endpoints: ${unserved.join(", ")}`,
    },
    now,
  );

/** The spoke's credentials may not list EndpointSlices: whether the webhooks are served cannot be known. */
export const markWebhooksUnverified = (conditions: Condition[], namespaces: readonly string[], now: Date) =>
  markCondition(
    conditions,
    {
      type: ConditionType.DeploymentsAvailable,
      status: "False",
      reason: "NotReady",
      message:
        `Cannot verify webhook endpoints: listing endpointslices (discovery.k8s.io) in ${namespaces.join(", ")} ` +
        "is forbidden; grant the cluster's credentials list on discovery.k8s.io endpointslices",
    },
    now,
  );

export const markDeploymentsAvailable = (conditions: Condition[], now: Date): Condition[] =>
  markCondition(conditions, { type: ConditionType.DeploymentsAvailable, status: "True" }, now);

// --- Readiness: the one verdict every consumer shows (kstatus' Compute) ---

/**
 * The conditions Ready summarizes, in the order an install passes them: the first that is not True is the
 * cause; the later ones mostly wait on it (nothing installs without a target). READY_DEPENDENCIES keeps
 * upstream's order instead, which Ready's own reason and message follow.
 */
const INSTALL_ORDER = [
  ConditionType.TargetClusterResolved,
  ConditionType.VersionMigrationEligible,
  ConditionType.InstallSucceeded,
  ConditionType.DeploymentsAvailable,
  ConditionType.DependenciesInstalled,
] as const;

/**
 * kstatus' statuses, for a hub CR: `Current`, Ready on the current spec with its Deployments available;
 * `InProgress`, on its way (not reported on yet, or Ready Unknown); `Failed`, Ready False; `Terminating`,
 * being deleted (its cluster is being cleaned up).
 */
export type ReadinessPhase = "Current" | "InProgress" | "Failed" | "Terminating";

interface Readiness {
  /** The verdict: the status file, `knative-fleet status`, the rollout gate and the metrics all show this. */
  phase: ReadinessPhase;
  /** Why it is not Current, as one word: Deleting, Reconciling, or the blocking condition's reason. */
  reason?: string;
  /** Why it is not Current, for people, on one line; absent when Current. */
  message?: string;
  /** The Ready condition's status; Unknown when there is none. */
  ready: Condition["status"];
  /** The controller has not reported on the current spec: the status describes an older one, or none. */
  stale: boolean;
  /** The CR is being deleted (its cluster is being cleaned up). */
  deleting: boolean;
  /** The first condition in install order that is not True, else Ready itself when it is not True. */
  blocking?: Pick<Condition, "type" | "status" | "reason" | "message">;
}

/** What the readiness of a hub CR is read from: its generation, deletion and status. */
interface ReadinessSource {
  metadata: { generation?: unknown; deletionTimestamp?: unknown; [field: string]: unknown };
  status?: { observedGeneration?: number; conditions?: Condition[] };
}

const DELETING = "the CR is being deleted; its cluster is being cleaned up";
const NOT_REPORTED = "the hub controller has not reported on the current spec yet";

/**
 * The one verdict on a hub CR. A CR being deleted is Terminating, and one whose status describes an older
 * spec (or none) is InProgress, whatever its conditions say. Otherwise it is Current only with Ready and
 * DeploymentsAvailable True (a CR whose Deployments are not reported as available is not yet serving);
 * Failed while Ready is False; else InProgress, each explained by the first condition in install order
 * that is not True.
 */
export function readinessOf(cr: ReadinessSource): Readiness {
  const conditions = cr.status?.conditions ?? [];
  const ready = findCondition(conditions, ConditionType.Ready);
  const generation = typeof cr.metadata.generation === "number" ? cr.metadata.generation : undefined;
  const observed = cr.status?.observedGeneration;
  const cause =
    INSTALL_ORDER.map((type) => findCondition(conditions, type)).find(
      (condition) => condition !== undefined && condition.status !== "True",
    ) ?? (ready?.status === "True" ? undefined : ready);
  const blocking =
    cause ??
    (findCondition(conditions, ConditionType.DeploymentsAvailable) === undefined && ready !== undefined
      ? { type: ConditionType.DeploymentsAvailable, status: "Unknown" as const }
      : undefined);
  const facts = {
    ready: ready?.status ?? "Unknown",
    stale: observed === undefined || (generation !== undefined && observed < generation),
    deleting: Boolean(cr.metadata.deletionTimestamp),
    ...(blocking && {
      blocking: {
        type: blocking.type,
        status: blocking.status,
        ...(blocking.reason !== undefined && { reason: blocking.reason }),
        ...(blocking.message !== undefined && { message: blocking.message }),
      },
    }),
  };
  // A deletion says what holds its cleanup up, as far as the conditions tell (an unreachable cluster); the
  // API server bumps a custom resource's generation when it marks it deleted, so stale or not they tell it.
  if (facts.deleting) {
    const why = blocking ? `; ${describeCondition(blocking)}` : "";
    return { phase: "Terminating", reason: "Deleting", message: `${DELETING}${why}`, ...facts };
  }
  if (facts.stale || ready === undefined) {
    return { phase: "InProgress", reason: "Reconciling", message: NOT_REPORTED, ...facts };
  }
  if (blocking === undefined) return { phase: "Current", ...facts };
  return {
    phase: ready.status === "False" ? "Failed" : "InProgress",
    reason: blocking.reason ?? `${blocking.type}NotTrue`,
    message: describeCondition(blocking),
    ...facts,
  };
}

/** `DeploymentsAvailable=False (NotReady: Waiting on deployments: webhook)`. */
function describeCondition(condition: Pick<Condition, "type" | "status" | "reason" | "message">): string {
  const detail = [condition.reason, condition.message?.trim()].filter(Boolean).join(": ");
  return `${condition.type}=${condition.status}${detail ? ` (${detail})` : ""}`;
}

/** Why Drifted is what it is. */
export const DriftReason = {
  Kept: "DriftKept",
  Corrected: "DriftCorrected",
  Gone: "NoDrift",
} as const;

/** Drifted, as the last pass found it; an Info condition, so Ready is untouched (setCondition, not markCondition). */
export const markDrifted = (
  conditions: Condition[],
  reason: (typeof DriftReason)[keyof typeof DriftReason],
  message: string,
  now: Date,
): Condition[] =>
  setCondition(
    conditions,
    {
      type: ConditionType.Drifted,
      status: reason === DriftReason.Kept ? "True" : "False",
      severity: "Info",
      reason,
      message,
    },
    now,
  );
