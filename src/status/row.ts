import {
  ConditionType,
  DriftReason,
  findCondition,
  type ReadinessPhase,
  readinessOf,
} from "../api/conditions.ts";
import { type DriftRecord, parseDriftRecords } from "../api/drift.ts";
import type { KnativeStatus } from "../api/knative.ts";
import {
  DRIFT_STATUS_ANNOTATION,
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  UPGRADE_TARGET_ANNOTATION,
} from "../api/labels.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { clusterLabel, identityOf, type ResourceIdentity, targetOf } from "../fleet/identity.ts";
import type { KubeObject } from "../kube/object.ts";

// One hub CR as a row, built once: the status README (and its fleet.yaml) lists these, and
// `knative-fleet status` extends them with what a person at the terminal needs besides (commands/status.ts).

/** One hub CR: where it installs, what it is, the readiness verdict, and where its content came from. */
export interface HubCrRow extends ResourceIdentity {
  /** `namespace/name` of the target ClusterProfile, or `hub`. */
  cluster: string;
  /** The readiness verdict (api/conditions.ts readinessOf), as the rollout gate reads it too. */
  phase: ReadinessPhase;
  /** Why it is not Current: a word, and a line for people. */
  reason?: string;
  message?: string;
  /** The installed Knative version. */
  version?: string;
  /** On a step of an upgrade chain (src/upgrade): the version its file wants, where the chain goes. */
  upgradeTarget?: string;
  /** The commit the hub CR's content came from, and its fleet file relative to the repository root. */
  commit?: string;
  path?: string;
  /**
   * Someone else's change on its cluster (src/reconcile/drift.ts): `kept` while report mode leaves it there,
   * `corrected` once it was put back; with the last records, newest first.
   */
  drift?: { state: "kept" | "corrected"; records: DriftRecord[] };
}

/** The row of a hub CR; a field the CR does not have is left out (not undefined). */
export function hubCrRow(cr: KubeObject): HubCrRow {
  const status = cr.status as KnativeStatus | undefined;
  const annotations = cr.metadata.annotations ?? {};
  const { phase, reason, message } = readinessOf({ metadata: cr.metadata, status });
  return withoutUndefined({
    cluster: clusterLabel(targetOf(cr)),
    ...identityOf(cr),
    phase,
    reason,
    message,
    version: status?.version,
    upgradeTarget: annotations[UPGRADE_TARGET_ANNOTATION],
    commit: annotations[SOURCE_COMMIT_ANNOTATION],
    path: annotations[SOURCE_PATH_ANNOTATION],
    drift: driftOf(status),
  });
}

/** The row's drift: none for a CR whose cluster never drifted (or whose drift went away). */
function driftOf(status: KnativeStatus | undefined): HubCrRow["drift"] {
  const condition = findCondition(status?.conditions, ConditionType.Drifted);
  const records = parseDriftRecords(status?.annotations?.[DRIFT_STATUS_ANNOTATION]);
  if (condition === undefined || records.length === 0 || condition.reason === DriftReason.Gone)
    return undefined;
  return { state: condition.status === "True" ? "kept" : "corrected", records };
}

/** The installed version, and where an upgrade chain takes it: `1.21.4 (chain to 1.23)`. */
export const versionText = (row: HubCrRow): string | undefined =>
  row.upgradeTarget === undefined ? row.version : `${row.version ?? "-"} (chain to ${row.upgradeTarget})`;

/** Rows by cluster, then kind, namespace and name: the order every fleet listing uses. */
export function compareRows(
  a: { cluster: string; kind: string; namespace: string; name: string },
  b: { cluster: string; kind: string; namespace: string; name: string },
): number {
  return (
    compareStrings(a.cluster, b.cluster) ||
    compareStrings(a.kind, b.kind) ||
    compareStrings(a.namespace, b.namespace) ||
    compareStrings(a.name, b.name)
  );
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}
