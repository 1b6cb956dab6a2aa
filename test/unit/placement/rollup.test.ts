import { describe, expect, it } from "vitest";
import { expandPlacements } from "../../../src/placement/expand.ts";
import { placementRollup } from "../../../src/placement/rollup.ts";
import { cluster, inventory, model, placementFile } from "./support.ts";

describe("the status rollup per placement", () => {
  it("counts selected and ready clusters, names the first not ready with its reason, and lists who left", () => {
    const parsed = model({
      "p.yaml": placementFile("serving", "  clusterSelectorTerms:\n  - labelSelector: {}"),
      "q.yaml": placementFile(
        "q",
        "  clusterSelectorTerms:\n  - labelSelector: {}",
        "",
        "KnativeEventingPlacement",
      ),
    });
    const expansion = expandPlacements(
      parsed.placements,
      inventory([cluster("a"), cluster("b"), cluster("c")]),
    );
    const q = expansion.selections.find((s) => s.name === "q")!;
    const report = {
      selections: [
        expansion.selections.find((s) => s.name === "serving")!,
        { ...q, clusters: undefined, pending: "the hub's ClusterProfiles are not known yet" },
      ],
      departures: [
        {
          kind: "KnativeServing" as const,
          namespace: "knative-fleet",
          name: "serving-gone",
          placement: "KnativeServingPlacement knative-fleet/serving",
          cluster: "fleet-system/gone",
          since: 1,
          pruneAt: 2,
        },
      ],
    };
    const crs = [
      { kind: "KnativeServing", namespace: "knative-fleet", name: "serving-a", phase: "Current" as const },
      {
        kind: "KnativeServing",
        namespace: "knative-fleet",
        name: "serving-b",
        phase: "Failed" as const,
        reason: "InstallFailed",
      },
    ];
    expect(placementRollup(report, crs)).toEqual([
      {
        placement: "KnativeEventingPlacement knative-fleet/q",
        path: "q.yaml",
        line: 1,
        selected: [],
        ready: 0,
        notReady: 0,
        left: [],
        pending: "the hub's ClusterProfiles are not known yet",
      },
      {
        placement: "KnativeServingPlacement knative-fleet/serving",
        path: "p.yaml",
        line: 1,
        selected: ["fleet-system/a", "fleet-system/b", "fleet-system/c"],
        ready: 1,
        notReady: 2,
        firstNotReady: "fleet-system/b: InstallFailed",
        left: ["fleet-system/gone"],
      },
    ]);
  });
});
