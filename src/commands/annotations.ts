import { createHash } from "node:crypto";
import { type Diagnostic, isError } from "../fleet/diagnostic.ts";

// Diagnostics as CI systems show them on the changed lines of a pull or merge request.

/**
 * GitHub Actions workflow commands, one per diagnostic: `::error file=…,line=…,col=…,title=…::message`.
 * Escaped as the runner reads them: `%`, CR and LF in the message; also `:` and `,` in a property.
 */
export function githubAnnotations(diagnostics: readonly Diagnostic[]): string {
  return diagnostics
    .map((diagnostic) => {
      const command = isError(diagnostic) ? "error" : "warning";
      const title = diagnostic.field === "" ? "knative-fleet" : `knative-fleet: ${diagnostic.field}`;
      const properties = [
        `file=${escapeProperty(diagnostic.path)}`,
        `line=${diagnostic.line}`,
        `col=${diagnostic.column}`,
        `title=${escapeProperty(title)}`,
      ].join(",");
      return `::${command} ${properties}::${escapeData(diagnostic.message)}\n`;
    })
    .join("");
}

/** A check that did not run, as a notice on the run's summary page (at its file when it has one). */
export function githubNotice(message: string, file?: string, line?: number): string {
  const at = file === undefined ? [] : [`file=${escapeProperty(file)}`, ...(line ? [`line=${line}`] : [])];
  return `::notice ${[...at, "title=knative-fleet validate%3A check skipped"].join(",")}::${escapeData(message)}\n`;
}

const escapeData = (text: string) =>
  text.replaceAll("%", "%25").replaceAll("\r", "%0D").replaceAll("\n", "%0A");
const escapeProperty = (text: string) => escapeData(text).replaceAll(":", "%3A").replaceAll(",", "%2C");

/** One issue of a GitLab Code Quality report (`artifacts:reports:codequality`). */
interface CodeQualityIssue {
  description: string;
  check_name: string;
  /** Stable across pushes that only move the line: the file, field and message. */
  fingerprint: string;
  severity: "major" | "minor";
  location: {
    path: string;
    lines: { begin: number };
    positions: { begin: { line: number; column: number } };
  };
}

/** The GitLab Code Quality report: a JSON array of issues, errors `major`, warnings `minor`. */
export function gitlabCodeQuality(diagnostics: readonly Diagnostic[]): string {
  const issues: CodeQualityIssue[] = diagnostics.map((diagnostic) => ({
    description: diagnostic.field === "" ? diagnostic.message : `${diagnostic.field}: ${diagnostic.message}`,
    check_name: `knative-fleet/${isError(diagnostic) ? "error" : "warning"}`,
    fingerprint: createHash("sha256")
      .update(`${diagnostic.path}\0${diagnostic.field}\0${diagnostic.message}`)
      .digest("hex")
      .slice(0, 32),
    severity: isError(diagnostic) ? "major" : "minor",
    location: {
      path: diagnostic.path,
      lines: { begin: diagnostic.line },
      positions: { begin: { line: diagnostic.line, column: diagnostic.column } },
    },
  }));
  return `${JSON.stringify(issues, null, 2)}\n`;
}
