import { stringify } from "yaml";
import { SCHEMA_VERSION } from "../text/schema-version.ts";
import { UsageError } from "./command.ts";

// -o/--output, as kubectl users type it: the format of what a command prints. The commands that list things
// (clusters, status) print an aligned table for people (wide: with more columns), or the same rows as JSON
// or YAML for tools.

export const LISTING_FORMATS = ["table", "wide", "json", "yaml"] as const;
export type ListingFormat = (typeof LISTING_FORMATS)[number];

/** The -o/--output option, the same in every command that has one. */
export const OUTPUT_OPTION = { output: { type: "string", short: "o" } } as const;

/** The `-o/--output` flag's value, one of `formats`; the first of them when unset. `hint` follows a refusal. */
export function outputFormat<F extends string>(value: unknown, formats: readonly F[], hint?: string): F {
  const format = value ?? formats[0];
  if (!formats.includes(format as F)) {
    throw new UsageError(
      `-o/--output is the output format, ${formats.join(", ")}, not "${String(format)}"${hint ? ` (${hint})` : ""}`,
    );
  }
  return format as F;
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

/** A table's columns, some only in `-o wide`. */
export interface Column<T> {
  header: string;
  cell(row: T): string;
  wide?: true;
}

/** The table of `rows` for -o table (the columns not marked wide) or -o wide (all of them). */
export function renderColumns<T>(columns: readonly Column<T>[], rows: readonly T[], wide: boolean): string {
  const shown = columns.filter((column) => wide || !column.wide);
  return renderTable(
    shown.map((column) => column.header),
    rows.map((row) => shown.map((column) => column.cell(row))),
  );
}

export const renderJson = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

/** YAML of the same value JSON output gives (undefined fields left out, as JSON leaves them). */
export const renderYaml = (value: unknown): string =>
  stringify(JSON.parse(JSON.stringify(value)), { lineWidth: 0 });

/** A listing as -o json and yaml print it: `{schemaVersion, items}`, the rows under `items`. */
interface ListingData<T> {
  schemaVersion: typeof SCHEMA_VERSION;
  items: T[];
}

const listingData = <T>(items: readonly T[]): ListingData<T> => ({
  schemaVersion: SCHEMA_VERSION,
  items: [...items],
});

/** Rows as -o json or yaml print them (`{schemaVersion, items}`); undefined for the table formats. */
export function renderData(format: ListingFormat, rows: readonly unknown[]): string | undefined {
  if (format === "json") return renderJson(listingData(rows));
  if (format === "yaml") return renderYaml(listingData(rows));
  return undefined;
}
