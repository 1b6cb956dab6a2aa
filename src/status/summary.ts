import { stringify } from "yaml";
import type { ReadinessPhase } from "../api/conditions.ts";
import type { DriftRecord, FieldChange } from "../api/drift.ts";
import {
  CONFIRM_PRUNE_ANNOTATION,
  DRIFT_MODE_ANNOTATION,
  isManagedByFleet,
  PRUNE_CONFIRMATION_CONFIGMAP,
} from "../api/labels.ts";
import type { Diagnostic } from "../fleet/diagnostic.ts";
import { formatIdentity, type ResourceIdentity } from "../fleet/identity.ts";
import type { KubeObject } from "../kube/object.ts";
import type { PruneCandidate, PruneReport } from "../mirror/decide.ts";
import { type PlacementRollupRow, placementRollup } from "../placement/rollup.ts";
import type { RolloutReport } from "../rollout/edge.ts";
import { type RolloutVerdict, rolloutVerdict } from "../rollout/state.ts";
import type { SyncResult } from "../sync/sync.ts";
import { shortCommit } from "../text/commit.ts";
import { count } from "../text/count.ts";
import { escapeControlCharacters } from "../text/escape.ts";
import { markdownCell, markdownTable, markdownText } from "../text/markdown.ts";
import { compareRows, type HubCrRow, hubCrRow, versionText } from "./row.ts";

// The status files the bot commits back to the fleet repository: README.md for people on the Git host,
// fleet.yaml for tools, both from one summary so they never disagree. The output is a pure function of
// state, byte for byte: no timestamps, no head commit, no record of what one sync did (a prune just done,
// a CR just created). Otherwise every sync, and every status commit itself, would make a new status commit.

const STATUS_README = "README.md";
const STATUS_DATA = "fleet.yaml";

/**
 * The first line of each status file. A file at a status file's path that does not start with it is not
 * the bot's (a README of the repository, a fleet file): the write-back never overwrites it.
 */
export const STATUS_FILE_HEADS: Readonly<Record<string, string>> = {
  [STATUS_README]: "# Fleet status\n",
  [STATUS_DATA]: "# Written by knative-fleet from the hub after each sync; edits here are overwritten.\n",
};

export interface StatusFile {
  /** The file name inside the status folder. */
  name: string;
  content: string;
}

interface StatusSummaryInput {
  /** The KnativeServing and KnativeEventing CRs on the hub; hand-made ones (not mirrored) are left out. */
  resources: readonly KubeObject[];
  /** The sync that ran against those CRs (what each placement selected, when the fleet has placements). */
  sync: StatusSync;
}

interface Summary {
  resources: HubCrRow[];
  validationErrors: Diagnostic[];
  /** Files that failed validation and the CRs they declare, which keep their last good state. */
  invalidFiles: { path: string; declares: ResourceIdentity[] }[];
  conflicts: (ResourceIdentity & { path: string; reason?: string })[];
  applyErrors: (ResourceIdentity & { path: string; error: string })[];
  prune: PruneSummary;
  /** Per placement: what it selects, how many are ready, who left (only when the fleet has placements). */
  placements?: PlacementRollupRow[];
  /** The rollout of the newest revision (only when the fleet has a rollout policy). */
  rollout?: RolloutSummary;
}

interface RolloutSummary {
  phase: RolloutReport["phase"];
  /** The first commit with this content. */
  commit?: string;
  wave?: string;
  paused: boolean;
  halt?: { wave: string; resource: string; cluster: string; reason: string };
  message?: string;
  /** The hub CRs that keep their last applied spec, and why; deletions that wait for their wave. */
  waiting: { resource: string; reason: string }[];
}

/**
 * What is pending about pruning. `failed`: deletes the hub refused, retried by the next sync. A prune that
 * succeeded shows as `none`: its CRs are simply gone from the table.
 */
interface PruneSummary {
  state: "none" | "skipped" | "held" | "failed";
  reason?: string;
  message?: string;
  candidates: PruneCandidate[];
  retained: PruneCandidate[];
  confirmation?: { namespace: string; token: string };
}

/** The status folder's files, README.md then fleet.yaml. */
export function renderStatusSummary(input: StatusSummaryInput): StatusFile[] {
  const summary = summarize(input);
  return [
    // The rollout's sentence is read off the sync's report; fleet.yaml keeps the report's fields.
    {
      name: STATUS_README,
      content: renderReadme(summary, input.sync.rollout && rolloutVerdict(input.sync.rollout)),
    },
    { name: STATUS_DATA, content: renderData(summary) },
  ];
}

/** What the status files read of a sync. */
export type StatusSync = Omit<SyncResult, "model" | "placements"> & Partial<Pick<SyncResult, "placements">>;

function summarize({ resources, sync }: StatusSummaryInput): Summary {
  const outcomes = sync.resources;
  const rows = resources.filter(isManagedByFleet).map(hubCrRow).sort(compareRows);
  const placements =
    sync.placements && sync.placements.selections.length > 0
      ? placementRollup(sync.placements, rows)
      : undefined;
  return {
    resources: rows,
    // Mapped field by field: the YAML keeps key order, whichever check built the diagnostic.
    validationErrors: sync.diagnostics.map(({ path, line, column, field, message }) => ({
      path,
      line,
      column,
      field,
      message,
    })),
    invalidFiles: sync.failedFiles.map(({ path, declares }) => ({ path, declares })),
    conflicts: outcomes
      .filter((outcome) => outcome.action === "conflict")
      .map(({ kind, namespace, name, path, reason }) =>
        withoutUndefined({ kind, namespace, name, path, reason }),
      ),
    applyErrors: outcomes.flatMap(({ kind, namespace, name, path, error }) =>
      error === undefined ? [] : [{ kind, namespace, name, path, error }],
    ),
    prune: pruneSummary(sync.prune),
    ...(placements ? { placements } : {}),
    ...(sync.rollout ? { rollout: rolloutSummary(sync) } : {}),
  };
}

function rolloutSummary(sync: StatusSync): RolloutSummary {
  const { phase, commit, wave, paused, halt, message } = sync.rollout!;
  const waiting = [
    ...sync.resources.flatMap((outcome) =>
      outcome.action === "waiting"
        ? [{ resource: formatIdentity(outcome), reason: outcome.reason ?? "" }]
        : [],
    ),
    ...sync.prune.candidates.flatMap((candidate) =>
      candidate.waiting === undefined
        ? []
        : [{ resource: `${formatIdentity(candidate)} (deletion)`, reason: candidate.waiting }],
    ),
  ];
  return withoutUndefined({
    phase,
    commit,
    wave,
    paused,
    ...(halt && {
      halt: { wave: halt.wave, resource: halt.resource, cluster: halt.cluster, reason: halt.reason },
    }),
    message,
    waiting,
  });
}

function pruneSummary({
  state,
  reason,
  message,
  candidates,
  retained,
  confirmation,
}: PruneReport): PruneSummary {
  if (state === "pruned") {
    const failed = candidates.filter((candidate) => candidate.error !== undefined);
    return { state: failed.length > 0 ? "failed" : "none", candidates: failed, retained };
  }
  return { state, reason, message, candidates, retained, confirmation };
}

function renderReadme(summary: Summary, rollout: RolloutVerdict | undefined): string {
  const sections = [
    STATUS_FILE_HEADS[STATUS_README]!.trimEnd(),
    "Written by knative-fleet from the hub after each sync; edits here are overwritten.",
    readinessCounts(summary.resources),
    resourcesTable(summary.resources),
    placementsSection(summary.placements),
    driftSection(summary.resources),
    rolloutSection(summary.rollout, rollout),
    validationSection(summary),
    conflictsSection(summary.conflicts),
    applyErrorsSection(summary.applyErrors),
    pruneSection(summary.prune),
    retainedSection(summary.prune.retained),
  ];
  return `${sections.filter((section) => section !== "").join("\n\n")}\n`;
}

const PHASE_MARK: Record<ReadinessPhase, string> = {
  Current: "✓",
  Failed: "✗",
  InProgress: "…",
  Terminating: "…",
};

function readinessCounts(rows: readonly HubCrRow[]): string {
  if (rows.length === 0) return "The hub holds no CR from the fleet repository.";
  const tally = (...phases: ReadinessPhase[]) => rows.filter((row) => phases.includes(row.phase)).length;
  return (
    `CRs on the hub: ${rows.length}; ready ${PHASE_MARK.Current} ${tally("Current")}, ` +
    `not ready ${PHASE_MARK.Failed} ${tally("Failed")}, in progress ${PHASE_MARK.InProgress} ${tally("InProgress", "Terminating")}.`
  );
}

function resourcesTable(rows: readonly HubCrRow[]): string {
  if (rows.length === 0) return "";
  return table(
    ["Cluster", "Kind", "CR", "Ready", "Version", "Status", "Commit"],
    rows.map((row) => [
      row.cluster,
      row.kind,
      `${row.namespace}/${row.name}`,
      PHASE_MARK[row.phase],
      versionText(row) ?? "",
      row.message ?? "",
      row.commit === undefined ? "" : shortCommit(row.commit),
    ]),
  );
}

/** The rollout's verdict (rollout/state.ts rolloutVerdict), then the CRs that wait and why. */
function rolloutSection(rollout: RolloutSummary | undefined, verdict: RolloutVerdict | undefined): string {
  if (rollout === undefined || verdict === undefined) return "";
  return [
    "## Rollout",
    `${markdownText(verdict.message)}.`,
    ...(rollout.waiting.length > 0
      ? [
          table(
            ["CR", "Waits for"],
            rollout.waiting.map((w) => [w.resource, w.reason]),
          ),
        ]
      : []),
  ].join("\n\n");
}

function validationSection({ validationErrors, invalidFiles }: Summary): string {
  if (validationErrors.length === 0) return "";
  const kept = invalidFiles.flatMap(({ path, declares }) =>
    declares.map((identity) => `- ${markdownText(formatIdentity(identity))} (${markdownText(path)})`),
  );
  return [
    "## Validation errors",
    "A file with an error is not applied: the CRs it declares keep their last good state on the hub, and " +
      "nothing is pruned until every file is valid.",
    table(
      ["Location", "Field", "Message"],
      validationErrors.map((d) => [`${d.path}:${d.line}:${d.column}`, d.field, d.message]),
    ),
    ...(kept.length > 0 ? ["Kept at their last good state:", kept.join("\n")] : []),
  ].join("\n\n");
}

function conflictsSection(conflicts: Summary["conflicts"]): string {
  if (conflicts.length === 0) return "";
  return [
    "## Conflicts",
    "A CR of the same kind and name is on the hub but is not this repository's: made by hand, or mirrored " +
      "from another repository. knative-fleet leaves it alone: it is neither updated nor pruned. The last " +
      "column says how to hand it over.",
    table(
      ["CR", "File", "Whose"],
      conflicts.map((c) => [formatIdentity(c), c.path, c.reason ?? ""]),
    ),
  ].join("\n\n");
}

function applyErrorsSection(errors: Summary["applyErrors"]): string {
  if (errors.length === 0) return "";
  return [
    "## Not applied",
    "knative-fleet's admission or the hub refused these CRs; they keep their last applied state.",
    table(
      ["CR", "File", "Error"],
      errors.map((e) => [formatIdentity(e), e.path, e.error]),
    ),
  ].join("\n\n");
}

function pruneSection(prune: PruneSummary): string {
  switch (prune.state) {
    case "none":
      return "";
    case "failed":
      return [
        "## Prune failed",
        "These CRs are no longer in Git, but the hub refused to delete them; the next sync tries again.",
        candidatesTable(prune.candidates, true),
      ].join("\n\n");
    case "skipped":
      return [
        "## Prune skipped",
        `These CRs are no longer in Git but are not pruned: ${markdownText(prune.message ?? "")}.`,
        candidatesTable(prune.candidates, false),
      ].join("\n\n");
    case "held": {
      const { namespace, token } = prune.confirmation!;
      return [
        "## Prune held",
        `Held: ${markdownText(prune.message ?? "")}. Once confirmed, these CRs are deleted and Knative is ` +
          "uninstalled from their clusters:",
        candidatesTable(prune.candidates, false),
        "To confirm exactly this prune, run against the hub:",
        [
          "```sh",
          `kubectl -n ${namespace} create configmap ${PRUNE_CONFIRMATION_CONFIGMAP}  # if it does not exist yet`,
          `kubectl -n ${namespace} annotate configmap ${PRUNE_CONFIRMATION_CONFIGMAP} --overwrite \\`,
          `  ${CONFIRM_PRUNE_ANNOTATION}=${token}`,
          "```",
        ].join("\n"),
        "Restoring the files in Git instead cancels the prune.",
      ].join("\n\n");
    }
  }
}

function retainedSection(retained: readonly PruneCandidate[]): string {
  if (retained.length === 0) return "";
  return [
    "## Kept by `fleet.knative.dev/prune: disabled`",
    "These CRs are no longer in Git and are never pruned; delete them on the hub to uninstall.",
    candidatesTable(retained, false),
  ].join("\n\n");
}

function candidatesTable(candidates: readonly PruneCandidate[], withErrors: boolean): string {
  return table(
    withErrors ? ["CR", "File", "Error"] : ["CR", "File"],
    candidates.map((c) => [formatIdentity(c), c.path ?? "", ...(withErrors ? [c.error ?? ""] : [])]),
  );
}

function placementsSection(rows: readonly PlacementRollupRow[] | undefined): string {
  if (rows === undefined) return "";
  return [
    "## Placements",
    table(
      ["Placement", "File", "Selected", "Ready", "Not ready (first)", "Left (kept for the grace period)"],
      rows.map((row) => [
        row.placement,
        `${row.path}:${row.line}`,
        row.pending ? `pending: ${row.pending}` : String(row.selected.length),
        String(row.ready),
        row.notReady === 0 ? "0" : `${row.notReady} (${row.firstNotReady ?? ""})`,
        row.left.join(", "),
      ]),
    ),
    ...differsList(rows),
  ].join("\n\n");
}

/** The clusters that differ from the others of their placement (placement/rollup.ts), when some do. */
function differsList(rows: readonly PlacementRollupRow[]): string[] {
  const lines = rows.flatMap((row) =>
    (row.differs ?? []).map((what) => `- ${markdownText(row.placement)}: ${markdownText(what)}`),
  );
  return lines.length > 0
    ? ["Clusters that differ from the others of their placement:", lines.join("\n")]
    : [];
}

/**
 * The CRs whose cluster someone else changed, each with its newest record: the object, who changed it and
 * when, the fields (what Git wants -> what the cluster has), the CR field to edit instead, and the outcome.
 */
function driftSection(rows: readonly HubCrRow[]): string {
  const drifted = rows.flatMap((row) => (row.drift ? [{ row, record: row.drift.records[0]! }] : []));
  if (drifted.length === 0) return "";
  return [
    "## Drift",
    "Someone else changed these objects on their cluster (the newest change per CR). knative-fleet puts back " +
      `what Git wants unless the CR (or its placement) is annotated \`${DRIFT_MODE_ANNOTATION}: report\`; to ` +
      "keep a change, make it in the fleet file at the line given.",
    table(
      ["Cluster", "CR", "Object", "Changed by", "Fields", "Edit instead", "Outcome"],
      drifted.map(({ row, record }) => [
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
      ]),
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

/** A table of values from the hub and the repository, each escaped for its cell. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  return markdownTable(
    header,
    rows.map((row) => row.map(markdownCell)),
  );
}

function renderData(summary: Summary): string {
  return `${STATUS_FILE_HEADS[STATUS_DATA]}${stringify(summary, { lineWidth: 0 })}`;
}

function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}
