import { describeRef, groupOf, type ObjectRef } from "../kube/object.ts";
import { count } from "../text/count.ts";
import { markdownCode, markdownCodeBlock, markdownText } from "../text/markdown.ts";
import type { FieldChange } from "./diff.ts";
import type { ObjectChange } from "./report.ts";

// The objects a CR's change creates, changes and deletes, as the plan comment shows them: by kind and
// namespace on one line each (an install has hundreds), and the changed ones with their field diffs, long
// strings shown where they differ. markdown.ts places them in each CR's section.

/** Field lines shown per object; `-o json` has them all. */
const MAX_FIELDS_PER_OBJECT = 25;
/** Values longer than this are cut (ConfigMap examples run to kilobytes). */
const MAX_VALUE_LENGTH = 120;

/** Objects by kind and namespace on one line each: an install has hundreds. */
export function objectList(title: string, refs: readonly ObjectRef[]): string {
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
export function changedSection(changes: readonly ObjectChange[]): string {
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
