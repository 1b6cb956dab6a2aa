import { stringify } from "yaml";
import { compareStrings, formatDiagnostic, isError } from "../fleet/diagnostic.ts";
import { clusterKey, formatIdentity } from "../fleet/identity.ts";
import { isRecord } from "../kube/object.ts";
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
import { changedSection, objectList } from "./markdown-objects.ts";
import type { ClusterPlan, Finding, FleetPlan, PlanSource, ResourcePlan } from "./report.ts";
import { REVIEWED_FIELD_NAMES } from "./spec.ts";

/** The first line of every plan comment: how CI finds its own comment to update instead of adding one. */
export const PLAN_MARKER = "<!-- knative-fleet-plan -->";

/**
 * The plan as a pull-request comment: verdict, a summary table (cluster, CR, action, objects +/~/-),
 * validation errors and findings, one collapsed section per cluster, then the placements and the rollout.
 * Same plan, same text. Every value that comes from the repository, the pull request or a cluster goes
 * through text/markdown.ts, whatever section it is in.
 */
export function renderMarkdown(plan: FleetPlan, maxLength = GITHUB_COMMENT_LIMIT): string {
  const resources = plan.clusters.flatMap((cluster) => cluster.resources);
  const summary = [
    PLAN_MARKER,
    `## knative-fleet plan: ${count(resources.length, "CR")} on ${count(plan.clusters.length, "cluster")}`,
    header(plan),
    verdictLine(plan),
    resources.length > 0 ? summaryTable(resources) : "Merging changes no CR.",
    validationSection(plan),
    settingsWarningsSection(plan),
    findingsSection(plan, resources),
  ];
  const trailer = [placementsSection(plan.placements), plan.rollout ? rolloutSection(plan.rollout) : ""];
  const join = (sections: readonly string[]) => `${sections.filter((s) => s !== "").join("\n\n")}\n`;
  const sections = plan.clusters.map((cluster) => clusterSection(cluster, plan.source));
  const whole = join([...summary, ...sections, ...trailer]);
  if (whole.length <= maxLength) return whole;
  // Too long for one comment (GitHub refuses the whole body): the verdict, the summary, the errors and
  // warnings, the placements and the rollout stay; the per-cluster details go, from the last cluster up.
  const details: string[] = [];
  let room =
    maxLength -
    join([...summary, leftOutNote(plan.clusters.length, plan.clusters.length), ...trailer]).length;
  for (const section of sections) {
    if (section.length + 2 > room) break;
    details.push(section);
    room -= section.length + 2;
  }
  const note = leftOutNote(plan.clusters.length - details.length, plan.clusters.length);
  const kept = join([...summary, ...details, note, ...trailer]);
  return kept.length <= maxLength ? kept : cutToLength(kept, maxLength);
}

/** GitHub's limit on a comment's body, in characters; a longer body is refused whole. */
export const GITHUB_COMMENT_LIMIT = 65_536;

function leftOutNote(leftOut: number, clusters: number): string {
  return (
    `⚠️ The details of ${leftOut} of ${count(clusters, "cluster")} are left out: the whole plan passes ` +
    `a comment's limit of ${GITHUB_COMMENT_LIMIT.toLocaleString("en-US")} characters. ` +
    "`knative-fleet plan -o json` has every change."
  );
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

function header(plan: FleetPlan): string {
  const revision = ({ ref, commit }: FleetPlan["base"]) =>
    commit.startsWith(ref)
      ? markdownCode(shortCommit(commit))
      : `${markdownCode(ref)} (${markdownText(shortCommit(commit))})`;
  const files = plan.files.map(({ path, change }) => `${change} ${markdownCode(path)}`).join(", ");
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

function actionText(resource: ResourcePlan): string {
  const errors = resource.findings.some((finding) => finding.severity === "error") ? " ❌" : "";
  const { from, to } = resource.version ?? {};
  const version = to
    ? ` ${from && from !== to ? `${markdownCell(from)} → ` : ""}${markdownCell(to)}${chainText(resource)}`
    : "";
  // Only a live plan's fallback needs saying here; an offline plan says so once, at the top.
  const unreachable = resource.findings.some((finding) => finding.code === "cluster-unreachable");
  const source = unreachable ? " (offline: cluster unreachable)" : "";
  switch (resource.action) {
    case "blocked":
      return "⛔ **blocked**: invalid file, not applied";
    case "refused":
      return `⛔ **refused** by the hub, not applied${errors}`;
    case "delete":
      return `⚠️ **delete**: ${removalText(resource)}${source}${errors}`;
    case "reinstall":
      return `⚠️ **reinstall**${version}, replacing ${markdownCell(resource.replaces ?? "")}${source}${errors}`;
    default:
      return `${resource.action}${version}${source}${errors}`;
  }
}

/** ", step of the upgrade chain 1.20 → **1.21** → 1.22 → 1.23 to 1.23 (one minor per rollout)". */
function chainText({ chain }: ResourcePlan): string {
  if (chain === undefined) return "";
  const minors = chain.minors.map((minor) =>
    minor === chain.step ? `**${markdownCell(minor)}**` : markdownCell(minor),
  );
  return `, step of the upgrade chain ${minors.join(" → ")} to ${markdownCell(chain.target)} (one minor per rollout)`;
}

function removalText({ removal, kind }: ResourcePlan): string {
  switch (removal?.prune) {
    case "retained":
      return "kept (prune disabled)";
    case "held":
      return `uninstalls ${kind} once a person confirms`;
    case "skipped":
      return `uninstalls ${kind} once the safeguard clears`;
    case "departure":
      return `uninstalls ${kind} after the departure grace period`;
    default:
      return removal?.sharedWith ? "hub CR deleted; cluster untouched" : `uninstalls ${kind}`;
  }
}

function validationSection(plan: FleetPlan): string {
  const errors = plan.diagnostics.filter(isError);
  const total = errors.length + plan.omittedDiagnostics;
  if (total === 0) return "";
  const omitted =
    plan.omittedDiagnostics > 0 ? [`… ${count(plan.omittedDiagnostics, "more error")} left out`] : [];
  return [
    `### Validation errors in head (${total})`,
    "A file with an error is not applied: its CRs keep their last good state, and nothing is pruned.",
    markdownCodeBlock("text", [...errors.map(formatDiagnostic), ...omitted]),
  ].join("\n\n");
}

/** The settings check's warnings: what head's settings do that is likely not meant; nothing is held back. */
function settingsWarningsSection(plan: FleetPlan): string {
  const warnings = plan.diagnostics.filter((diagnostic) => !isError(diagnostic));
  if (warnings.length === 0) return "";
  return [
    `### Setting warnings in head (${warnings.length})`,
    "These apply as written; check that they are meant.",
    markdownCodeBlock("text", warnings.map(formatDiagnostic)),
  ].join("\n\n");
}

const SEVERITY_MARK: Record<Finding["severity"], string> = { error: "❌", warning: "⚠️" };

function findingsSection(plan: FleetPlan, resources: readonly ResourcePlan[]): string {
  const fleet = [...plan.findings]
    .sort((a, b) => compareStrings(a.severity, b.severity))
    .map(
      (finding) =>
        `- ${SEVERITY_MARK[finding.severity]} ${markdownText(finding.subject)}: ` +
        `${markdownCode(finding.code)} ${markdownText(finding.message)}`,
    );
  const lines = resources.flatMap((resource) =>
    [...resource.findings]
      .sort((a, b) => compareStrings(a.severity, b.severity))
      .map(
        (finding) =>
          `- ${SEVERITY_MARK[finding.severity]} ${markdownText(resource.cluster)}, ` +
          `${markdownText(formatIdentity(resource))}: ${markdownCode(finding.code)} ${markdownText(finding.message)}`,
      ),
  );
  const all = [...fleet, ...lines];
  return all.length > 0 ? ["### Findings", all.join("\n")].join("\n\n") : "";
}

/** `source` is the plan's, said once at the top: a CR's part says its own only where it differs. */
function clusterSection(cluster: ClusterPlan, source: PlanSource): string {
  const totals = cluster.resources.reduce(
    (sum, { objects }) => ({
      created: sum.created + objects.created.length,
      changed: sum.changed + objects.changed.length,
      deleted: sum.deleted + objects.deleted.length,
    }),
    { created: 0, changed: 0, deleted: 0 },
  );
  const removes = cluster.resources.some((r) => r.action === "delete" || r.action === "reinstall")
    ? " ⚠️ removal"
    : "";
  return [
    "<details>",
    `<summary><b>${markdownText(cluster.cluster)}</b>: ${count(cluster.resources.length, "CR")}, ` +
      `+${totals.created} ~${totals.changed} -${totals.deleted}${removes}</summary>`,
    ...cluster.resources.map((resource) => resourceSection(resource, source)),
    "</details>",
  ].join("\n\n");
}

function resourceSection(resource: ResourcePlan, planSource: PlanSource): string {
  const { created, changed, deleted } = resource.objects;
  return [
    `#### ${markdownText(formatIdentity(resource))}: ${actionText(resource)}`,
    resourceFacts(resource, planSource),
    specSection(resource),
    removalSection(resource),
    objectList("Created", created),
    changedSection(changed),
    objectList(
      resource.action === "delete"
        ? "Deleted by FinalizeRemoteCluster"
        : "Deleted (applied before, no longer desired)",
      deleted,
    ),
    resource.removal && resource.removal.kept.length > 0
      ? objectList("Kept on the cluster", resource.removal.kept)
      : "",
  ]
    .filter((part) => part !== "")
    .join("\n\n");
}

function resourceFacts(resource: ResourcePlan, planSource: PlanSource): string {
  // The plan's source is said once, at the top; only a live plan's CR whose cluster could not be read
  // says its own, with the reason.
  const source =
    resource.source === "offline" && planSource === "live"
      ? ` Offline: ${markdownText(resource.offlineReason ?? "no cluster was read")}.`
      : "";
  // An unreadable cluster is said by the offline line already, with its reason.
  const findings = resource.findings
    .filter((finding) => finding.code !== "cluster-unreachable")
    .map((finding) => `${SEVERITY_MARK[finding.severity]} ${markdownText(finding.message)}`);
  return [`File ${markdownCode(resource.path)}.${source}`, ...findings].join("  \n");
}

/** What a created CR sets of the fields a reviewer reads, as the fleet file spells them: YAML. */
function specSection({ spec }: ResourcePlan): string {
  if (spec === undefined) return "";
  if (Object.keys(spec).length === 0)
    return `**Spec**: sets none of ${REVIEWED_FIELD_NAMES.join(", ")}: the release's defaults.`;
  return [
    "**Spec** (what the CR sets of these fields; the rest are the release's defaults)",
    yamlBlock(spec),
  ].join("\n\n");
}

/** A string in a spec longer than this is cut (a ConfigMap entry can be a whole document). */
const MAX_SPEC_VALUE_LENGTH = 1_000;

/** A value as YAML in a code block, as fleet files are written; very long strings cut. */
function yamlBlock(value: unknown): string {
  const cut = (v: unknown): unknown =>
    typeof v === "string" && v.length > MAX_SPEC_VALUE_LENGTH
      ? `${v.slice(0, MAX_SPEC_VALUE_LENGTH - 40)}… (${v.length} characters: -o json has them all)`
      : Array.isArray(v)
        ? v.map(cut)
        : isRecord(v)
          ? Object.fromEntries(Object.entries(v).map(([key, item]) => [key, cut(item)]))
          : v;
  return markdownCodeBlock("yaml", stringify(cut(value), { lineWidth: 0 }).trimEnd().split("\n"));
}

function removalSection({ action, removal, cluster, kind, objects, replaces }: ResourcePlan): string {
  if ((action !== "delete" && action !== "reinstall") || !removal) return "";
  if (removal.prune === "retained") return `Kept: ${markdownText(removal.message ?? "")}.`;
  const clusterText = markdownText(cluster);
  if (action === "reinstall") {
    return (
      `**${clusterText} keeps ${kind}, reinstalled**: ${markdownText(replaces ?? "")} is removed and this CR ` +
      "applies every object again in its place; the removal leaves the cluster alone while this CR installs there."
    );
  }
  const grace = removal.prune === "departure" ? ` ${markdownText(removal.message ?? "")}.` : "";
  if (removal.sharedWith) {
    return (
      `**The hub CR is deleted, but ${clusterText} keeps Knative**: ${markdownText(removal.sharedWith)} also installs ${kind} ` +
      "there, so FinalizeRemoteCluster leaves the cluster untouched."
    );
  }
  if (objects.deleted.length === 0)
    return `${clusterText} has nothing of this install: nothing is deleted there.${grace}`;
  return (
    `**${clusterText} loses ${kind}.** FinalizeRemoteCluster deletes the cluster-scoped objects (CRDs excepted) and ` +
    `the anchor ConfigMap; the cluster's garbage collector then deletes every object the anchor owns.${grace}`
  );
}

const INVENTORY_TEXT: Record<PlacementPlan["inventory"], string> = {
  hub: "Selection read from the hub's ClusterProfiles and PlacementDecisions.",
  snapshot: "Selection read from the ClusterProfile snapshot given with --cluster-profiles.",
  none: "No inventory: no --kubeconfig and no --cluster-profiles were given.",
};

/**
 * Per placement: the clusters it selects now and after the merge, who joins and who leaves, and each
 * cluster's CR with its merged spec. The CRs themselves are planned above, with every other CR.
 */
function placementsSection(plan: PlacementPlan): string {
  if (plan.placements.length === 0) return "";
  const lines = ["### Placements", INVENTORY_TEXT[plan.inventory]];
  const list = (clusters: readonly string[] | undefined) =>
    clusters === undefined
      ? "—"
      : clusters.length === 0
        ? "none"
        : clusters.map((c) => markdownCode(c)).join(", ");
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
        `- selects now: ${list(entry.before)}`,
        `- selects after the merge: ${list(entry.after?.map(clusterKey))}`,
        ...(entry.added.length > 0 ? [`- joins: ${list(entry.added)}`] : []),
        ...(entry.removed.length > 0
          ? [`- leaves: ${list(entry.removed)} (pruned after the departure grace period)`]
          : []),
        ...entry.skipped.map((s) => `- skipped ${markdownCode(s.cluster)}: ${markdownText(s.reason)}`),
      ].join("\n"),
    );
    for (const cluster of entry.after ?? []) {
      const overrides =
        cluster.overrides.length === 0 ? "no override" : `overrides ${cluster.overrides.join(", ")}`;
      lines.push(
        `<details><summary>${markdownText(clusterKey(cluster))} → ${markdownText(cluster.crName)} ` +
          `(${markdownText(overrides)})</summary>\n\n` +
          `${yamlBlock(cluster.spec)}\n\n</details>`,
      );
    }
  }
  return lines.join("\n\n");
}

/** The waves the merge goes through, every CR it changes in its wave, and the order of deletions. */
function rolloutSection(plan: RolloutPlan): string {
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
  lines.push(
    markdownTable(["wave", "CR", "cluster", "change", "maxUnavailable", "soak", "time limit"], rows),
  );
  const approvals = plan.waves.filter((wave) => wave.approval && wave.resources.length > 0);
  if (approvals.length > 0) {
    lines.push(
      `✋ ${approvals.map((wave) => `Wave ${markdownText(wave.name)}`).join(", ")} ${approvals.length > 1 ? "open" : "opens"} ` +
        "only once approved in Git for the merge commit: `knative-fleet approve --wave <wave> --commit <merge commit>`, pushed to the tracked branch (see docs/approvals.md).",
    );
  }
  if (plan.outsideWindows.length > 0) {
    lines.push(
      `🕑 Outside their maintenance windows now (they wait until one opens): ${plan.outsideWindows
        .map((o) => `${markdownText(o.cluster)} (${markdownText(o.why)})`)
        .join(", ")}.`,
    );
  }
  const deletions = [...plan.waves]
    .reverse()
    .flatMap((wave) => wave.deletions.map((d) => `${markdownText(d)} (wave ${markdownText(wave.name)})`));
  if (deletions.length > 0) lines.push(`Deletions go in reverse wave order: ${deletions.join(", ")}.`);
  return lines.join("\n\n");
}
