import { escapeControlCharacters } from "../text/escape.ts";

// Also named here for the callers that import it with the diagnostics.
export { escapeControlCharacters };

/** A 1-based line and column in a fleet file, as editors and `file:line:col` links count them. */
export interface SourcePosition {
  line: number;
  column: number;
}

/**
 * One finding in a fleet file. Without `severity` it is an error: a file with any error is not applied.
 * A warning (`severity: "warning"`) is reported and never blocks.
 */
export interface Diagnostic extends SourcePosition {
  /** The file's path relative to the fleet repository root (forward slashes). */
  path: string;
  /** The field path in the document, e.g. `spec.registry.override`; empty when the YAML itself is broken. */
  field: string;
  message: string;
  severity?: "warning";
}

/** Whether a diagnostic blocks its file: every one but a warning does. */
export function isError(diagnostic: Diagnostic): boolean {
  return diagnostic.severity !== "warning";
}

/** A field path as a list of keys and array indexes, the shape zod issues and YAML ASTs use. */
export type FieldPath = readonly PropertyKey[];

const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;

/** `["spec", "registry", "imagePullSecrets", 0, "name"]` -> `spec.registry.imagePullSecrets[0].name`. */
export function formatFieldPath(path: FieldPath): string {
  let formatted = "";
  for (const segment of path) {
    if (typeof segment === "number") formatted += `[${segment}]`;
    else {
      const key = String(segment);
      // Keys such as annotation names hold dots and slashes; bracket them so the path stays unambiguous.
      if (!PLAIN_KEY.test(key)) formatted += `[${JSON.stringify(key)}]`;
      else formatted += formatted === "" ? key : `.${key}`;
    }
  }
  return formatted;
}

/**
 * `clusters/prod-eu/knative-serving.yaml:12:5 spec.registry.overide: unrecognized key`, always one line:
 * control characters in a file name or key are escaped, so a name cannot forge or hide other lines.
 */
export function formatDiagnostic(diagnostic: Diagnostic): string {
  const location = `${diagnostic.path}:${diagnostic.line}:${diagnostic.column}`;
  return escapeControlCharacters(
    diagnostic.field === ""
      ? `${location}: ${diagnostic.message}`
      : `${location} ${diagnostic.field}: ${diagnostic.message}`,
  );
}

/** Messages from the YAML parser and zod start capitalised; diagnostics read as `field: lower-case text`. */
export function lowercaseFirst(message: string): string {
  return message.charAt(0).toLowerCase() + message.slice(1);
}

/** File, then position, then text: the order a reader walks a repository in, and stable across runs. */
export function compareDiagnostics(a: Diagnostic, b: Diagnostic): number {
  return (
    compareStrings(a.path, b.path) ||
    a.line - b.line ||
    a.column - b.column ||
    compareStrings(a.field, b.field) ||
    compareStrings(a.message, b.message)
  );
}

/** Code-unit order, independent of the machine's locale, so output is byte-identical everywhere. */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
