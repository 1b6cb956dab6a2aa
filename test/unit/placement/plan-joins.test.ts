import { describe, expect, it } from "vitest";
import type { PlacementSelection } from "../../../src/placement/expand.ts";
import { planPlacements } from "../../../src/placement/plan.ts";

// Who joins a placement and who leaves it, as the plan says: the clusters after the merge that were not
// selected before (in the order head selects them), and those before that are not selected after (in
// base's order). Looked up in a set built once (issue #44: a scan per cluster was quadratic).

const selection = (
  clusters: string[] | undefined,
  extra: Partial<PlacementSelection> = {},
): PlacementSelection => ({
  path: "placements/serving.yaml",
  line: 1,
  kind: "KnativeServingPlacement",
  namespace: "knative-fleet",
  name: "serving",
  ...(clusters && {
    clusters: clusters.map((name) => ({
      namespace: "fleet-system",
      name,
      crName: `serving-${name}`,
      via: ["list" as const],
      overrides: [],
      spec: {},
    })),
  }),
  skipped: [],
  ...extra,
});
const keys = (...names: string[]) => names.map((name) => `fleet-system/${name}`);

describe("a placement's joins and departures in the plan", () => {
  it("names the clusters that join in head's order and those that leave in base's", () => {
    const { placements } = planPlacements(
      [selection(["e", "b", "d", "a"])],
      [selection(["f", "a", "c", "b"])],
      "snapshot",
    );
    expect(placements).toHaveLength(1);
    expect(placements[0]).toMatchObject({
      placement: "KnativeServingPlacement knative-fleet/serving",
      before: keys("e", "b", "d", "a"),
      added: keys("f", "c"),
      removed: keys("e", "d"),
    });
  });

  it("has every cluster join a new placement and leave a removed one; a pending one has neither", () => {
    const added = planPlacements([], [selection(["a", "b"])], "snapshot").placements[0]!;
    expect(added).toMatchObject({ added: keys("a", "b"), removed: [] });
    expect(added.before).toBeUndefined();
    const removed = planPlacements([selection(["a", "b"])], [], "snapshot").placements[0]!;
    expect(removed).toMatchObject({ before: keys("a", "b"), added: [], removed: keys("a", "b") });
    expect(removed.after).toBeUndefined();
    const pending = planPlacements(
      [selection(["a"])],
      [selection(undefined, { pending: "the hub's ClusterProfiles are not known yet: no hub" })],
      "none",
    ).placements[0]!;
    expect(pending).toMatchObject({ added: [], removed: keys("a"), pending: "no hub" });
  });
});
