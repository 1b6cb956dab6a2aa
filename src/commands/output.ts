import { UsageError } from "./command.ts";

// The two output formats of the commands that list things (clusters, status): an aligned table for people,
// the same rows as JSON for tools.

export const OUTPUT_FORMATS = ["table", "json"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The `--output` flag's value; table when unset. */
export function outputFormat(value: unknown): OutputFormat {
  const format = value ?? "table";
  if (!OUTPUT_FORMATS.includes(format as OutputFormat))
    throw new UsageError(`--output must be ${OUTPUT_FORMATS.join(" or ")}, not "${String(format)}"`);
  return format as OutputFormat;
}

/**
 * Columns padded to their widest cell, two spaces apart. The last column is not padded: it holds the long
 * free text (a reason and message), and trailing blanks would only wrap terminals.
 */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, column) => Math.max(h.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join("  ")
      .trimEnd();
  return `${[header, ...rows].map(line).join("\n")}\n`;
}

export const renderJson = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;
