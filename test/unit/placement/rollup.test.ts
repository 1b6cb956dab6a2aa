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

  it("names the clusters that differ from the others: another version than most, or a kept drift", () => {
    const parsed = model({
      "p.yaml": placementFile("serving", "  clusterSelectorTerms:\n  - labelSelector: {}"),
    });
    const names = ["a", "b", "c", "d", "e"];
    const expansion = expandPlacements(parsed.placements, inventory(names.map((n) => cluster(n))));
    const report = { selections: expansion.selections, departures: [] };
    const cr = (name: string, version: string, drift?: "kept" | "corrected") => ({
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: `serving-${name}`,
      phase: "Current" as const,
      version,
      ...(drift && { drift: { state: drift } }),
    });
    // The clusters in an order (by name) where neither the first version seen nor a text sort gives the answer.
    const [row] = placementRollup(report, [
      cr("a", "1.8.1"),
      cr("b", "1.9.3", "kept"),
      cr("c", "1.9.3"),
      cr("d", "1.10.0"),
      cr("e", "1.10.0", "corrected"),
    ]);
    // 1.10.0 and 1.9.3 twice each: the newer is the fleet's, the older ones are named.
    expect(row!.differs).toEqual([
      "fleet-system/a: version 1.8.1, the others 1.10.0",
      "fleet-system/b: version 1.9.3, the others 1.10.0",
      "fleet-system/b: keeps a change made on the cluster (drift, report mode)",
      "fleet-system/c: version 1.9.3, the others 1.10.0",
    ]);
    const [same] = placementRollup(
      report,
      names.map((n) => cr(n, "1.22.2", "corrected")),
    );
    expect(same!.differs).toBeUndefined();
    // The most common wins over the newest: one cluster ahead is the one named.
    const [ahead] = placementRollup(report, [
      cr("a", "1.23.0"),
      cr("b", "1.22.2"),
      cr("c", "1.22.2"),
      cr("d", "1.22.2"),
      cr("e", "1.22.2"),
    ]);
    expect(ahead!.differs).toEqual(["fleet-system/a: version 1.23.0, the others 1.22.2"]);
  });

  it("takes a version written short (1.10) and one with a patch (1.10.1) in the same order either way round", () => {
    const parsed = model({
      "p.yaml": placementFile("serving", "  clusterSelectorTerms:\n  - labelSelector: {}"),
    });
    const expansion = expandPlacements(parsed.placements, inventory([cluster("a"), cluster("b")]));
    const report = { selections: expansion.selections, departures: [] };
    const cr = (name: string, version: string) => ({
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: `serving-${name}`,
      phase: "Current" as const,
      version,
    });
    // One each: the newer is the fleet's, whichever cluster comes first.
    for (const [a, b] of [
      ["1.10", "1.10.1"],
      ["1.10.1", "1.10"],
    ]) {
      const [row] = placementRollup(report, [cr("a", a!), cr("b", b!)]);
      const older = a === "1.10" ? "a" : "b";
      expect(row!.differs).toEqual([`fleet-system/${older}: version 1.10, the others 1.10.1`]);
    }
  });

  it("says why the first cluster not ready is: its reason, in progress, or no CR yet; and lists only its own departures", () => {
    const parsed = model({
      "p.yaml": placementFile("serving", "  clusterSelectorTerms:\n  - labelSelector: {}"),
    });
    const expansion = expandPlacements(parsed.placements, inventory([cluster("a"), cluster("b")]));
    const departure = (placement: string, name: string) => ({
      kind: "KnativeServing" as const,
      namespace: "knative-fleet",
      name: `serving-${name}`,
      placement,
      cluster: `fleet-system/${name}`,
      since: 1,
      pruneAt: 2,
    });
    const report = {
      selections: expansion.selections,
      departures: [
        departure("KnativeServingPlacement knative-fleet/other", "x"),
        departure("KnativeServingPlacement knative-fleet/serving", "z"),
        departure("KnativeServingPlacement knative-fleet/serving", "y"),
      ],
    };
    const inProgress = {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "serving-a",
      phase: "InProgress" as const,
    };
    const [started] = placementRollup(report, [inProgress]);
    expect(started).toMatchObject({
      firstNotReady: "fleet-system/a: in progress",
      left: ["fleet-system/y", "fleet-system/z"],
    });
    const [none] = placementRollup(report, []);
    expect(none!.firstNotReady).toBe("fleet-system/a: not created yet");
  });
});
