import { stringify } from "yaml";
import type { ReadinessPhase } from "../api/conditions.ts";
import { CONFIRM_PRUNE_ANNOTATION, isManagedByFleet, PRUNE_CONFIRMATION_CONFIGMAP } from "../api/labels.ts";
import { compareStrings, type Diagnostic } from "../fleet/diagnostic.ts";
import { formatIdentity, type ResourceIdentity } from "../fleet/identity.ts";
import type { KubeObject } from "../kube/object.ts";
import type { PruneCandidate, PruneReport } from "../mirror/decide.ts";
import { type PlacementRollupRow, placementRollup } from "../placement/rollup.ts";
import type { RolloutReport } from "../rollout/edge.ts";
import { type RolloutVerdict, rolloutVerdict } from "../rollout/state.ts";
import type { SyncResult } from "../sync/sync.ts";
import { markdownCell, markdownTable, markdownText } from "../text/markdown.ts";
import {
  clusterPage,
  compareRows,
  driftSection,
  type HubCrRow,
  hubCrRow,
  isClusterPage,
  listed,
  more,
  PHASE_MARK,
  PHASE_ORDER,
  RESOURCE_COLUMNS,
  readinessCounts,
  resourceCells,
  resourcesTable,
  table,
  tally,
  versionText,
  withoutUndefined,
} from "./row.ts";
import { yamlList } from "./yaml-list.ts";

// The status files the bot commits back to the fleet repository: README.md for people on the Git host,
// fleet.yaml for tools, both from one summary so they never disagree. The output is a pure function of
// state, byte for byte: no timestamps, no head commit, no record of what one sync did (a prune just done,
// a CR just created). Otherwise every sync, and every status commit itself, would make a new status commit.

const STATUS_README = "README.md";
const STATUS_DATA = "fleet.yaml";
/** The index of the clusters' pages, when the README summarizes. */
export const CLUSTER_INDEX = "clusters/README.md";

const HEADS: Readonly<Record<string, string>> = {
  [STATUS_README]: "# Fleet status\n",
  [STATUS_DATA]: "# Written by knative-fleet from the hub after each sync; edits here are overwritten.\n",
  [CLUSTER_INDEX]: "# Fleet status by cluster\n",
};
const CLUSTER_PAGE_HEAD = "# Cluster status\n";
const WRITTEN = "Written by knative-fleet from the hub after each sync; edits here are overwritten.";

/**
 * The first line of the status file at `name`, or undefined for a path the status never writes. A file at a
 * status file's path that does not start with it is not the bot's (a README of the repository, a fleet
 * file): the write-back never overwrites it, nor deletes it.
 */
export const statusFileHead = (name: string): string | undefined =>
  HEADS[name] ?? (isClusterPage(name) ? CLUSTER_PAGE_HEAD : undefined);

export interface StatusFile {
  /** The file's path inside the status folder: `README.md`, `clusters/fleet-system/eu-1.md`. */
  name: string;
  content: string;
}

// GitHub shows a folder's README.md (the status folder's page) up to its first 512,000 bytes and drops the
// rest without a word (https://github.com/isaacs/github/issues/1610); it renders other Markdown files "if
// the files are small (generally less than 2 MB)" (https://docs.github.com/en/repositories/creating-and-managing-repositories/repository-limits).

/**
 * Above this many clusters the README summarizes: the CRs counted by readiness and reason, by version and
 * by wave, the ones not ready listed, every other table cut to MAX_LISTED rows; each cluster's CRs are on
 * a page of its own (row.ts clusterPage), listed in clusters/README.md; fleet.yaml keeps every CR. Measured
 * (scripts/bench-reports.ts, docs/scale.md): in a fleet mid-rollout a cluster with its two CRs takes ~570
 * bytes of the whole README, so 1,000 clusters passed 512,000 bytes; at 200 the whole README is ~110 KiB,
 * a fifth of that with room for a bad day (long failure messages, drift), and 400 rows is already more than
 * anyone reads through.
 */
export const SUMMARY_ABOVE_CLUSTERS = 200;
/** Rows a table of the summarized README lists at most; fleet.yaml and the clusters' pages have the rest. */
const MAX_LISTED = 100;
/** The CRs not ready are what a reader of a big fleet looks for: more of them are listed. */
const MAX_NOT_READY_LISTED = 300;
/** A status message in the summarized README's list is cut to this many characters (its page has it whole). */
const MAX_LISTED_MESSAGE = 200;

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

/**
 * The status folder's files: README.md then fleet.yaml; above SUMMARY_ABOVE_CLUSTERS clusters, the README
 * summarizes, and the clusters' index and one page per cluster follow.
 */
export function renderStatusSummary(input: StatusSummaryInput): StatusFile[] {
  const summary = summarize(input);
  // The rollout's sentence is read off the sync's report; fleet.yaml keeps the report's fields.
  const verdict = input.sync.rollout && rolloutVerdict(input.sync.rollout);
  const data = { name: STATUS_DATA, content: renderData(summary) };
  const clusters = Map.groupBy(summary.resources, (row) => row.cluster);
  if (clusters.size <= SUMMARY_ABOVE_CLUSTERS)
    return [{ name: STATUS_README, content: renderReadme(summary, verdict, undefined) }, data];
  const fleet: FleetView = {
    clusters,
    waves: input.sync.rollout?.clusterWaves ?? {},
    waveOrder: waveOrderOf(input.sync.rollout),
    waiting: new Map(summary.rollout?.waiting.map((w) => [w.resource, w.reason])),
  };
  return [
    { name: STATUS_README, content: renderReadme(summary, verdict, fleet) },
    data,
    { name: CLUSTER_INDEX, content: clusterIndex(fleet) },
    ...[...clusters].map(([cluster, rows]) => ({
      name: clusterPage(cluster),
      content: page(cluster, rows, fleet),
    })),
  ];
}

/** A summarized fleet: its rows by cluster, each cluster's wave, and why each waiting CR waits. */
interface FleetView {
  clusters: Map<string, HubCrRow[]>;
  /** Each cluster's wave (`namespace/name`), and the waves in the order they completed, the open one, the rest by name. */
  waves: Readonly<Record<string, string>>;
  waveOrder: string[];
  /** By `Kind namespace/name`. */
  waiting: Map<string, string>;
}

function waveOrderOf(rollout: StatusSync["rollout"]): string[] {
  const named = new Set(Object.values(rollout?.clusterWaves ?? {}));
  const known = [...(rollout?.history ?? []).map((h) => h.wave), ...(rollout?.wave ? [rollout.wave] : [])];
  return [...new Set([...known.filter((wave) => named.has(wave)), ...[...named].sort(compareStrings)])];
}

/** The pages a clusters' index lists (paths inside the status folder): what the write-back may prune. */
export const clusterPagesListed = (index: string): string[] =>
  [...index.matchAll(/\]\(([-a-z0-9._/]+\.md)\)/g)]
    .map((link) => `clusters/${link[1]}`)
    .filter(isClusterPage);

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

/** The README: every CR in one table, or for a big fleet (`fleet`) counts, the CRs not ready and links. */
function renderReadme(
  summary: Summary,
  rollout: RolloutVerdict | undefined,
  fleet: FleetView | undefined,
): string {
  const limit = fleet ? MAX_LISTED : Number.POSITIVE_INFINITY;
  const sections = [
    HEADS[STATUS_README]!.trimEnd(),
    WRITTEN,
    readinessCounts(summary.resources),
    ...(fleet
      ? [
          `${fleet.clusters.size} clusters, more than ${SUMMARY_ABOVE_CLUSTERS}: this page counts the CRs and ` +
            `lists those not ready; each cluster's CRs are on its own page, listed in [${CLUSTER_INDEX}](${CLUSTER_INDEX}), ` +
            `and ${STATUS_DATA} has every CR.`,
          countsSection(summary.resources, fleet),
          notReadySection(summary.resources),
        ]
      : [resourcesTable(summary.resources)]),
    placementsSection(summary.placements, limit),
    driftSection(summary.resources, limit),
    rolloutSection(summary.rollout, rollout, limit),
    validationSection(summary, limit),
    conflictsSection(summary.conflicts, limit),
    applyErrorsSection(summary.applyErrors, limit),
    pruneSection(summary.prune, limit),
    retainedSection(summary.prune.retained, limit),
  ];
  return `${sections.filter((section) => section !== "").join("\n\n")}\n`;
}

/** A big fleet's CRs that are not ready, each cluster linked to its page, where its message is whole. */
function notReadySection(rows: readonly HubCrRow[]): string {
  const notReady = rows.filter((row) => row.phase !== "Current");
  if (notReady.length === 0) return "";
  const cut = (text = "") =>
    text.length > MAX_LISTED_MESSAGE ? `${[...text].slice(0, MAX_LISTED_MESSAGE).join("")}…` : text;
  const shown = notReady.slice(0, MAX_NOT_READY_LISTED).map((row) => {
    const [cluster, ...cells] = resourceCells(row, cut(row.message)).map(markdownCell);
    return [`[${cluster}](${clusterPage(row.cluster)})`, ...cells];
  });
  return [
    `## Not ready (${notReady.length})`,
    markdownTable(RESOURCE_COLUMNS, shown),
    ...(notReady.length > shown.length
      ? [`… and ${notReady.length - shown.length} more, counted above: each is on its cluster's page.`]
      : []),
  ].join("\n\n");
}

/** Per wave: its clusters, their CRs by readiness, and how many wait for the rollout. */
function wavesTable(rows: readonly HubCrRow[], fleet: FleetView): string {
  if (fleet.waveOrder.length === 0) return "";
  const waves = new Map(
    fleet.waveOrder.map((wave) => [wave, { clusters: new Set<string>(), phases: [0, 0, 0, 0], waiting: 0 }]),
  );
  for (const row of rows) {
    const wave = waves.get(fleet.waves[row.cluster] ?? "");
    if (wave === undefined) continue;
    wave.clusters.add(row.cluster);
    wave.phases[PHASE_ORDER.indexOf(row.phase)]! += 1;
    if (fleet.waiting.has(formatIdentity(row))) wave.waiting += 1;
  }
  return table(
    ["Wave", "Clusters", "CRs", "Ready", "Not ready", "In progress", "Waiting"],
    [...waves]
      .slice(0, MAX_LISTED)
      .map(([name, { clusters, phases, waiting }]) => [
        name,
        ...[
          clusters.size,
          phases.reduce((a, b) => a + b),
          phases[0]!,
          phases[1]!,
          phases[2]! + phases[3]!,
          waiting,
        ].map(String),
      ]),
  );
}

/**
 * A big fleet's CRs counted: by readiness and reason, by kind and version, and by rollout wave (in the
 * order the waves completed, then the open one, then the others by name).
 */
function countsSection(rows: readonly HubCrRow[], fleet: FleetView): string {
  const phaseOf = (row: HubCrRow) => PHASE_ORDER.indexOf(row.phase);
  const byReason = [...Map.groupBy(rows, (row) => JSON.stringify([row.phase, row.reason])).values()]
    .sort(([a], [b]) => phaseOf(a!) - phaseOf(b!) || compareStrings(a!.reason ?? "", b!.reason ?? ""))
    .map((group) => [PHASE_MARK[group[0]!.phase], group[0]!.reason ?? "", String(group.length)]);
  const byVersion = [...Map.groupBy(rows, (row) => JSON.stringify([row.kind, versionText(row) ?? "-"]))]
    .sort(([a], [b]) => compareStrings(a, b))
    .map(([, group]) => [group[0]!.kind, versionText(group[0]!) ?? "-", String(group.length)]);
  return [
    "## Counts",
    table(["Ready", "Reason", "CRs"], byReason.slice(0, MAX_LISTED)),
    table(["Kind", "Version", "CRs"], byVersion.slice(0, MAX_LISTED)),
    wavesTable(rows, fleet),
  ]
    .filter((part) => part !== "")
    .join("\n\n");
}

/**
 * The rollout's verdict (rollout/state.ts rolloutVerdict), then the CRs that wait and why; a big fleet's
 * (a finite `limit`) counted by why, each CR on its cluster's page.
 */
function rolloutSection(
  rollout: RolloutSummary | undefined,
  verdict: RolloutVerdict | undefined,
  limit: number,
): string {
  if (rollout === undefined || verdict === undefined) return "";
  const { waiting } = rollout;
  return [
    "## Rollout",
    `${markdownText(verdict.message)}.`,
    ...(waiting.length === 0
      ? []
      : Number.isFinite(limit)
        ? [
            listed(
              ["Waits for", "CRs"],
              [...tally(waiting, (w) => w.reason)].sort(([a, m], [b, n]) => n - m || compareStrings(a, b)),
              ([reason, crs]) => [reason, String(crs)],
              limit,
            ),
          ]
        : [
            table(
              ["CR", "Waits for"],
              waiting.map((w) => [w.resource, w.reason]),
            ),
          ]),
  ].join("\n\n");
}

function validationSection({ validationErrors, invalidFiles }: Summary, limit: number): string {
  if (validationErrors.length === 0) return "";
  const declared = invalidFiles.flatMap(({ path, declares }) =>
    declares.map((identity) => `- ${markdownText(formatIdentity(identity))} (${markdownText(path)})`),
  );
  const kept =
    declared.length > limit ? [...declared.slice(0, limit), more(declared.length - limit)] : declared;
  return [
    "## Validation errors",
    "A file with an error is not applied: the CRs it declares keep their last good state on the hub, and " +
      "nothing is pruned until every file is valid.",
    listed(
      ["Location", "Field", "Message"],
      validationErrors,
      (d) => [`${d.path}:${d.line}:${d.column}`, d.field, d.message],
      limit,
    ),
    ...(kept.length > 0 ? ["Kept at their last good state:", kept.join("\n")] : []),
  ].join("\n\n");
}

function conflictsSection(conflicts: Summary["conflicts"], limit: number): string {
  if (conflicts.length === 0) return "";
  return [
    "## Conflicts",
    "A CR of the same kind and name is on the hub but is not this repository's: made by hand, or mirrored " +
      "from another repository. knative-fleet leaves it alone: it is neither updated nor pruned. The last " +
      "column says how to hand it over.",
    listed(["CR", "File", "Whose"], conflicts, (c) => [formatIdentity(c), c.path, c.reason ?? ""], limit),
  ].join("\n\n");
}

function applyErrorsSection(errors: Summary["applyErrors"], limit: number): string {
  if (errors.length === 0) return "";
  return [
    "## Not applied",
    "knative-fleet's admission or the hub refused these CRs; they keep their last applied state.",
    listed(["CR", "File", "Error"], errors, (e) => [formatIdentity(e), e.path, e.error], limit),
  ].join("\n\n");
}

function pruneSection(prune: PruneSummary, limit: number): string {
  switch (prune.state) {
    case "none":
      return "";
    case "failed":
      return [
        "## Prune failed",
        "These CRs are no longer in Git, but the hub refused to delete them; the next sync tries again.",
        candidatesTable(prune.candidates, true, limit),
      ].join("\n\n");
    case "skipped":
      return [
        "## Prune skipped",
        `These CRs are no longer in Git but are not pruned: ${markdownText(prune.message ?? "")}.`,
        candidatesTable(prune.candidates, false, limit),
      ].join("\n\n");
    case "held": {
      const { namespace, token } = prune.confirmation!;
      return [
        "## Prune held",
        `Held: ${markdownText(prune.message ?? "")}. Once confirmed, these CRs are deleted and Knative is ` +
          "uninstalled from their clusters:",
        candidatesTable(prune.candidates, false, limit),
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

function retainedSection(retained: readonly PruneCandidate[], limit: number): string {
  if (retained.length === 0) return "";
  return [
    "## Kept by `fleet.knative.dev/prune: disabled`",
    "These CRs are no longer in Git and are never pruned; delete them on the hub to uninstall.",
    candidatesTable(retained, false, limit),
  ].join("\n\n");
}

function candidatesTable(candidates: readonly PruneCandidate[], withErrors: boolean, limit: number): string {
  return listed(
    withErrors ? ["CR", "File", "Error"] : ["CR", "File"],
    candidates,
    (c) => [formatIdentity(c), c.path ?? "", ...(withErrors ? [c.error ?? ""] : [])],
    limit,
  );
}

function placementsSection(rows: readonly PlacementRollupRow[] | undefined, limit: number): string {
  if (rows === undefined) return "";
  return [
    "## Placements",
    listed(
      ["Placement", "File", "Selected", "Ready", "Not ready (first)", "Left (kept for the grace period)"],
      rows,
      (row) => [
        row.placement,
        `${row.path}:${row.line}`,
        row.pending ? `pending: ${row.pending}` : String(row.selected.length),
        String(row.ready),
        row.notReady === 0 ? "0" : `${row.notReady} (${row.firstNotReady ?? ""})`,
        row.left.length > limit
          ? `${row.left.slice(0, limit).join(", ")} and ${row.left.length - limit} more`
          : row.left.join(", "),
      ],
      limit,
    ),
    ...differsList(rows, limit),
  ].join("\n\n");
}

/** The clusters that differ from the others of their placement (placement/rollup.ts), when some do. */
function differsList(rows: readonly PlacementRollupRow[], limit: number): string[] {
  const lines = rows.flatMap((row) =>
    (row.differs ?? []).map((what) => `- ${markdownText(row.placement)}: ${markdownText(what)}`),
  );
  const shown = lines.length > limit ? [...lines.slice(0, limit), more(lines.length - limit)] : lines;
  return lines.length > 0
    ? ["Clusters that differ from the others of their placement:", shown.join("\n")]
    : [];
}

/** The clusters' index: a row per cluster, linked to its page, with its wave and its CRs' readiness. */
function clusterIndex(fleet: FleetView): string {
  const rows = [...fleet.clusters].map(([cluster, crs]) => {
    const phases = tally(crs, (row) => row.phase);
    const of = (phase: ReadinessPhase) => String(phases.get(phase) ?? 0);
    return [
      `[${markdownCell(cluster)}](${clusterPage(cluster).slice("clusters/".length)})`,
      markdownCell(fleet.waves[cluster] ?? ""),
      String(crs.length),
      of("Current"),
      of("Failed"),
      String((phases.get("InProgress") ?? 0) + (phases.get("Terminating") ?? 0)),
    ];
  });
  return [
    HEADS[CLUSTER_INDEX]!.trimEnd(),
    `${WRITTEN} Every cluster of the [fleet status](../${STATUS_README}), with its CRs on its own page.`,
    markdownTable(["Cluster", "Wave", "CRs", "Ready", "Not ready", "In progress"], rows),
  ]
    .join("\n\n")
    .concat("\n");
}

/** A cluster's page: its CRs whole, as the README of a small fleet shows them, its drift, why its CRs wait. */
function page(cluster: string, rows: readonly HubCrRow[], fleet: FleetView): string {
  const up = "../".repeat(clusterPage(cluster).split("/").length - 1);
  const wave = fleet.waves[cluster];
  const waiting = rows.flatMap((row) => {
    const reason = fleet.waiting.get(formatIdentity(row));
    return reason === undefined ? [] : [[formatIdentity(row), reason]];
  });
  return [
    CLUSTER_PAGE_HEAD.trimEnd(),
    `**${markdownText(cluster)}**, one cluster of the [fleet status](${up}${STATUS_README}). ${WRITTEN}`,
    `${readinessCounts(rows)}${wave === undefined ? "" : ` Rollout wave: ${markdownText(wave)}.`}`,
    resourcesTable(rows),
    driftSection(rows, Number.POSITIVE_INFINITY),
    waiting.length > 0 ? ["## Rollout", table(["CR", "Waits for"], waiting)].join("\n\n") : "",
  ]
    .filter((section) => section !== "")
    .join("\n\n")
    .concat("\n");
}

/** fleet.yaml: the summary's YAML, its first key the CRs (summarize's order), rendered row by row. */
function renderData({ resources, ...rest }: Summary): string {
  return `${HEADS[STATUS_DATA]}${yamlList("resources", resources)}${stringify(rest, { lineWidth: 0 })}`;
}
