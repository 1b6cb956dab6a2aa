import { compareStrings, formatDiagnostic, isError } from "../fleet/diagnostic.ts";
import { clusterKey, formatIdentity } from "../fleet/identity.ts";
import type { SelectedCluster } from "../placement/expand.ts";
import { NEEDS_HUB, type PlacementPlan } from "../placement/plan.ts";
import type { RolloutPlan } from "../rollout/plan.ts";
import { shortCommit } from "../text/commit.ts";
import { count } from "../text/count.ts";
import {
  markdownCell,
  markdownCode,
  markdownCodeBlock,
  markdownTable,
  markdownText,
} from "../text/markdown.ts";
import { actionText, clusterSection, SEVERITY_MARK, yamlBlock } from "./markdown-objects.ts";
import type { ClusterPlan, Finding, FleetPlan, ResourcePlan } from "./report.ts";

/** The first line of every plan comment: how CI finds its own comment to update instead of adding one. */
export const PLAN_MARKER = "<!-- knative-fleet-plan -->";

/**
 * The plan as a pull-request comment: verdict, a summary table (cluster, CR, action, objects +/~/-),
 * validation errors and findings, one collapsed section per cluster, then the placements and the rollout.
 * A big plan (more than SUMMARY_ABOVE_CLUSTERS clusters, or one whose summary alone would take half the
 * comment and that does not fit whole) is summarized: see summarizedParts. Same plan, same text. Every
 * value that comes from the repository, the pull request or a cluster goes through text/markdown.ts,
 * whatever section it is in.
 */
export function renderMarkdown(plan: FleetPlan, maxLength = GITHUB_COMMENT_LIMIT): string {
  const resources = plan.clusters.flatMap((cluster) => cluster.resources);
  const opening = (limit: number) => [
    PLAN_MARKER,
    `## knative-fleet plan: ${count(resources.length, "CR")} on ${count(plan.clusters.length, "cluster")}`,
    header(plan, limit),
    verdictLine(plan),
  ];
  const clusters = clustersNamed(plan);
  if (clusters <= SUMMARY_ABOVE_CLUSTERS) {
    const all = Number.POSITIVE_INFINITY;
    const summary = [
      ...opening(all),
      resources.length > 0 ? summaryTable(resources) : "Merging changes no CR.",
      ...checkSections(plan, resources, all),
    ];
    const trailer = trailerSections(plan, all);
    const whole = withDetails(plan, summary, plan.clusters, trailer, maxLength);
    if (whole.leftOut === 0 || joined([...summary, ...trailer]).length <= maxLength / 2) return whole.text;
  }
  const { summary, trailer, order } = summarizedParts(plan, resources, opening(MAX_LISTED), clusters);
  return withDetails(plan, summary, order, trailer, maxLength).text;
}

/** GitHub's limit on a comment's body, in characters; a longer body is refused whole. */
export const GITHUB_COMMENT_LIMIT = 65_536;
// The API answers 422 "Body is too long (maximum is 65536 characters)" (as quoted in
// https://github.com/telia-oss/github-pr-resource/issues/259; https://github.com/dead-claudia/github-limits
// lists the limits). GitLab refuses a note over 1,000,000 characters
// (Gitlab::Database::MAX_TEXT_SIZE_LIMIT, gitlab-org/gitlab-foss@5af535d9; gitlab-org/gitlab#426314): the
// one limit fits both hosts, which is how fleet-example's CI posts the same text to either.

/**
 * Above this many clusters (those with a changed CR and those the placements select) the comment is
 * summarized; at or below it, when the plan does not fit whole and its summary alone would take more than
 * half the comment. Measured (scripts/bench-reports.ts, docs/scale.md): a cluster whose two placement CRs
 * a merge upgrades in a rollout adds ~1.2 KB outside the per-cluster details (two rows in the summary
 * table, two in the rollout's, a merged spec per placement): half the comment at 25 clusters, all of it at
 * 50, past which the last-resort cut dropped the findings, the placements and the rollout. A fleet of
 * per-cluster files adds ~170 bytes per cluster, so its plan keeps the whole table well past 25 clusters.
 */
export const SUMMARY_ABOVE_CLUSTERS = 50;
/** Rows, lines and clusters a summarized comment lists at most per table or list (~150 characters each). */
const MAX_LISTED = 50;
/** The distinct merged specs a summarized placement shows (each is YAML in a collapsed section). */
const MAX_SPECS = 10;

/** The clusters the plan names: those of its CRs, and those its placements select before and after. */
function clustersNamed(plan: FleetPlan): number {
  const named = new Set(plan.clusters.map((cluster) => cluster.cluster));
  for (const entry of plan.placements.placements) {
    for (const cluster of entry.before ?? []) named.add(cluster);
    for (const cluster of entry.after ?? []) named.add(clusterKey(cluster));
  }
  return named.size;
}

const joined = (sections: readonly string[]) => `${sections.filter((s) => s !== "").join("\n\n")}\n`;

/**
 * The summary, as many clusters' details as fit in the limit, in the order given, and the trailer. The
 * details are rendered one at a time and only as far as they fit: a big plan's run to megabytes. Too long
 * for one comment (GitHub refuses the whole body): the verdict, the summary, the errors and warnings, the
 * placements and the rollout stay; the per-cluster details go, from the last cluster up.
 */
function withDetails(
  plan: FleetPlan,
  summary: readonly string[],
  clusters: readonly ClusterPlan[],
  trailer: readonly string[],
  maxLength: number,
): { text: string; leftOut: number } {
  const room = maxLength - joined([...summary, ...trailer]).length;
  const details: string[] = [];
  let used = 0;
  for (const cluster of clusters) {
    const section = clusterSection(cluster, plan.source);
    if (used + section.length + 2 > room) break;
    details.push(section);
    used += section.length + 2;
  }
  if (details.length === clusters.length)
    return { text: joined([...summary, ...details, ...trailer]), leftOut: 0 };
  const noteRoom = leftOutNote(clusters.length, clusters.length).length + 2;
  while (details.length > 0 && used + noteRoom > room) used -= details.pop()!.length + 2;
  const leftOut = clusters.length - details.length;
  const kept = joined([...summary, ...details, leftOutNote(leftOut, clusters.length), ...trailer]);
  return { text: kept.length <= maxLength ? kept : cutToLength(kept, maxLength), leftOut };
}

function leftOutNote(leftOut: number, clusters: number): string {
  return (
    `⚠️ The details of ${leftOut} of ${count(clusters, "cluster")} are left out: the whole plan passes ` +
    `a comment's limit of ${GITHUB_COMMENT_LIMIT.toLocaleString("en-US")} characters. ` +
    "`knative-fleet plan -o json` has every change."
  );
}

/**
 * A big plan as one comment: the CRs counted by action, kind and version; the CRs that need a look (an
 * error or a warning, a create, a delete, a reinstall, a blocked or refused change) listed; every list cut
 * to MAX_LISTED; the placements' selections counted and their merged specs shown once per distinct spec;
 * the rollout per wave. The details follow as far as they fit: clusters with an error first, then those
 * with a CR listed, then the others.
 */
function summarizedParts(
  plan: FleetPlan,
  resources: readonly ResourcePlan[],
  opening: readonly string[],
  clusters: number,
) {
  const looks = resources.filter(needsALook);
  const shown = [...looks].sort((a, b) => Number(!hasError(a)) - Number(!hasError(b))).slice(0, MAX_LISTED);
  const flagged = new Set(looks.map((r) => r.cluster));
  const summary = [
    ...opening,
    `A plan too big to show whole (${count(clusters, "cluster")}): this comment counts the CRs and lists ` +
      `those that need a look (an error or a warning, a create, a delete, a reinstall, a blocked or refused ` +
      `change): ${looks.length} of ${resources.length}. \`knative-fleet plan -o json\` has every change.`,
    resources.length > 0 ? countsTable(resources) : "Merging changes no CR.",
    ...(looks.length > 0
      ? [
          `### CRs that need a look (${looks.length})`,
          summaryTable(shown),
          ...(looks.length > shown.length
            ? [`… and ${looks.length - shown.length} more: \`-o json\` has them.`]
            : []),
        ]
      : []),
    ...checkSections(plan, resources, MAX_LISTED),
  ];
  const trailer = trailerSections(plan, MAX_LISTED);
  // The details of clusters with an error first, then of those with a CR listed, then the others.
  const rank = (c: ClusterPlan) => (c.resources.some(hasError) ? 0 : flagged.has(c.cluster) ? 1 : 2);
  const order = [0, 1, 2].flatMap((r) => plan.clusters.filter((c) => rank(c) === r));
  return { summary, trailer, order };
}

const hasError = (resource: ResourcePlan): boolean =>
  resource.findings.some((finding) => finding.severity === "error");
const needsALook = (resource: ResourcePlan): boolean =>
  resource.action !== "update" || resource.findings.length > 0;

const ACTION_ORDER = ["create", "update", "reinstall", "delete", "blocked", "refused"];

/** `1.21.3 → 1.22.1`, `1.22.1` for a create, nothing for a delete. */
function versionChange({ version }: ResourcePlan): string {
  const { from, to } = version ?? {};
  return to ? `${from && from !== to ? `${from} → ` : ""}${to}` : "";
}

/** CRs and their clusters counted by action, kind and version change. */
function countsTable(resources: readonly ResourcePlan[]): string {
  const groups = Map.groupBy(resources, (r) => JSON.stringify([r.action, r.kind, versionChange(r)]));
  const rows = [...groups.values()]
    .sort(
      ([a], [b]) =>
        ACTION_ORDER.indexOf(a!.action) - ACTION_ORDER.indexOf(b!.action) ||
        compareStrings(a!.kind, b!.kind) ||
        compareStrings(versionChange(a!), versionChange(b!)),
    )
    .slice(0, MAX_LISTED)
    .map((members) => [
      members[0]!.action,
      markdownCell(members[0]!.kind),
      markdownCell(versionChange(members[0]!)),
      String(members.length),
      String(new Set(members.map((r) => r.cluster)).size),
    ]);
  return markdownTable(["Action", "Kind", "Version", "CRs", "Clusters"], rows);
}

/**
 * The last resort when even the summary passes the limit (thousands of CRs): whole lines up to the limit,
 * the open code fence and `<details>` closed, and a line that says the rest is cut.
 */
function cutToLength(text: string, maxLength: number): string {
  const tail = "\n\n⚠️ The plan is cut here to fit one comment: `knative-fleet plan -o json` has all of it.\n";
  const lines: string[] = [];
  let length = 0;
  let fence: string | undefined;
  let openDetails = 0;
  const closing = () => (fence ? `\n${fence}` : "").length + openDetails * "\n</details>".length;
  for (const line of text.split("\n")) {
    if (length + line.length + 1 + closing() + tail.length + 20 > maxLength) break;
    lines.push(line);
    length += line.length + 1;
    const fenceRun = /^(`{3,})/.exec(line)?.[1];
    if (fenceRun && (fence === undefined || fenceRun === fence)) fence = fence ? undefined : fenceRun;
    if (fence === undefined)
      openDetails += (line.match(/<details>/g) ?? []).length - (line.match(/<\/details>/g) ?? []).length;
  }
  const closers = [
    ...(fence ? [fence] : []),
    ...Array.from({ length: Math.max(0, openDetails) }, () => "</details>"),
  ];
  return `${[...lines, ...closers].join("\n")}${tail}`;
}

/** The revisions, live or offline, the changed fleet files (at most `limit`) and the uncommitted ones. */
function header(plan: FleetPlan, limit: number): string {
  const revision = ({ ref, commit }: FleetPlan["base"]) =>
    commit.startsWith(ref)
      ? markdownCode(shortCommit(commit))
      : `${markdownCode(ref)} (${markdownText(shortCommit(commit))})`;
  const files =
    plan.files
      .slice(0, limit)
      .map(({ path, change }) => `${change} ${markdownCode(path)}`)
      .join(", ") +
    (plan.files.length > limit ? ` and ${count(plan.files.length - limit, "more file")}` : "");
  return [
    `Merging ${revision(plan.head)} into ${revision(plan.base)} of ${markdownCode(plan.repository)}.`,
    plan.source === "live"
      ? "**Live**: each cluster was read, and every change is the API server's server-side-apply dry run."
      : plan.offlineReason !== undefined
        ? `⚠️ **Offline**: ${markdownText(plan.offlineReason)}; no cluster was read, each CR's rendered base is compared with its rendered head.`
        : "**Offline** (no --kubeconfig or --context): no cluster was read; each CR's rendered base is compared with its rendered head.",
    `Changed fleet files: ${files || "none"}.`,
    ...uncommittedLine(plan),
  ].join("  \n");
}

/** Uncommitted files listed at most; the rest counted. */
const MAX_UNCOMMITTED_LISTED = 10;

/** The checkout's uncommitted edits to fleet files, which the plan (of commits) leaves out. */
function uncommittedLine({ uncommitted }: FleetPlan): string[] {
  if (uncommitted === undefined || uncommitted.length === 0) return [];
  const listed = uncommitted
    .slice(0, MAX_UNCOMMITTED_LISTED)
    .map(({ path, change }) => `${change} ${markdownCode(path)}`);
  const more = uncommitted.length - listed.length;
  return [
    `⚠️ Uncommitted edits to fleet files are not in this plan (it reads commits): ${listed.join(", ")}` +
      `${more > 0 ? ` and ${count(more, "more file")}` : ""}.`,
  ];
}

/**
 * Errors and warnings counted; a live plan that fell back to offline (exit code 2) never reads ✅: its
 * verdict says first that the plan is not the live one asked for.
 */
function verdictLine(plan: FleetPlan): string {
  const counts = [
    ...(plan.errors > 0 ? [`❌ **${count(plan.errors, "error")}**`] : []),
    ...(plan.warnings > 0 ? [`⚠️ ${count(plan.warnings, "warning")}`] : []),
  ].join(", ");
  if (plan.offlineReason !== undefined)
    return `⚠️ **Offline plan**: the hub could not be read; ${counts || "no errors, no warnings"}.`;
  return counts || "✅ No errors, no warnings.";
}

function summaryTable(resources: readonly ResourcePlan[]): string {
  const rows = resources.map((r) => {
    const { created, changed, deleted } = r.objects;
    return [
      markdownCell(r.cluster),
      markdownCell(formatIdentity(r)),
      actionText(r),
      `+${created.length} ~${changed.length} -${deleted.length}`,
    ];
  });
  return markdownTable(["Cluster", "CR", "Action", "Objects +/~/-"], rows);
}

/** The validation, settings and findings sections, each listing at most `limit` items: whole or summarized. */
function checkSections(plan: FleetPlan, resources: readonly ResourcePlan[], limit: number): string[] {
  return [
    validationSection(plan, limit),
    settingsWarningsSection(plan, limit),
    findingsSection(plan, resources, limit),
  ];
}

/** The placements and rollout sections that follow the details, each listing at most `limit` items. */
function trailerSections(plan: FleetPlan, limit: number): string[] {
  return [placementsSection(plan.placements, limit), plan.rollout ? rolloutSection(plan.rollout, limit) : ""];
}

function validationSection(plan: FleetPlan, limit: number): string {
  const all = plan.diagnostics.filter(isError);
  const errors = all.slice(0, limit);
  const total = all.length + plan.omittedDiagnostics;
  if (total === 0) return "";
  const left = total - errors.length;
  const omitted = left > 0 ? [`… ${count(left, "more error")} left out`] : [];
  return [
    `### Validation errors in head (${total})`,
    "A file with an error is not applied: its CRs keep their last good state, and nothing is pruned.",
    markdownCodeBlock("text", [...errors.map(formatDiagnostic), ...omitted]),
  ].join("\n\n");
}

/** The settings check's warnings: what head's settings do that is likely not meant; nothing is held back. */
function settingsWarningsSection(plan: FleetPlan, limit: number): string {
  const warnings = plan.diagnostics.filter((diagnostic) => !isError(diagnostic));
  if (warnings.length === 0) return "";
  const left = warnings.length - Math.min(limit, warnings.length);
  return [
    `### Setting warnings in head (${warnings.length})`,
    "These apply as written; check that they are meant.",
    markdownCodeBlock("text", [
      ...warnings.slice(0, limit).map(formatDiagnostic),
      ...(left > 0 ? [`… ${count(left, "more warning")} left out`] : []),
    ]),
  ].join("\n\n");
}

/**
 * Every finding, the fleet's first, errors before warnings; a summarized comment's (a finite `limit`)
 * counted by code first, then at most `limit` of them, errors first.
 */
function findingsSection(plan: FleetPlan, resources: readonly ResourcePlan[], limit: number): string {
  const bySeverity = <T extends Finding>(findings: readonly T[]) =>
    [...findings].sort((a, b) => compareStrings(a.severity, b.severity));
  const all = [
    ...bySeverity(plan.findings).map((finding) => ({ finding, about: markdownText(finding.subject) })),
    ...resources.flatMap((resource) =>
      bySeverity(resource.findings).map((finding) => ({
        finding,
        about: `${markdownText(resource.cluster)}, ${markdownText(formatIdentity(resource))}`,
      })),
    ),
  ];
  if (all.length === 0) return "";
  const line = ({ finding, about }: (typeof all)[number]) =>
    `- ${SEVERITY_MARK[finding.severity]} ${about}: ${markdownCode(finding.code)} ${markdownText(finding.message)}`;
  if (all.length <= limit) return ["### Findings", all.map(line).join("\n")].join("\n\n");
  const shown = [...all].sort((a, b) => compareStrings(a.finding.severity, b.finding.severity));
  const counted = [...Map.groupBy(shown, ({ finding }) => `${finding.severity} ${finding.code}`)].map(
    ([, [{ finding }, ...others]]) =>
      `${SEVERITY_MARK[finding.severity]} ${markdownCode(finding.code)} ${others.length + 1}`,
  );
  return [
    `### Findings (${all.length}: ${counted.join(", ")})`,
    [...shown.slice(0, limit).map(line), `… and ${all.length - limit} more: \`-o json\` has them all.`].join(
      "\n",
    ),
  ].join("\n\n");
}

const INVENTORY_TEXT: Record<PlacementPlan["inventory"], string> = {
  hub: "Selection read from the hub's ClusterProfiles and PlacementDecisions.",
  snapshot: "Selection read from the ClusterProfile snapshot given with --cluster-profiles.",
  none: "No inventory: no --kubeconfig and no --cluster-profiles were given.",
};

/**
 * Per placement: the clusters it selects now and after the merge, who joins and who leaves, and each
 * cluster's CR with its merged spec. The CRs themselves are planned above, with every other CR. A
 * summarized comment's (a finite `limit`) counts the selections, lists at most `limit` clusters joining or
 * leaving, and shows each distinct merged spec once, for the clusters that share it.
 */
function placementsSection(plan: PlacementPlan, limit: number): string {
  if (plan.placements.length === 0) return "";
  const summarized = Number.isFinite(limit);
  const lines = ["### Placements", INVENTORY_TEXT[plan.inventory]];
  const list = (clusters: readonly string[] | undefined) =>
    clusters === undefined
      ? "—"
      : clusters.length === 0
        ? "none"
        : clusters
            .slice(0, limit)
            .map((c) => markdownCode(c))
            .join(", ") + (clusters.length > limit ? ` and ${clusters.length - limit} more` : "");
  const selection = (clusters: readonly string[] | undefined) =>
    summarized && clusters !== undefined ? count(clusters.length, "cluster") : list(clusters);
  for (const entry of plan.placements) {
    lines.push(`#### ${markdownCode(entry.placement)} (${markdownCode(entry.path)})`);
    if (entry.pending) {
      // The reason the hub is needed is said once, in the findings, for every placement it holds back.
      lines.push(
        entry.pending === NEEDS_HUB
          ? "Selection unknown (see the findings)."
          : `Selection unknown: ${markdownText(entry.pending)}.`,
      );
      continue;
    }
    lines.push(
      [
        `- selects now: ${selection(entry.before)}`,
        `- selects after the merge: ${selection(entry.after?.map(clusterKey))}`,
        ...(entry.added.length > 0 ? [`- joins: ${list(entry.added)}`] : []),
        ...(entry.removed.length > 0
          ? [`- leaves: ${list(entry.removed)} (pruned after the departure grace period)`]
          : []),
        ...entry.skipped
          .slice(0, limit)
          .map((s) => `- skipped ${markdownCode(s.cluster)}: ${markdownText(s.reason)}`),
        ...(entry.skipped.length > limit ? [`- skipped ${entry.skipped.length - limit} more`] : []),
      ].join("\n"),
    );
    const overrides = (cluster: SelectedCluster) =>
      markdownText(
        cluster.overrides.length === 0 ? "no override" : `overrides ${cluster.overrides.join(", ")}`,
      );
    if (!summarized) {
      for (const cluster of entry.after ?? []) {
        lines.push(
          `<details><summary>${markdownText(clusterKey(cluster))} → ${markdownText(cluster.crName)} ` +
            `(${overrides(cluster)})</summary>\n\n${yamlBlock(cluster.spec)}\n\n</details>`,
        );
      }
      continue;
    }
    const specs = [...Map.groupBy(entry.after ?? [], (c) => JSON.stringify([c.overrides, c.spec])).values()];
    for (const same of specs.slice(0, MAX_SPECS)) {
      const names = same.slice(0, 3).map((c) => markdownText(clusterKey(c)));
      lines.push(
        `<details><summary>${count(same.length, "cluster")} (${names.join(", ")}${same.length > 3 ? ", …" : ""}) ` +
          `(${overrides(same[0]!)})</summary>\n\n${yamlBlock(same[0]!.spec)}\n\n</details>`,
      );
    }
    if (specs.length > MAX_SPECS)
      lines.push(`… and ${specs.length - MAX_SPECS} more merged specs: \`-o json\` has each cluster's.`);
  }
  return lines.join("\n\n");
}

/**
 * The waves the merge goes through, every CR it changes in its wave, and the order of deletions; a
 * summarized comment's (a finite `limit`) counts each wave's CRs by change, and lists at most `limit`.
 */
function rolloutSection(plan: RolloutPlan, limit: number): string {
  const lines = ["### Rollout"];
  if (plan.removed !== undefined) {
    lines.push(
      `⚠️ The merge removes the rollout policy (${markdownCode(plan.removed)}): from then on every change ` +
        "goes to every cluster at once, without waves, soak or health checks.",
    );
    return lines.join("\n\n");
  }
  if (plan.policy === undefined) {
    lines.push(
      `⚠️ The rollout policy (${plan.failedPaths.map((p) => markdownCode(p)).join(", ")}) fails validation: ` +
        "after the merge every change waits until it is fixed.",
    );
    return lines.join("\n\n");
  }
  const changing = plan.waves.filter((w) => w.resources.length > 0 || w.deletions.length > 0);
  lines.push(
    `Policy ${markdownCode(plan.policy)}. ` +
      (plan.allAtOnce
        ? "⚠️ `allAtOnce` is set: the merge goes to every cluster at once, without waves."
        : `The merge changes CRs in ${changing.length} of ${plan.waves.length} waves; each wave opens when the one before is healthy and has soaked.`) +
      (plan.paused ? " The policy is **paused**: no wave opens until it is resumed." : ""),
  );
  if (plan.inventory === "unknown") {
    lines.push(
      "Waves chosen by ClusterProfile labels or properties need the ClusterProfiles, which this plan has not " +
        "read (`--kubeconfig`, or `--cluster-profiles FILE`): such clusters are shown in the remaining wave.",
    );
  }
  lines.push(Number.isFinite(limit) ? waveCounts(plan) : waveRows(plan));
  const approvals = plan.waves.filter((wave) => wave.approval && wave.resources.length > 0);
  if (approvals.length > 0) {
    lines.push(
      `✋ ${approvals.map((wave) => `Wave ${markdownText(wave.name)}`).join(", ")} ${approvals.length > 1 ? "open" : "opens"} ` +
        "only once approved in Git for the merge commit: `knative-fleet approve --wave <wave> --commit <merge commit>`, pushed to the tracked branch (see docs/approvals.md).",
    );
  }
  const listed = (items: readonly string[]) =>
    items.slice(0, limit).join(", ") + (items.length > limit ? ` and ${items.length - limit} more` : "");
  if (plan.outsideWindows.length > 0) {
    lines.push(
      `🕑 Outside their maintenance windows now (they wait until one opens): ${listed(
        plan.outsideWindows.map((o) => `${markdownText(o.cluster)} (${markdownText(o.why)})`),
      )}.`,
    );
  }
  const deletions = [...plan.waves]
    .reverse()
    .flatMap((wave) => wave.deletions.map((d) => `${markdownText(d)} (wave ${markdownText(wave.name)})`));
  if (deletions.length > 0) lines.push(`Deletions go in reverse wave order: ${listed(deletions)}.`);
  return lines.join("\n\n");
}

/** A row per CR the merge changes, in its wave. */
function waveRows(plan: RolloutPlan): string {
  const rows = plan.waves.flatMap((wave) => {
    const cells = (resource: string, cluster: string, change: string) => [
      markdownCell(wave.name),
      resource,
      cluster,
      change,
      markdownCell(wave.maxUnavailable),
      markdownCell(wave.soak),
      markdownCell(wave.timeLimit),
    ];
    if (wave.resources.length === 0) return [cells("(none)", "", "")];
    return wave.resources.map((row) =>
      cells(markdownCode(row.resource, { inTable: true }), markdownCell(row.cluster), row.change),
    );
  });
  return markdownTable(["wave", "CR", "cluster", "change", "maxUnavailable", "soak", "time limit"], rows);
}

/** A row per wave: how many CRs the merge changes there, on how many clusters, by change. */
function waveCounts(plan: RolloutPlan): string {
  const rows = plan.waves.map((wave) => [
    markdownCell(wave.name),
    String(wave.resources.length),
    String(new Set(wave.resources.map((row) => row.cluster)).size),
    [...Map.groupBy(wave.resources, (row) => row.change)]
      .map(([change, rows]) => `${change} ${rows.length}`)
      .join(", "),
    markdownCell(wave.maxUnavailable),
    markdownCell(wave.soak),
    markdownCell(wave.timeLimit),
  ]);
  return markdownTable(["wave", "CRs", "clusters", "change", "maxUnavailable", "soak", "time limit"], rows);
}
