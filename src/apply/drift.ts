import { DRIFT_LIMITS, type FieldChange } from "../api/drift.ts";
import type { KubeObject, ObjectRef } from "../kube/object.ts";
import { containsDesired } from "./compare.ts";

// What drifted on one object, read from the two objects alone: which of the fields the install sets differ
// (compared as compare.ts compares them), and who changed them, from the live object's managedFields. Pure.

/** One step of a field path: a map key, or a list element by its name (containers, env) or position. */
export type FieldStep = string | { name: string } | number;

export interface DriftedObject {
  ref: ObjectRef;
  change: "changed" | "deleted";
  /** The fields that differ, with their path as steps (install/drift-owner.ts maps them to the CR). */
  fields: (FieldChange & { steps: FieldStep[] })[];
  omittedFields: number;
  /**
   * Whether applying what the install wants puts it back. A key someone added to a ConfigMap is not: server-
   * side apply leaves fields it does not own, so the addition is reported and stays.
   */
  putBack: boolean;
  /** The field manager that changed it, its operation and when, as the live object's managedFields say. */
  manager?: string;
  operation?: string;
  at?: string;
}

interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  time?: string;
  fieldsV1?: unknown;
}

/** The drift of `live` from `desired` (absent: deleted); `ours` is the field manager the install writes with. */
export function describeDrift(
  desired: KubeObject,
  live: KubeObject | undefined,
  ours: string,
  addedKeys = false,
): DriftedObject {
  const ref = {
    apiVersion: desired.apiVersion,
    kind: desired.kind,
    namespace: desired.metadata.namespace ?? "",
    name: desired.metadata.name ?? "",
  };
  if (!live) return { ref, change: "deleted", fields: [], omittedFields: 0, putBack: true };
  const found: { steps: FieldStep[]; want: unknown; have: unknown }[] = [];
  differences(desired, live, [], found);
  const changed = found.length;
  // Added keys alone: a record of its own, kept. Beside an edit they wait for the next check, after the
  // edit was put back, so that no record says "put back" of a key that stays.
  if (addedKeys && changed === 0) found.push(...keysAdded(desired, live));
  const secret = desired.kind === "Secret";
  const fields = found.slice(0, DRIFT_LIMITS.fields).map(({ steps, want, have }) => {
    const hidden = secret && (steps[0] === "data" || steps[0] === "stringData");
    return {
      path: formatSteps(steps),
      steps,
      ...(want !== undefined && { want: hidden ? "(hidden)" : shown(want) }),
      ...(have !== undefined && { have: hidden ? "(hidden)" : shown(have) }),
    };
  });
  const writer = writerOf(
    live,
    found.map((f) => f.steps),
    ours,
  );
  return {
    ref,
    change: "changed",
    fields,
    omittedFields: found.length - fields.length,
    putBack: changed > 0,
    ...(writer?.manager !== undefined && { manager: writer.manager }),
    ...(writer?.operation !== undefined && { operation: writer.operation }),
    ...(writer?.time !== undefined && { at: writer.time }),
  };
}

/** `data` keys of a ConfigMap that `live` has and `desired` does not: someone else added them. */
function keysAdded(
  desired: KubeObject,
  live: KubeObject,
): { steps: FieldStep[]; want: unknown; have: unknown }[] {
  const want = isRecord(desired.data) ? desired.data : {};
  const have = isRecord(live.data) ? live.data : {};
  return Object.keys(have)
    .filter((key) => !Object.hasOwn(want, key))
    .sort()
    .map((key) => ({ steps: ["data", key], want: undefined, have: have[key] }));
}

/** Whether a ConfigMap has `data` keys the install does not set. */
export const hasAddedKeys = (desired: KubeObject, live: KubeObject): boolean =>
  keysAdded(desired, live).length > 0;

/** The leaves (or the smallest subtrees) of `desired` that `live` does not hold. */
function differences(
  desired: unknown,
  live: unknown,
  steps: FieldStep[],
  out: { steps: FieldStep[]; want: unknown; have: unknown }[],
): void {
  if (containsDesired(desired, live)) return;
  if (Array.isArray(desired) && Array.isArray(live) && desired.every(namedElement)) {
    const before = out.length;
    for (const element of desired) {
      const name = (element as { name: string }).name;
      const match = live.find((l) => namedElement(l) && l.name === name);
      differences(element, match, [...steps, { name }], out);
    }
    if (out.length > before) return;
  } else if (isRecord(desired) && (isRecord(live) || live === undefined || live === null)) {
    for (const [key, value] of Object.entries(desired)) differences(value, live?.[key], [...steps, key], out);
    return;
  }
  out.push({ steps, want: desired, have: live });
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const namedElement = (value: unknown): value is { name: string } =>
  isRecord(value) && typeof value.name === "string";

const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;

/** `["spec", "template", {name: "controller"}, "image"]` -> `spec.template[name=controller].image`. */
function formatSteps(steps: readonly FieldStep[]): string {
  let text = "";
  for (const step of steps) {
    if (typeof step === "number") text += `[${step}]`;
    else if (typeof step === "object") text += `[name=${step.name}]`;
    else if (!PLAIN_KEY.test(step)) text += `[${JSON.stringify(step)}]`;
    else text += text === "" ? step : `.${step}`;
  }
  return text;
}

/** A value as JSON, cut to DRIFT_LIMITS.valueChars. */
function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= DRIFT_LIMITS.valueChars ? text : `${text.slice(0, DRIFT_LIMITS.valueChars - 1)}…`;
}

/**
 * Who changed the fields: the latest manager other than ours that owns one of them (managedFields record
 * owners); for a field someone removed (nobody owns it any more), the latest other manager that wrote after
 * ours did. Undefined when the object records no other writer.
 */
function writerOf(live: KubeObject, changed: FieldStep[][], ours: string): ManagedFieldsEntry | undefined {
  const entries = (live.metadata.managedFields as ManagedFieldsEntry[] | undefined) ?? [];
  const others = entries.filter((e) => e.manager !== undefined && e.manager !== ours);
  const latest = (list: ManagedFieldsEntry[]) =>
    list.reduce<ManagedFieldsEntry | undefined>(
      (best, e) => (best === undefined || (e.time ?? "") > (best.time ?? "") ? e : best),
      undefined,
    );
  const owning = others.filter((e) => changed.some((steps) => owns(e.fieldsV1, steps)));
  if (owning.length > 0) return latest(owning);
  const ourTime = entries.find((e) => e.manager === ours)?.time ?? "";
  return latest(others.filter((e) => (e.time ?? "") >= ourTime));
}

/** Whether a FieldsV1 set holds the field (or a whole subtree above it). */
function owns(fieldsV1: unknown, steps: readonly FieldStep[]): boolean {
  let node = fieldsV1;
  for (const step of steps) {
    if (!isRecord(node)) return false;
    if (Object.keys(node).length === 0) return true; // a leaf above the field: the whole value is owned
    const key =
      typeof step === "string"
        ? `f:${step}`
        : typeof step === "object"
          ? `k:${JSON.stringify({ name: step.name })}`
          : undefined;
    if (key === undefined || !(key in node)) return false;
    node = node[key];
  }
  return isRecord(node);
}
