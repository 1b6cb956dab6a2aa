import { describe, expect, it } from "vitest";
import type { ClusterSelectorTerm, LabelSelector } from "../../../src/fleet/placement-schema.ts";
import { matchesLabels, matchesTerm } from "../../../src/placement/select.ts";
import { cluster } from "./support.ts";

// Selection by label and property, read straight from select.ts: the boundaries of Gt/Lt, what is not a
// decimal number, and the shapes the schema refuses but a hand-built term could still carry (fail closed).

const withNodes = (nodes: string) => cluster("c", { env: "prod" }, { nodes });
const property = (operator: "Gt" | "Lt", bound: string, observed: string) =>
  matchesTerm(
    { propertySelector: { matchExpressions: [{ name: "nodes", operator, values: [bound] }] } },
    withNodes(observed),
  );

describe("property Gt/Lt", () => {
  it("are strict: a value equal to the bound satisfies neither, whatever its decimal spelling", () => {
    for (const [bound, observed] of [
      ["10", "10"],
      ["10", "10.0"],
      ["0.5", ".5"],
      ["-3", "-3"],
    ]) {
      expect(property("Gt", bound!, observed!), `${observed} Gt ${bound}`).toBe(false);
      expect(property("Lt", bound!, observed!), `${observed} Lt ${bound}`).toBe(false);
    }
    expect(property("Gt", "10", "10.01")).toBe(true);
    expect(property("Lt", "10", "9.99")).toBe(true);
  });

  it("compare as numbers, not as strings", () => {
    expect(property("Gt", "9", "10")).toBe(true);
    expect(property("Lt", "9", "10")).toBe(false);
    expect(property("Lt", "-1", "-2")).toBe(true);
  });

  it("never hold for a value that is not a decimal number, even one JavaScript reads as a number", () => {
    // Number("") and Number(" ") are 0, Number("0x10") is 16, Number("1e3") is 1000, Infinity is Infinity.
    for (const observed of ["", " ", "0x10", "1e3", "Infinity", "12 nodes"]) {
      expect(property("Lt", "100", observed), JSON.stringify(observed)).toBe(false);
      expect(property("Gt", "-100", observed), JSON.stringify(observed)).toBe(false);
    }
  });

  it("never hold for a property the cluster does not have", () => {
    const term: ClusterSelectorTerm = {
      propertySelector: { matchExpressions: [{ name: "missing", operator: "Lt", values: ["10"] }] },
    };
    expect(matchesTerm(term, withNodes("1"))).toBe(false);
  });
});

describe("a property selector", () => {
  it("needs every expression to hold, not just one", () => {
    const term: ClusterSelectorTerm = {
      propertySelector: {
        matchExpressions: [
          { name: "nodes", operator: "Gt", values: ["5"] },
          { name: "nodes", operator: "Lt", values: ["20"] },
        ],
      },
    };
    expect(matchesTerm(term, withNodes("12"))).toBe(true);
    expect(matchesTerm(term, withNodes("3"))).toBe(false);
    expect(matchesTerm(term, withNodes("40"))).toBe(false);
  });
});

describe("shapes the schema refuses select nothing (fail closed)", () => {
  it("a term with neither a label nor a property selector", () => {
    expect(matchesTerm({} as ClusterSelectorTerm, withNodes("1"))).toBe(false);
  });

  it("an operator the schema does not know, for labels and for properties", () => {
    const labels = { matchExpressions: [{ key: "env", operator: "Matches" }] } as unknown as LabelSelector;
    expect(matchesLabels(labels, { env: "prod" })).toBe(false);
    const term = {
      propertySelector: { matchExpressions: [{ name: "nodes", operator: "Ge", values: ["1"] }] },
    } as unknown as ClusterSelectorTerm;
    expect(matchesTerm(term, withNodes("12"))).toBe(false);
  });
});
