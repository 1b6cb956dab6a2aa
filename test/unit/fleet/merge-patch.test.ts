import { describe, expect, it } from "vitest";
import { mergePatch } from "../../../src/fleet/merge-patch.ts";

// JSON merge patch as RFC 7386 specifies it: its appendix's examples, and what the callers do with a result.

describe("mergePatch", () => {
  it("gives the results of RFC 7386's examples", () => {
    const examples: [unknown, unknown, unknown][] = [
      [{ a: "b" }, { a: "c" }, { a: "c" }],
      [{ a: "b" }, { b: "c" }, { a: "b", b: "c" }],
      [{ a: "b" }, { a: null }, {}],
      [{ a: "b", b: "c" }, { a: null }, { b: "c" }],
      [{ a: ["b"] }, { a: "c" }, { a: "c" }],
      [{ a: "c" }, { a: ["b"] }, { a: ["b"] }],
      [{ a: { b: "c" } }, { a: { b: "d", c: null } }, { a: { b: "d" } }],
      [{ a: [{ b: "c" }] }, { a: [1] }, { a: [1] }],
      [
        ["a", "b"],
        ["c", "d"],
        ["c", "d"],
      ],
      [{ a: "b" }, ["c"], ["c"]],
      [{ a: "foo" }, null, null],
      [{ a: "foo" }, "bar", "bar"],
      [{ e: null }, { a: 1 }, { e: null, a: 1 }],
      [[1, 2], { a: "b", c: null }, { a: "b" }],
      [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
      [null, { a: 1 }, { a: 1 }],
    ];
    for (const [target, patch, result] of examples) {
      expect(mergePatch(target, patch), JSON.stringify([target, patch])).toEqual(result);
    }
  });

  it("leaves the target and the patch as they were", () => {
    const target = { a: { b: 1 }, c: [1] };
    const patch = { a: { b: 2, d: null }, c: [2] };
    mergePatch(target, patch);
    expect(target).toEqual({ a: { b: 1 }, c: [1] });
    expect(patch).toEqual({ a: { b: 2, d: null }, c: [2] });
  });

  it("gives an ordinary object a caller can change further, and keeps __proto__ a plain key", () => {
    const merged = mergePatch({ a: 1 }, { b: { c: 2 } }) as Record<string, unknown>;
    merged.b = "changed";
    expect(merged).toEqual({ a: 1, b: "changed" });
    delete merged.b;
    expect(merged).toEqual({ a: 1 });
    const hostile = mergePatch({}, JSON.parse('{"__proto__": {"polluted": true}}')) as Record<
      string,
      unknown
    >;
    expect(Object.getPrototypeOf(hostile)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(hostile)).toEqual(["__proto__"]);
  });
});
