import { describe, expect, it } from "vitest";
import { UsageError } from "../../../src/commands/command.ts";
import { outputFormat, renderJson, renderTable, renderYaml } from "../../../src/commands/output.ts";

describe("renderTable", () => {
  it("pads every column but the last to its widest cell, two spaces apart, without trailing blanks", () => {
    expect(
      renderTable(
        ["A", "LONG HEADER", "LAST"],
        [
          ["wide cell", "x", "free text that is not padded"],
          ["b", "", ""],
        ],
      ),
    ).toBe(
      ["A          LONG HEADER  LAST", "wide cell  x            free text that is not padded", "b", ""].join(
        "\n",
      ),
    );
  });

  it("prints only the header for no rows", () => {
    expect(renderTable(["A", "B"], [])).toBe("A  B\n");
  });
});

describe("outputFormat", () => {
  const formats = ["table", "wide", "json", "yaml"] as const;
  it("defaults to the first format and accepts the others", () => {
    expect(outputFormat(undefined, formats)).toBe("table");
    expect(outputFormat("yaml", formats)).toBe("yaml");
  });

  it("rejects anything else as a usage error, with the hint given", () => {
    expect(() => outputFormat("xml", formats)).toThrow(
      new UsageError('-o/--output is the output format, table, wide, json, yaml, not "xml"'),
    );
    expect(() =>
      outputFormat("plan.md", ["markdown", "json"], "--output-file FILE writes to a file"),
    ).toThrow(
      new UsageError(
        '-o/--output is the output format, markdown, json, not "plan.md" (--output-file FILE writes to a file)',
      ),
    );
  });
});

describe("renderYaml", () => {
  it("prints the rows JSON prints, undefined fields left out", () => {
    expect(renderYaml([{ a: 1, b: undefined, c: "x" }])).toBe("- a: 1\n  c: x\n");
  });
});

describe("renderJson", () => {
  it("indents by two and ends with a newline", () => {
    expect(renderJson([{ a: 1 }])).toBe('[\n  {\n    "a": 1\n  }\n]\n');
  });
});
