import { escapeControlCharacters } from "./escape.ts";

// Values in the status README and the plan comment come from the fleet repository, pull requests, the hub
// and the spokes: any of them may be hostile. Each is escaped for where it goes, so none can add HTML (a
// `<!--` hiding every later warning), images, links, emphasis, table cells or lines.

/** ASCII punctuation that starts inline Markdown (links, images, emphasis, code, strikethrough). */
const INLINE_SYNTAX = /[\\`*_[\]!~]/g;

/** A value in Markdown prose: literal, on one line. */
export function markdownText(text: string): string {
  return escapeHtml(escapeControlCharacters(text)).replace(INLINE_SYNTAX, (char) => `\\${char}`);
}

/** A value in a table cell: also no `|`; a line break in it (a multi-line message) becomes `<br>`. */
export function markdownCell(text: string): string {
  return text
    .trim()
    .split(/\r\n|\r|\n/)
    .map((line) => markdownText(line).replaceAll("|", "\\|"))
    .join("<br>");
}

/**
 * A value as a code span: the backtick fence outgrows any backtick run in it, so the value cannot end the
 * span early; control characters are escaped, so it stays on its line. `inTable` also escapes `|`, which
 * GitHub reads as a cell border even inside a code span.
 */
export function markdownCode(text: string, options: { inTable?: boolean } = {}): string {
  let value = escapeControlCharacters(text);
  if (options.inTable) value = value.replaceAll("|", "\\|");
  const longestRun = Math.max(0, ...(value.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(longestRun + 1);
  const padded = value.startsWith("`") || value.endsWith("`") || value === "" ? ` ${value} ` : value;
  return `${fence}${padded}${fence}`;
}

/** A fenced block; the fence outgrows any backtick run in the text, so no value can end it early. */
export function markdownCodeBlock(language: string, lines: readonly string[]): string {
  const text = lines.map(escapeControlCharacters).join("\n");
  const longestRun = Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = "`".repeat(Math.max(3, longestRun + 1));
  return `${fence}${language}\n${text}\n${fence}`;
}

function escapeHtml(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/**
 * A table: the header, the `---` line, a line per row. Each cell is Markdown as given: a value from outside
 * goes through markdownCell (or markdownCode with `inTable`) first; the header is the caller's own text.
 */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}
