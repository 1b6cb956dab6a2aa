import { stringify } from "yaml";
import { formatIdentity } from "../fleet/identity.ts";
import { describeRef, groupOf, isRecord, type ObjectRef } from "../kube/object.ts";
import { count } from "../text/count.ts";
import { markdownCell, markdownCode, markdownCodeBlock, markdownText } from "../text/markdown.ts";
import type { FieldChange } from "./diff.ts";
import type { ClusterPlan, Finding, ObjectChange, PlanSource, ResourcePlan } from "./report.ts";
import { REVIEWED_FIELD_NAMES } from "./spec.ts";

// The plan comment's details of each cluster: per CR its action, facts, spec and removal, and the objects
// its change creates, changes and deletes: by kind and namespace on one line each (an install has
// hundreds), the changed ones with their field diffs, long strings shown where they differ. markdown.ts
// places a cluster's section in the comment as far as the comment's limit allows.

/** A CR's action as its summary row and its section say it: the version, the chain, a removal, ❌ on an error. */
export function actionText(resource: ResourcePlan): string {
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

export const SEVERITY_MARK: Record<Finding["severity"], string> = { error: "❌", warning: "⚠️" };

/** `source` is the plan's, said once at the top: a CR's part says its own only where it differs. */
export function clusterSection(cluster: ClusterPlan, source: PlanSource): string {
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
export function yamlBlock(value: unknown): string {
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

/** Field lines shown per object; `-o json` has them all. */
const MAX_FIELDS_PER_OBJECT = 25;
/** Values longer than this are cut (ConfigMap examples run to kilobytes). */
const MAX_VALUE_LENGTH = 120;

/** Objects by kind and namespace on one line each: an install has hundreds. */
function objectList(title: string, refs: readonly ObjectRef[]): string {
  if (refs.length === 0) return "";
  return [`**${title} (${refs.length})**`, objectGroups(refs).join("\n")].join("\n\n");
}

function objectGroups(refs: readonly ObjectRef[]): string[] {
  const groups = Map.groupBy(refs, (ref) => `${kindOf(ref)}${ref.namespace ? ` in ${ref.namespace}` : ""}`);
  return [...groups].map(
    ([group, members]) =>
      `- ${markdownText(group)} (${members.length}): ${members.map((ref) => markdownCode(ref.name)).join(", ")}`,
  );
}

/** A label or annotation that names the release: an upgrade changes it on every object it installs. */
const VERSION_MARKER = /^metadata\.(labels|annotations)\["[^"]*(version|release)"\]$/;

const onlyVersionMarkers = (change: ObjectChange): boolean =>
  change.refused === undefined &&
  change.fields.length > 0 &&
  change.fields.every((field) => VERSION_MARKER.test(field.path));

/**
 * Changed objects with their field diffs. Objects whose only change is the release's version label are
 * counted per kind on one line each, with the label's change once; of the others, objects whose diffs are
 * identical share one diff, so the few particular changes stand out.
 */
function changedSection(changes: readonly ObjectChange[]): string {
  if (changes.length === 0) return "";
  const parts = [`**Changed (${changes.length})**`];
  const refused = changes.filter((change) => change.refused !== undefined);
  for (const change of refused) {
    parts.push(
      `${markdownCode(describeRef(change))}: ❌ the API server refuses the apply: ${markdownText(change.refused!)}`,
    );
  }
  const versionOnly = changes.filter(onlyVersionMarkers);
  if (versionOnly.length > 0) {
    const kinds = Map.groupBy(
      versionOnly,
      (ref) => `${kindOf(ref)}${ref.namespace ? ` in ${ref.namespace}` : ""}`,
    );
    const distinct = new Map(
      versionOnly.flatMap((change) => change.fields).map((field) => [JSON.stringify(field), field]),
    );
    const lines = [...distinct.values()].flatMap(fieldLines);
    parts.push(
      `Only the version label changes on ${versionOnly.length} of them (-o json names each):\n\n` +
        [...kinds].map(([kind, members]) => `- ${markdownText(kind)}: ${members.length}`).join("\n") +
        `\n\n${markdownCodeBlock("diff", lines)}`,
    );
  }
  const sameDiff = Map.groupBy(
    changes.filter((change) => change.refused === undefined && !onlyVersionMarkers(change)),
    (change) => JSON.stringify(change.fields),
  );
  for (const group of sameDiff.values()) {
    const { fields } = group[0]!;
    const lines = fields.slice(0, MAX_FIELDS_PER_OBJECT).flatMap(fieldLines);
    if (fields.length > MAX_FIELDS_PER_OBJECT) {
      lines.push(`# … ${count(fields.length - MAX_FIELDS_PER_OBJECT, "more field")}: -o json has them all`);
    }
    if (fields.length === 0)
      lines.push("# no field changes: only knative-fleet's desired-hash and field ownership");
    const title = group.length === 1 ? markdownCode(describeRef(group[0]!)) : objectGroups(group).join("\n");
    parts.push(`${title}\n\n${markdownCodeBlock("diff", lines)}`);
  }
  return parts.join("\n\n");
}

/**
 * `- path: before` and `+ path: after`, as a diff reads. Two long strings (a ConfigMap's document) show
 * where they differ: the first differing part in brackets, with context on both sides and its offset.
 */
function fieldLines({ path, before, after }: FieldChange): string[] {
  if (
    typeof before === "string" &&
    typeof after === "string" &&
    Math.max(JSON.stringify(before).length, JSON.stringify(after).length) > MAX_VALUE_LENGTH
  ) {
    const [was, will] = whereStringsDiffer(before, after);
    return [`- ${path}: ${was}`, `+ ${path}: ${will}`];
  }
  return [
    ...(before !== undefined ? [`- ${path}: ${shortValue(before)}`] : []),
    ...(after !== undefined ? [`+ ${path}: ${shortValue(after)}`] : []),
  ];
}

/** Characters of context shown on each side of where two long strings differ. */
const DIFF_CONTEXT = 30;
/** The differing part shown at most; longer is cut. */
const MAX_DIFFERING = 40;

/**
 * Both strings around their first difference, bounded whatever their length:
 * `"…grace-period: [30]s\n…" (at character 4,512 of 9,028)`: the common prefix ends where the brackets
 * open, the common suffix starts where they close.
 */
function whereStringsDiffer(before: string, after: string): [string, string] {
  let start = 0;
  while (start < before.length && start < after.length && before[start] === after[start]) start++;
  let end = 0;
  while (
    end < before.length - start &&
    end < after.length - start &&
    before[before.length - 1 - end] === after[after.length - 1 - end]
  )
    end++;
  const escaped = (text: string) => JSON.stringify(text).slice(1, -1);
  const window = (text: string) => {
    const from = Math.max(0, start - DIFF_CONTEXT);
    const differing = text.slice(start, text.length - end);
    const shown =
      differing.length > MAX_DIFFERING
        ? `${differing.slice(0, MAX_DIFFERING)}… ${differing.length} characters`
        : differing;
    const to = Math.min(text.length, text.length - end + DIFF_CONTEXT);
    return (
      `"${from > 0 ? "…" : ""}${escaped(text.slice(from, start))}[${escaped(shown)}]` +
      `${escaped(text.slice(text.length - end, to))}${to < text.length ? "…" : ""}" ` +
      `(at character ${(start + 1).toLocaleString("en-US")} of ${text.length.toLocaleString("en-US")})`
    );
  };
  return [window(before), window(after)];
}

function shortValue(value: unknown): string {
  const text = JSON.stringify(value);
  if (text.length <= MAX_VALUE_LENGTH) return text;
  return `${text.slice(0, MAX_VALUE_LENGTH - 20)}… (${text.length} characters)`;
}

/** `Deployment.apps`, `ConfigMap`. */
const kindOf = (ref: ObjectRef): string =>
  groupOf(ref.apiVersion) ? `${ref.kind}.${groupOf(ref.apiVersion)}` : ref.kind;
