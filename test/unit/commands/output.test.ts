import { describe, expect, it } from "vitest";
import { UsageError } from "../../../src/commands/command.ts";
import { outputFormat, renderJson, renderTable } from "../../../src/commands/output.ts";

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
  it("defaults to table and accepts json", () => {
    expect(outputFormat(undefined)).toBe("table");
    expect(outputFormat("json")).toBe("json");
  });

  it("rejects anything else as a usage error", () => {
    expect(() => outputFormat("yaml")).toThrow(new UsageError('--output must be table or json, not "yaml"'));
  });
});

describe("renderJson", () => {
  it("indents by two and ends with a newline", () => {
    expect(renderJson([{ a: 1 }])).toBe('[\n  {\n    "a": 1\n  }\n]\n');
  });
});
