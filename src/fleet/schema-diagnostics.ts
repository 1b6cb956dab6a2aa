import type { z } from "zod";
import { type Diagnostic, type FieldPath, formatFieldPath, lowercaseFirst } from "./diagnostic.ts";
import { type FieldAnchor, locateField, plainScalarSourceAt, type SourceDocument } from "./yaml-source.ts";

export type SchemaResult<T> = { success: true; data: T } | { success: false; diagnostics: Diagnostic[] };

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
    schemaProblems(issue, value, (field) => plainScalarSourceAt(document, field)).map(
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
      message: `and ${issues.length - shown.length} more errors in this document`,
    });
  }
  return { success: false, diagnostics };
}

/** More than a file reports anyway (MAX_DIAGNOSTICS_PER_FILE in model.ts). */
const MAX_LOCATED_ISSUES = 50;

const PROTO_KEY = "__proto__";

export type PlainParseResult<T> = { success: true; data: T } | { success: false; issues: z.core.$ZodIssue[] };

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
export interface SchemaProblem {
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
): SchemaProblem[] {
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((key) => ({
        field: [...issue.path, key],
        anchor: "key",
        message: "unrecognized key",
      }));
    case "invalid_type": {
      const actual = valueAt(value, issue.path);
      if (actual === undefined)
        return [{ field: issue.path, anchor: "key", message: "required field is missing" }];
      const got = `expected ${issue.expected}, got ${typeName(actual)}`;
      const source = issue.expected === "string" ? plainSource(issue.path) : undefined;
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
