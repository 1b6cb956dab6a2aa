import { globalRegistry, type z } from "zod";
import { count } from "../text/count.ts";
import { type Diagnostic, type FieldPath, formatFieldPath, lowercaseFirst } from "./diagnostic.ts";
import { editDistance } from "./document-kind.ts";
import { type FieldAnchor, locateField, plainScalarSourceAt, type SourceDocument } from "./yaml-source.ts";

type SchemaResult<T> = { success: true; data: T } | { success: false; diagnostics: Diagnostic[] };

/**
 * Validates `value` (the document's value, possibly defaulted) against `schema` and turns every zod
 * issue into a diagnostic at the field's line and column in the document's source.
 */
export function validateAgainstSchema<T>(
  path: string,
  document: SourceDocument,
  value: unknown,
  schema: z.ZodType<T>,
): SchemaResult<T> {
  const result = safeParsePlainKeys(schema, value);
  if (result.success) return { success: true, data: result.data };
  // Locating an issue walks the document: a file with thousands of wrong fields is told about the first
  // ones, then counted, so its cost stays linear.
  const { issues } = result;
  const shown = issues.slice(0, MAX_LOCATED_ISSUES);
  const diagnostics = shown.flatMap((issue) =>
    schemaProblems(issue, value, (field) => plainScalarSourceAt(document, field), schema).map(
      ({ field, anchor, message }) => ({
        path,
        ...locateField(document, field, anchor),
        field: formatFieldPath(field),
        message,
      }),
    ),
  );
  if (issues.length > shown.length) {
    diagnostics.push({
      path,
      ...document.position,
      field: "",
      message: `and ${count(issues.length - shown.length, "more error")} in this document`,
    });
  }
  return { success: false, diagnostics };
}

/** More than a file reports anyway (MAX_DIAGNOSTICS_PER_FILE in model.ts). */
const MAX_LOCATED_ISSUES = 50;

const PROTO_KEY = "__proto__";

type PlainParseResult<T> = { success: true; data: T } | { success: false; issues: z.core.$ZodIssue[] };

/**
 * zod's safeParse, with `__proto__` a key like any other. zod leaves a `__proto__` key out of a record's
 * (and a loose object's) output without a word, key schema unchecked: `matchLabels: {__proto__: prod}`
 * would select every cluster. Such a key is renamed to a stand-in no key of the value uses, validated,
 * and named `__proto__` again in the output (an own property, the prototype untouched) and in the issues.
 */
export function safeParsePlainKeys<T>(schema: z.ZodType<T>, value: unknown): PlainParseResult<T> {
  const keys = new Set<string>();
  collectKeys(value, keys);
  if (!keys.has(PROTO_KEY)) {
    const result = schema.safeParse(value);
    return result.success ? result : { success: false, issues: result.error.issues };
  }
  let standIn = `\u0000${PROTO_KEY}`;
  while (keys.has(standIn)) standIn = `\u0000${standIn}`;
  const result = schema.safeParse(renameKeys(value, PROTO_KEY, standIn));
  if (result.success) return { success: true, data: renameKeys(result.data, standIn, PROTO_KEY) as T };
  return {
    success: false,
    issues: result.error.issues.map((issue) => withKeyRestored(issue, standIn) as z.core.$ZodIssue),
  };
}

/** An issue (its path, message, keys and nested issues) with the stand-in named `__proto__` again. */
function withKeyRestored(value: unknown, standIn: string): unknown {
  if (typeof value === "string") return value.replaceAll(standIn, PROTO_KEY);
  if (Array.isArray(value)) return value.map((item) => withKeyRestored(item, standIn));
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [
      key,
      // The input is the value itself, not text for people.
      key === "input" ? child : withKeyRestored(child, standIn),
    ]),
  );
}

function collectKeys(value: unknown, keys: Set<string>): void {
  if (typeof value !== "object" || value === null) return;
  // The value comes from yaml-source's decode, which refuses cycles and nesting past 64 levels.
  for (const [key, child] of Object.entries(value)) {
    if (!Array.isArray(value)) keys.add(key);
    collectKeys(child, keys);
  }
}

function renameKeys(value: unknown, from: string, to: string): unknown {
  if (Array.isArray(value)) return value.map((item) => renameKeys(item, from, to));
  if (typeof value !== "object" || value === null) return value;
  const copy: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    // defineProperty: a `__proto__` key becomes an own property instead of replacing the prototype.
    Object.defineProperty(copy, key === from ? to : key, {
      value: renameKeys(child, from, to),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return copy;
}

/** One problem a zod issue reports: the field, whether to point at its key or its value, and the text. */
interface SchemaProblem {
  field: FieldPath;
  anchor: FieldAnchor;
  message: string;
}

/**
 * What an issue means to a person, in the words every fleet document's diagnostics use. `plainSource`
 * gives the source text of a plain YAML scalar at a field, to explain YAML 1.1's conversions.
 */
export function schemaProblems(
  issue: z.core.$ZodIssue,
  value: unknown,
  plainSource: (field: FieldPath) => string | undefined,
  schema?: z.ZodType,
): SchemaProblem[] {
  switch (issue.code) {
    case "unrecognized_keys": {
      const known = schema ? knownKeysAt(schema, value, issue.path) : [];
      return issue.keys.map((key) => ({
        field: [...issue.path, key],
        anchor: "key",
        message: `unrecognized key${hintFor(key, known)}`,
      }));
    }
    case "invalid_type": {
      const actual = valueAt(value, issue.path);
      if (actual === undefined)
        return [{ field: issue.path, anchor: "key", message: "required field is missing" }];
      const got = `expected ${issue.expected}, got ${typeName(actual)}`;
      const source = issue.expected === "string" ? plainSource(issue.path) : undefined;
      // A duration needs its unit: `soak: 600` quoted is no duration either.
      if (typeof actual === "number" && schema && isDurationAt(schema, value, issue.path)) {
        return [
          {
            field: issue.path,
            anchor: "value",
            message: `${got}: a duration needs a unit, such as "${actual}s" or "${actual}m"`,
          },
        ];
      }
      // The classic YAML 1.1 trap: `enabled: yes` in a string-valued config map is read as a boolean.
      const message =
        source === undefined
          ? got
          : `${got}: YAML 1.1 reads the unquoted ${source} as a ${typeName(actual)}; quote it ("${source}")`;
      return [{ field: issue.path, anchor: "value", message }];
    }
    case "invalid_key":
      // A record's key that its key schema refuses (a label key): the key schema's own words, at the key.
      return issue.issues.map((inner) => ({
        field: issue.path,
        anchor: "key",
        message: lowercaseFirst(inner.message),
      }));
    default:
      return [{ field: issue.path, anchor: "value", message: lowercaseFirst(issue.message) }];
  }
}

function valueAt(value: unknown, path: FieldPath): unknown {
  let current = value;
  for (const segment of path) {
    if (current === null || typeof current !== "object" || !Object.hasOwn(current, segment)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/**
 * Keys people write for another one: the Knative docs' multicluster guide calls `spec.namespace`
 * `namespaceConfiguration`, which the operator's CRD does not serve.
 */
const KNOWN_MISNAMES: Readonly<Record<string, { field: string; why: string }>> = {
  namespaceConfiguration: {
    field: "namespace",
    why: "the Knative multicluster guide's name for it; the operator's CRD serves it as spec.namespace (labels, annotations)",
  },
};

/** `; did you mean "version"?` when a known key is a typo away, or what a known misname should be. */
function hintFor(key: string, known: readonly string[]): string {
  const misname = KNOWN_MISNAMES[key];
  if (misname && known.includes(misname.field)) return `; rename it to ${misname.field}: ${misname.why}`;
  const limit = Math.min(2, Math.max(1, Math.floor(key.length / 3)));
  let best: { key: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase(), limit);
    if (distance <= limit && (best === undefined || distance < best.distance))
      best = { key: candidate, distance };
  }
  return best ? `; did you mean ${best.key}?` : "";
}

/** The zod definition of a schema, as far as walking it along a path needs. */
interface SchemaDef {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  valueType?: z.ZodType;
  options?: z.ZodType[];
  discriminator?: string;
  in?: z.ZodType;
}

const defOf = (schema: z.ZodType): SchemaDef => (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;

/** The schemas that describe the value at `path` (a union gives the options that fit it). */
function schemasAt(schema: z.ZodType, value: unknown, path: FieldPath): z.ZodType[] {
  let current: { schema: z.ZodType; value: unknown }[] = [{ schema, value }];
  for (const segment of [...path, undefined]) {
    const next: { schema: z.ZodType; value: unknown }[] = [];
    const queue = [...current];
    while (queue.length > 0 && next.length + queue.length < 64) {
      const { schema: at, value: here } = queue.shift()!;
      const def = defOf(at);
      if (
        def.innerType &&
        ["optional", "default", "nullable", "prefault", "readonly", "catch"].includes(def.type)
      ) {
        queue.push({ schema: def.innerType, value: here });
      } else if (def.type === "pipe" && def.in) {
        queue.push({ schema: def.in, value: here });
      } else if (def.type === "union" && def.options) {
        const discriminator = def.discriminator;
        const fitting = def.options.filter((option) => {
          if (discriminator === undefined || typeof here !== "object" || here === null) return true;
          const literal = defOf(option).shape?.[discriminator];
          const wanted = literal && (defOf(literal) as { values?: unknown[] }).values;
          return wanted === undefined || wanted.includes((here as Record<string, unknown>)[discriminator]);
        });
        for (const option of fitting) queue.push({ schema: option, value: here });
      } else if (segment === undefined) {
        next.push({ schema: at, value: here });
      } else if (
        def.type === "object" &&
        def.shape &&
        typeof segment === "string" &&
        Object.hasOwn(def.shape, segment)
      ) {
        next.push({ schema: def.shape[segment]!, value: childOf(here, segment) });
      } else if (def.type === "array" && def.element && typeof segment === "number") {
        next.push({ schema: def.element, value: childOf(here, segment) });
      } else if (def.type === "record" && def.valueType) {
        next.push({ schema: def.valueType, value: childOf(here, segment) });
      }
    }
    current = next;
    if (segment === undefined) break;
  }
  return current.map((entry) => entry.schema);
}

function childOf(value: unknown, segment: PropertyKey): unknown {
  return typeof value === "object" && value !== null
    ? (value as Record<PropertyKey, unknown>)[segment]
    : undefined;
}

/** The keys an object at `path` may have. */
function knownKeysAt(schema: z.ZodType, value: unknown, path: FieldPath): string[] {
  return [...new Set(schemasAt(schema, value, path).flatMap((at) => Object.keys(defOf(at).shape ?? {})))];
}

/** Whether the field at `path` is a duration (a schema registered with `format: "duration"`). */
function isDurationAt(schema: z.ZodType, value: unknown, path: FieldPath): boolean {
  return schemasAt(schema, value, path).some((at) => globalRegistry.get(at)?.format === "duration");
}
