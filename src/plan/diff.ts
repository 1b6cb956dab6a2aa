import { DESIRED_HASH_ANNOTATION, LAST_APPLIED_ANNOTATION } from "../api/labels.ts";
import { canonicalJson } from "../apply/compare.ts";
import { compareStrings, formatFieldPath } from "../fleet/diagnostic.ts";
import type { KubeObject } from "../kube/object.ts";
import { isRecord } from "../kube/object.ts";
import { isSensitive, MASKED } from "./mask.ts";

/** One field an apply changes: without `before` it is added, without `after` removed. Values are masked. */
export interface FieldChange {
  /** `spec.template.spec.containers[name=controller].image` */
  path: string;
  before?: unknown;
  after?: unknown;
}

/** A list element matched by its `name` (containers, env, ports), not by its position. */
interface NamedElement {
  name: string;
}
type Segment = string | number | NamedElement;

/**
 * Fields nobody reviews: what the API server writes (status, bookkeeping metadata), and knative-fleet's
 * desired-hash, which changes whenever anything else does and says nothing by itself.
 */
const IGNORED_PATHS: readonly (readonly string[])[] = [
  ["status"],
  ["metadata", "managedFields"],
  ["metadata", "resourceVersion"],
  ["metadata", "generation"],
  ["metadata", "uid"],
  ["metadata", "creationTimestamp"],
  ["metadata", "annotations", DESIRED_HASH_ANNOTATION],
  // A copy of the object itself: its changes are the other fields' changes.
  ["metadata", "annotations", LAST_APPLIED_ANNOTATION],
];

/**
 * The fields that differ between an object as it is and as it will be, leaf by leaf, keys in code-unit
 * order, so the same two objects always give the same list. Lists of named elements are matched by name,
 * so a container added in front does not show every later container as changed.
 */
export function diffObjects(before: KubeObject, after: KubeObject): FieldChange[] {
  const changes: FieldChange[] = [];
  compare(before, after, [], (path, was, will) => {
    const keys = path.map((segment) => (typeof segment === "object" ? segment.name : segment));
    const masked = isSensitive(after.kind, keys, was) || isSensitive(after.kind, keys, will);
    const mask = (value: unknown) => (masked && value !== undefined ? MASKED : value);
    changes.push({
      path: formatPath(path),
      ...(was !== undefined && { before: mask(was) }),
      ...(will !== undefined && { after: mask(will) }),
    });
  });
  return changes;
}

type Report = (path: readonly Segment[], before: unknown, after: unknown) => void;

function compare(before: unknown, after: unknown, path: readonly Segment[], report: Report): void {
  if (IGNORED_PATHS.some((ignored) => samePath(ignored, path))) return;
  if (before === after) return;
  // A map or list that appears or disappears is shown leaf by leaf, so each value is masked on its own.
  if (isRecord(before) || isRecord(after)) {
    if ((before === undefined || isRecord(before)) && (after === undefined || isRecord(after))) {
      const was = before ?? {};
      const will = after ?? {};
      const keys = [...new Set([...Object.keys(was), ...Object.keys(will)])].sort(compareStrings);
      if (keys.length > 0) {
        for (const key of keys) compare(was[key], will[key], [...path, key], report);
        return;
      }
    }
  } else if (Array.isArray(before) || Array.isArray(after)) {
    if ((before === undefined || Array.isArray(before)) && (after === undefined || Array.isArray(after))) {
      if (compareLists(before ?? [], after ?? [], path, report)) return;
    }
  }
  if (JSON.stringify(before) !== JSON.stringify(after)) report(path, before, after);
}

/** Compares two lists element by element; false when they are lists of scalars, which read best whole. */
function compareLists(
  before: readonly unknown[],
  after: readonly unknown[],
  path: readonly Segment[],
  report: Report,
): boolean {
  const all = [...before, ...after];
  if (all.length === 0 || all.every((element) => !isRecord(element) && !Array.isArray(element))) return false;
  const names = (list: readonly unknown[]) =>
    list.map((element) => (isRecord(element) ? element.name : undefined));
  const [beforeNames, afterNames] = [names(before), names(after)];
  const byName = [...beforeNames, ...afterNames].every((name) => typeof name === "string");
  if (byName && new Set(beforeNames).size === before.length && new Set(afterNames).size === after.length) {
    // In the new order, then the removed ones in their old order.
    const order = [...new Set([...afterNames, ...beforeNames])] as string[];
    for (const name of order) {
      compare(
        before[beforeNames.indexOf(name)],
        after[afterNames.indexOf(name)],
        [...path, { name }],
        report,
      );
    }
    return true;
  }
  compareUnnamed(before, after, path, report);
  return true;
}

/**
 * Elements without names (RBAC rules, webhook rules) are aligned on those both lists hold unchanged, so
 * one rule inserted does not show every later rule as changed. Between two aligned elements, runs of the
 * same length are compared in place (an edited rule); otherwise their elements are removed and added.
 */
function compareUnnamed(
  before: readonly unknown[],
  after: readonly unknown[],
  path: readonly Segment[],
  report: Report,
): void {
  // The list ends count as one more aligned pair, so the runs after the last unchanged element are seen.
  const aligned: [number, number][] = [...unchangedPairs(before, after), [before.length, after.length]];
  let [i, j] = [0, 0];
  for (const [nextBefore, nextAfter] of aligned) {
    const inPlace = nextBefore - i === nextAfter - j;
    for (; i < nextBefore; i++) compare(before[i], inPlace ? after[j++] : undefined, [...path, i], report);
    for (; j < nextAfter; j++) compare(undefined, after[j], [...path, j], report);
    [i, j] = [nextBefore + 1, nextAfter + 1];
  }
}

/** Index pairs of the longest common subsequence of equal elements. */
function unchangedPairs(before: readonly unknown[], after: readonly unknown[]): [number, number][] {
  const [was, will] = [before.map(canonicalJson), after.map(canonicalJson)];
  // lengths[i][j]: the longest common subsequence of was[i..] and will[j..].
  const lengths = Array.from({ length: was.length + 1 }, () => new Array<number>(will.length + 1).fill(0));
  for (let i = was.length - 1; i >= 0; i--) {
    for (let j = will.length - 1; j >= 0; j--) {
      lengths[i]![j] =
        was[i] === will[j] ? lengths[i + 1]![j + 1]! + 1 : Math.max(lengths[i + 1]![j]!, lengths[i]![j + 1]!);
    }
  }
  const pairs: [number, number][] = [];
  for (let [i, j] = [0, 0]; i < was.length && j < will.length; ) {
    if (was[i] === will[j]) pairs.push([i++, j++]);
    else if (lengths[i + 1]![j]! >= lengths[i]![j + 1]!) i++;
    else j++;
  }
  return pairs;
}

function samePath(ignored: readonly string[], path: readonly Segment[]): boolean {
  return ignored.length === path.length && ignored.every((key, index) => path[index] === key);
}

function formatPath(path: readonly Segment[]): string {
  let formatted = "";
  for (const segment of path) {
    const part = typeof segment === "object" ? `[name=${segment.name}]` : formatFieldPath([segment]);
    formatted += formatted === "" || part.startsWith("[") ? part : `.${part}`;
  }
  return formatted;
}
