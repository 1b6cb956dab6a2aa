import { describe, expect, it } from "vitest";
import { planPlacements, readInventorySnapshot, renderPlacementPlan } from "../../../src/placement/plan.ts";
import { model, placementFile } from "./support.ts";

const SNAPSHOT = `apiVersion: v1
kind: List
items:
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata: { name: eu-1, namespace: fleet-system, labels: { env: prod } }
  spec: { clusterManager: { name: ocm } }
  status:
    properties: [{ name: location, value: eu-west }]
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata: { name: us-1, namespace: fleet-system, labels: { env: prod } }
  spec: { clusterManager: { name: ocm } }
  status:
    properties: [{ name: location, value: us-east }]
---
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: PlacementDecision
metadata: { name: d, namespace: fleet-system }
decisions: [{ clusterProfileRef: { name: us-1 } }]
`;

const PATH = "clusters/p.yaml";
const prodEu = placementFile(
  "p",
  "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }\n    propertySelector:\n      matchExpressions: [{ name: location, operator: In, values: [eu-west] }]",
);
const allProd = placementFile(
  "p",
  "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
);

describe("plan: what each placement selects now and after the merge", () => {
  it("reads a kubectl-style snapshot and shows joins, leaves and the merged spec per cluster", () => {
    const inventory = readInventorySnapshot("snapshot.yaml", SNAPSHOT);
    expect(inventory.clusters?.map((c) => c.name)).toEqual(["eu-1", "us-1"]);
    expect(inventory.decisions?.[0]?.clusters).toEqual([{ namespace: "fleet-system", name: "us-1" }]);
    const plan = planPlacements(model({ [PATH]: prodEu }), model({ [PATH]: allProd }), {
      source: "snapshot",
      inventory,
    });
    expect(plan.placements).toMatchObject([
      {
        placement: "KnativeServingPlacement knative-fleet/p",
        before: ["fleet-system/eu-1"],
        added: ["fleet-system/us-1"],
        removed: [],
      },
    ]);
    const text = renderPlacementPlan(plan);
    expect(text).toContain("selects after the merge: ` fleet-system/eu-1 `, ` fleet-system/us-1 `");
    expect(text).toContain("` p-us-1 `");
    expect(text).toContain('"enable-scale-to-zero": "true"');
  });

  it("shows the merged spec a null override makes: the template's field deleted", () => {
    const inventory = readInventorySnapshot("snapshot.yaml", SNAPSHOT);
    const head = `${allProd}  overrides:\n  - clusters: [{ namespace: fleet-system, name: us-1 }]\n    patch: { config: { autoscaler: null } }\n`;
    const text = renderPlacementPlan(
      planPlacements(model({ [PATH]: allProd }), model({ [PATH]: head }), { source: "snapshot", inventory }),
    );
    const us1 = text.slice(text.indexOf("` fleet-system/us-1 ` → "));
    expect(us1).toContain('"config": {}');
    expect(us1).not.toContain("autoscaler");
    expect(text.slice(0, text.indexOf("` fleet-system/us-1 ` → "))).toContain(
      '"enable-scale-to-zero": "true"',
    );
  });

  it("says that selection needs the hub when it has no inventory; listed clusters still show", () => {
    const listed = placementFile("l", "  clusterProfiles: [{ namespace: fleet-system, name: eu-1 }]");
    const plan = planPlacements(model({}), model({ [PATH]: allProd, "clusters/l.yaml": listed }), undefined);
    expect(plan.inventory).toBe("none");
    expect(plan.placements.find((p) => p.placement.endsWith("/p"))?.pending).toContain("--cluster-profiles");
    expect(plan.placements.find((p) => p.placement.endsWith("/l"))?.after?.map((c) => c.name)).toEqual([
      "eu-1",
    ]);
    expect(renderPlacementPlan(plan)).toContain("Selection unknown");
  });

  it("reports a conflict the merge would cause with file:line", () => {
    const inventory = readInventorySnapshot("snapshot.yaml", SNAPSHOT);
    const head = model({ [PATH]: allProd, "clusters/q.yaml": allProd.replace("name: p", "name: q") });
    const plan = planPlacements(model({}), head, { source: "snapshot", inventory });
    expect(plan.diagnostics.map((d) => `${d.path}:${d.line}`)).toEqual([
      "clusters/p.yaml:1",
      "clusters/p.yaml:1",
      "clusters/q.yaml:1",
      "clusters/q.yaml:1",
    ]);
  });

  it("refuses a snapshot that holds something else, naming it", () => {
    expect(() => readInventorySnapshot("s.yaml", "kind: Secret\nmetadata: { name: x }\n")).toThrow(
      's.yaml: document 1: "Secret" is neither a ClusterProfile nor a PlacementDecision',
    );
    expect(() => readInventorySnapshot("s.yaml", "a: [")).toThrow(/^s\.yaml: document 1/);
  });
});
