import { describe, expect, it } from "vitest";
import { MAX_EXPRESSIONS, MAX_TERMS, MAX_VALUES } from "../../../src/fleet/placement-schema.ts";
import { expandPlacements } from "../../../src/placement/expand.ts";
import { type InventoryCluster, inventoryDecisionOf } from "../../../src/placement/inventory.ts";
import { matchesLabels } from "../../../src/placement/select.ts";
import { seededRandom } from "../../support/seeded-random.ts";
import { cluster, inventory, model, placementFile } from "./support.ts";

// Shapes nobody writes on purpose: random selectors over random inventories, the largest selectors the
// format admits, odd property values and label keys a hub may hold.

const ODD_VALUES = [
  "",
  " ",
  "1e3",
  "-0",
  "0x10",
  "12 nodes",
  "ü-region",
  "a\nb",
  "99999999999999999999",
  "NaN",
];
const OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;

describe("hostile and random shapes", () => {
  it("random selectors over random inventories: never throw, valid stable names, selection = OR of terms", () => {
    for (let seed = 1; seed <= 40; seed++) {
      const next = seededRandom(seed);
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!;
      const clusters: InventoryCluster[] = Array.from({ length: 30 }, (_, i) =>
        cluster(
          `${pick(["a", "b.c", "x".repeat(70), "UP", "z-9"])}${i}`.toLowerCase().replace(/^x+(\d)/, "x$1"),
          Object.fromEntries(
            Array.from({ length: 3 }, () => [pick(["env", "tier", "zone"]), pick(["a", "b", "c"])]),
          ),
          Object.fromEntries(
            Array.from({ length: 2 }, () => [pick(["location", "nodes"]), pick(ODD_VALUES)]),
          ),
        ),
      );
      const expression = () => {
        const operator = pick(OPERATORS);
        const values = operator === "In" || operator === "NotIn" ? ` values: [${pick(["a", "b", "c"])}]` : "";
        return `{ key: ${pick(["env", "tier", "zone", "none"])}, operator: ${operator},${values} }`;
      };
      const terms = Array.from(
        { length: 1 + Math.floor(next() * 3) },
        () => `  - labelSelector:\n      matchExpressions: [${expression()}, ${expression()}]`,
      );
      const parsed = model({ "p.yaml": placementFile("p", `  clusterSelectorTerms:\n${terms.join("\n")}`) });
      expect(parsed.diagnostics, `seed ${seed}`).toEqual([]);
      const result = expandPlacements(parsed.placements, inventory(clusters));
      const again = expandPlacements(parsed.placements, inventory([...clusters].reverse()));
      expect(again.resources, `seed ${seed}`).toEqual(result.resources);
      for (const { resource } of result.resources) {
        expect(resource.metadata.name.length).toBeLessThanOrEqual(63);
        expect(resource.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      }
      // Each term alone, ORed, gives the same set.
      const byTerm = new Set(
        terms.flatMap((term) =>
          expandPlacements(
            model({ "q.yaml": placementFile("p", `  clusterSelectorTerms:\n${term}`) }).placements,
            inventory(clusters),
          ).selections[0]!.clusters!.map((c) => c.name),
        ),
      );
      expect(new Set(result.selections[0]!.clusters!.map((c) => c.name)), `seed ${seed}`).toEqual(byTerm);
    }
  });

  it("the largest selector the format admits still selects exactly (32 terms x 64 expressions x 256 values)", () => {
    // Built as data: the 3 MB of YAML such a file takes is the fleet parser's cost, not selection's.
    const parsed = model({
      "p.yaml": placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { k0: v0 } }"),
    });
    const values = Array.from({ length: MAX_VALUES }, (_, i) => `v${i}`);
    const term = {
      labelSelector: {
        matchExpressions: Array.from({ length: MAX_EXPRESSIONS }, (_, i) => ({
          key: `k${i}`,
          operator: i === 0 ? ("In" as const) : ("NotIn" as const),
          values,
        })),
      },
    };
    const [declared] = parsed.placements;
    const huge = {
      ...declared!,
      placement: {
        ...declared!.placement,
        spec: {
          ...declared!.placement.spec,
          clusterSelectorTerms: Array.from({ length: MAX_TERMS }, () => term),
        },
      },
    };
    const clusters = Array.from({ length: 1000 }, (_, i) => cluster(`c${i}`, { k0: `v${i % 300}` }));
    const selected = expandPlacements([huge], inventory(clusters)).selections[0]!.clusters!;
    // k0 In v0..v255 and k1..k63 absent (NotIn holds): the clusters whose v is below 256.
    expect(selected.length).toBe(clusters.filter((_, i) => i % 300 < 256).length);
  });

  it("label maps from the hub with prototype-ish keys are plain data", () => {
    const labels = JSON.parse('{"__proto__": "x", "constructor": "y", "env": "prod"}') as Record<
      string,
      string
    >;
    expect(matchesLabels({ matchLabels: { constructor: "y" } }, labels)).toBe(true);
    expect(matchesLabels({ matchLabels: { toString: "z" } }, { env: "prod" })).toBe(false);
    expect(
      matchesLabels({ matchExpressions: [{ key: "hasOwnProperty", operator: "Exists" }] }, { env: "prod" }),
    ).toBe(false);
  });

  it("PlacementDecisions from the hub whose decisions are not a list choose no cluster", () => {
    for (const decisions of [undefined, "all", { clusterProfileRef: { name: "eu-1" } }]) {
      const read = inventoryDecisionOf({
        apiVersion: "multicluster.x-k8s.io/v1alpha1",
        kind: "PlacementDecision",
        metadata: { name: "d", namespace: "fleet-system" },
        decisions,
      } as never);
      expect(read, JSON.stringify(decisions)).toEqual({ namespace: "fleet-system", name: "d", clusters: [] });
    }
  });
});
