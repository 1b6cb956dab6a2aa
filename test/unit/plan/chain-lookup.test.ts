import { describe, expect, it } from "vitest";
import { chainsOf, withChain } from "../../../src/plan/plan.ts";
import type { ResourcePlan } from "../../../src/plan/report.ts";
import type { ChainedCr } from "../../../src/upgrade/chain.ts";

// A plan looks each CR up in head's upgrade chains once, by `Kind namespace/name` (issue #44: a scan of the
// list per CR was quadratic; scripts/bench-reports.ts --pipeline prints the times).

const plan = (name: string): ResourcePlan => ({
  kind: "KnativeServing",
  namespace: "knative-fleet",
  name,
  cluster: `fleet-system/${name}`,
  path: `clusters/${name}.yaml`,
  action: "update",
  objects: { created: [], changed: [], deleted: [] },
  findings: [],
});
const chained = (name: string, step: string): ChainedCr => ({
  key: `KnativeServing knative-fleet/${name}`,
  path: `clusters/${name}.yaml`,
  cluster: `fleet-system/${name}`,
  chain: "KnativeServing 1.23",
  from: "1.21",
  step,
  target: "1.23",
  minors: ["1.21", "1.22", "1.23"],
});

describe("a CR's upgrade chain in the plan", () => {
  it("is the one head's sync lists for the CR, and the CR is left as it is when none does", () => {
    const chains = chainsOf([chained("a", "1.22"), chained("b", "1.22")]);
    expect(withChain(plan("b"), chains)).toEqual({
      ...plan("b"),
      chain: { minors: ["1.21", "1.22", "1.23"], step: "1.22", target: "1.23" },
    });
    const other = plan("c");
    expect(withChain(other, chains)).toBe(other);
    expect(withChain(other, chainsOf(undefined))).toBe(other);
    // Another kind of the same name is another CR.
    expect(withChain({ ...plan("a"), kind: "KnativeEventing" }, chains).chain).toBeUndefined();
  });

  it("is the first the list gives for a CR listed twice, as a scan of the list found it", () => {
    const chains = chainsOf([chained("a", "1.22"), chained("a", "1.23")]);
    expect(withChain(plan("a"), chains).chain?.step).toBe("1.22");
  });
});
