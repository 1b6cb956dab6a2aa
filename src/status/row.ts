import { createHash } from "node:crypto";
import {
  ConditionType,
  DriftReason,
  findCondition,
  type ReadinessPhase,
  readinessOf,
} from "../api/conditions.ts";
import { type DriftRecord, type FieldChange, parseDriftRecords } from "../api/drift.ts";
import type { KnativeStatus } from "../api/knative.ts";
import {
  DRIFT_MODE_ANNOTATION,
  DRIFT_STATUS_ANNOTATION,
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  UPGRADE_TARGET_ANNOTATION,
} from "../api/labels.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import {
  clusterLabel,
  formatIdentity,
  identityOf,
  type ResourceIdentity,
  targetOf,
} from "../fleet/identity.ts";
import type { KubeObject } from "../kube/object.ts";
import { shortCommit } from "../text/commit.ts";
import { count } from "../text/count.ts";
import { escapeControlCharacters } from "../text/escape.ts";
import { markdownCell, markdownTable } from "../text/markdown.ts";

// One hub CR as a row, built once: the status README (and its fleet.yaml) lists these, and
// `knative-fleet status` extends them with what a person at the terminal needs besides (commands/status.ts).
// Below: the rows as the status files' Markdown shows them (tables, counts, drift), and each cluster's page.

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

/** A namespace (a DNS-1123 label) and a name (a DNS-1123 subdomain), as a ClusterProfile has them. */
const CLUSTER_KEY =
  /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * A cluster's page in the status folder, for a fleet whose README summarizes (status/summary.ts):
 * `clusters/<namespace>/<name>.md`, `clusters/hub.md`. The label comes from the hub CR's clusterProfileRef,
 * which the repository writes: one that is not a namespace and a name gets a hashed file under `clusters/_/`
 * (no namespace is `_`), so no label makes a path outside `clusters/`, and no two labels share one.
 */
export function clusterPage(cluster: string): string {
  if (cluster === "hub") return "clusters/hub.md";
  if (cluster.length <= 317 && CLUSTER_KEY.test(cluster)) return `clusters/${cluster}.md`;
  return `clusters/_/${createHash("sha256").update(cluster).digest("hex").slice(0, 32)}.md`;
}

/** Whether `path` is one clusterPage gives: the only paths the write-back deletes as stale pages. */
export const isClusterPage = (path: string): boolean =>
  path === "clusters/hub.md" ||
  /^clusters\/_\/[0-9a-f]{32}\.md$/.test(path) ||
  (path.length <= 330 &&
    /^clusters\/.*\.md$/.test(path) &&
    CLUSTER_KEY.test(path.slice("clusters/".length, -".md".length)));

// --- The rows as the status files' Markdown shows them: a big fleet's README (summary.ts) and each of its
// clusters' pages show the same tables. ---

export const PHASE_MARK: Record<ReadinessPhase, string> = {
  Current: "✓",
  Failed: "✗",
  InProgress: "…",
  Terminating: "…",
};

/** `CRs on the hub: 2; ready ✓ 1, not ready ✗ 1, in progress … 0.` */
export function readinessCounts(rows: readonly HubCrRow[]): string {
  if (rows.length === 0) return "The hub holds no CR from the fleet repository.";
  const phases = tally(rows, (row) => row.phase);
  const tallyOf = (...of: ReadinessPhase[]) => of.reduce((sum, phase) => sum + (phases.get(phase) ?? 0), 0);
  return (
    `CRs on the hub: ${rows.length}; ready ${PHASE_MARK.Current} ${tallyOf("Current")}, ` +
    `not ready ${PHASE_MARK.Failed} ${tallyOf("Failed")}, in progress ${PHASE_MARK.InProgress} ${tallyOf("InProgress", "Terminating")}.`
  );
}

export const RESOURCE_COLUMNS = ["Cluster", "Kind", "CR", "Ready", "Version", "Status", "Commit"];

/** A CR's cells in RESOURCE_COLUMNS, its status message as given. */
export const resourceCells = (row: HubCrRow, message = row.message ?? ""): string[] => [
  row.cluster,
  row.kind,
  `${row.namespace}/${row.name}`,
  PHASE_MARK[row.phase],
  versionText(row) ?? "",
  message,
  row.commit === undefined ? "" : shortCommit(row.commit),
];

export function resourcesTable(rows: readonly HubCrRow[]): string {
  if (rows.length === 0) return "";
  return table(
    RESOURCE_COLUMNS,
    rows.map((row) => resourceCells(row)),
  );
}

/** How many of `items` each key has, in the order the keys first come. */
export function tally<T>(items: readonly T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

/** The phases in the order the counts list them. */
export const PHASE_ORDER: readonly ReadinessPhase[] = ["Current", "Failed", "InProgress", "Terminating"];

/**
 * The CRs whose cluster someone else changed, each with its newest record: the object, who changed it and
 * when, the fields (what Git wants -> what the cluster has), the CR field to edit instead, and the outcome.
 */
export function driftSection(rows: readonly HubCrRow[], limit: number): string {
  const drifted = rows.flatMap((row) => (row.drift ? [{ row, record: row.drift.records[0]! }] : []));
  if (drifted.length === 0) return "";
  return [
    "## Drift",
    "Someone else changed these objects on their cluster (the newest change per CR). knative-fleet puts back " +
      `what Git wants unless the CR (or its placement) is annotated \`${DRIFT_MODE_ANNOTATION}: report\`; to ` +
      "keep a change, make it in the fleet file at the line given.",
    listed(
      ["Cluster", "CR", "Object", "Changed by", "Fields", "Edit instead", "Outcome"],
      drifted,
      ({ row, record }) => [
        row.cluster,
        formatIdentity(row),
        escapeControlCharacters(record.object),
        escapeControlCharacters(changedBy(record)),
        lines([
          ...(record.change === "deleted" ? ["(deleted)"] : []),
          ...record.fields.map((f) => `${f.path}: ${f.want ?? "(absent)"} -> ${f.have ?? "(absent)"}`),
          ...(record.omittedFields ? [count(record.omittedFields, "more field")] : []),
        ]),
        lines([...new Set(record.fields.map(editInstead))]),
        record.outcome === "kept" ? "kept" : "put back",
      ],
      limit,
    ),
  ].join("\n\n");
}

/** `kubectl-edit (Update) at 2026-11-28T15:00:00Z`; a deletion has no manager (Kubernetes records none). */
const changedBy = ({ manager, operation, at }: DriftRecord): string =>
  `${manager ?? "unknown"}${operation ? ` (${operation})` : ""}${at ? ` at ${at}` : ""}`;

/** The CR field that sets a field, and where in the fleet file; `add` when the CR does not set it yet. */
function editInstead({ owner }: FieldChange): string {
  if (!owner) return "release manifests";
  return `${owner.set ? "" : "add "}${owner.field}${owner.at ? ` in ${owner.at}` : ""}`;
}

/** Values one per line of a cell: a line break inside a value is escaped, so it stays one line. */
const lines = (values: readonly string[]): string => values.map(escapeControlCharacters).join("\n");

/** At most `limit` of `items` as a table (see table), then how many more there are. */
export function listed<T>(
  header: readonly string[],
  items: readonly T[],
  toRow: (item: T) => readonly string[],
  limit: number,
): string {
  const shown = table(header, items.slice(0, limit).map(toRow));
  return items.length > limit ? `${shown}\n\n${more(items.length - limit)}` : shown;
}

export const more = (left: number): string => `… and ${left} more: fleet.yaml has them all.`;

/** A table of values from the hub and the repository, each escaped for its cell. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return markdownTable(
    header,
    rows.map((row) => row.map(markdownCell)),
  );
}

export function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}
