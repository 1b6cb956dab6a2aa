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
  const result = schema.safeParse(value);
  if (result.success) return { success: true, data: result.data };
  // Locating an issue walks the document: a file with thousands of wrong fields is told about the first
  // ones, then counted, so its cost stays linear.
  const { issues } = result.error;
  const shown = issues.slice(0, MAX_LOCATED_ISSUES);
  const diagnostics = shown.flatMap((issue) => issueDiagnostics(path, document, value, issue));
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

function issueDiagnostics(
  path: string,
  document: SourceDocument,
  value: unknown,
  issue: z.core.$ZodIssue,
): Diagnostic[] {
  const at = (field: FieldPath, anchor: FieldAnchor, message: string): Diagnostic => ({
    path,
    ...locateField(document, field, anchor),
    field: formatFieldPath(field),
    message,
  });
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((key) => at([...issue.path, key], "key", "unrecognized key"));
    case "invalid_type": {
      const actual = valueAt(value, issue.path);
      if (actual === undefined) return [at(issue.path, "key", "required field is missing")];
      const got = `expected ${issue.expected}, got ${typeName(actual)}`;
      const source = issue.expected === "string" ? plainScalarSourceAt(document, issue.path) : undefined;
      // The classic YAML 1.1 trap: `enabled: yes` in a string-valued config map is read as a boolean.
      const message =
        source === undefined
          ? got
          : `${got}: YAML 1.1 reads the unquoted ${source} as a ${typeName(actual)}; quote it ("${source}")`;
      return [at(issue.path, "value", message)];
    }
    default:
      return [at(issue.path, "value", lowercaseFirst(issue.message))];
  }
}

function valueAt(value: unknown, path: FieldPath): unknown {
  let current = value;
  for (const segment of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}
