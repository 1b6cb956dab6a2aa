import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { yamlList } from "../../../src/status/yaml-list.ts";

// fleet.yaml's CR list rendered item by item, each kept while it stays the same: the text must be the one
// YAML's stringify writes for the whole, whatever the strings hold, rendered anew or reused.

const yamlCalls = vi.hoisted(() => ({ count: 0 }));
vi.mock("yaml", async (importOriginal) => {
  const yaml = await importOriginal<typeof import("yaml")>();
  return {
    ...yaml,
    stringify: (...args: Parameters<typeof yaml.stringify>) => {
      yamlCalls.count++;
      return yaml.stringify(...args);
    },
  };
});
const { stringify } = await import("yaml");

// Strings YAML must quote, fold or write as blocks: indicators, comments, newlines, leading spaces, words
// it reads as other types, and any text at all.
const awkward = fc.oneof(
  fc.constantFrom(
    "",
    " ",
    "- x",
    "a: b",
    "# c",
    "x #y",
    "|",
    ">",
    "'",
    '"',
    "yes",
    "null",
    "1e3",
    "0x1F",
    "~",
  ),
  fc.constantFrom(
    "two\nlines",
    "trailing\n",
    "\n\nleading",
    "  indented\n  block",
    "tab\there",
    "line\u2028separator",
    "\u2029paragraph",
    "ünïcödé ✅",
  ),
  fc.string({ unit: "grapheme", maxLength: 30 }),
  fc.string({ unit: fc.constantFrom("a", " ", "\n", ":", "-", "#", '"', "'"), maxLength: 20 }),
);
const row = fc.record(
  {
    kind: fc.constantFrom("KnativeServing", "KnativeEventing"),
    name: awkward,
    message: awkward,
    drift: fc.record({
      state: fc.constantFrom("kept", "corrected"),
      records: fc.array(fc.record({ field: awkward, by: awkward }), { maxLength: 2 }),
    }),
  },
  { requiredKeys: ["kind", "name"] },
);

const whole = (items: object[]) => stringify({ resources: items, rest: [] }, { lineWidth: 0 });
const inPieces = (items: object[]) =>
  `${yamlList("resources", items)}${stringify({ rest: [] }, { lineWidth: 0 })}`;

describe("yamlList", () => {
  it("writes what YAML writes for the whole list, rendered anew, reused, or with one item changed", () => {
    fc.assert(
      fc.property(fc.array(row, { maxLength: 8 }), row, fc.nat(), (items, changed, at) => {
        expect(inPieces(items)).toBe(whole(items));
        expect(inPieces(items), "again, every item reused").toBe(whole(items));
        const next = items.length === 0 ? [changed] : items.with(at % items.length, changed);
        expect(inPieces(next)).toBe(whole(next));
      }),
      { numRuns: 300 },
    );
  });

  it("renders only the items that changed since the last call, and forgets the ones no longer listed", () => {
    const items: object[] = Array.from({ length: 1_000 }, (_, i) => ({
      kind: "KnativeServing",
      name: `serving-${i}`,
    }));
    yamlList("resources", items);
    yamlCalls.count = 0;
    const next = items.with(500, { kind: "KnativeServing", name: "serving-500", message: "not ready" });
    expect(yamlList("resources", next)).toBe(stringify({ resources: next }, { lineWidth: 0 }));
    expect(yamlCalls.count, "one item rendered, and the whole for the comparison").toBe(2);
    // serving-500 without its message was not listed last time: rendered again.
    yamlCalls.count = 0;
    yamlList("resources", items);
    expect(yamlCalls.count).toBe(1);
  });
});
