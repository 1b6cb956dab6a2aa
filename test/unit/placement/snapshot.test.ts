import { describe, expect, it } from "vitest";
import type { KubeObject } from "../../../src/kube/object.ts";
import {
  planPlacements,
  readHubInventoryObjects,
  readInventorySnapshot,
  readSnapshotObjects,
} from "../../../src/placement/plan.ts";
import { FakeKube } from "../../support/fake-kube.ts";

// The inventory `plan` and `validate` read: a snapshot file as kubectl prints it (any error names the file
// and the document), or the hub's ClusterProfiles and PlacementDecisions read once.

const PROFILE_API = "multicluster.x-k8s.io/v1alpha1";
const profile = (name: string): KubeObject => ({
  apiVersion: PROFILE_API,
  kind: "ClusterProfile",
  metadata: { name, namespace: "fleet-system", labels: { env: "prod" } },
  spec: { clusterManager: { name: "test" } },
});
const decision = (name: string, clusters: string[]): KubeObject => ({
  apiVersion: PROFILE_API,
  kind: "PlacementDecision",
  metadata: { name, namespace: "fleet-system" },
  decisions: clusters.map((clusterName) => ({
    clusterProfileRef: { name: clusterName, namespace: "fleet-system" },
  })),
});
const yamlOf = (...documents: object[]) => documents.map((d) => JSON.stringify(d)).join("\n---\n");

describe("a snapshot file", () => {
  it("reads Lists of any name (kubectl's List, the API's ClusterProfileList) beside single objects", () => {
    const text = yamlOf(
      { apiVersion: "v1", kind: "List", items: [profile("a")] },
      { apiVersion: PROFILE_API, kind: "ClusterProfileList", items: [profile("b")] },
      decision("d", ["a"]),
    );
    const inventory = readInventorySnapshot("inv.yaml", text);
    expect(inventory.clusters?.map((c) => c.name)).toEqual(["a", "b"]);
    expect(inventory.decisions?.map((d) => [d.name, d.clusters.map((c) => c.name)])).toEqual([["d", ["a"]]]);
  });

  it("names the file and the document of each error", () => {
    const read = (text: string) => () => readSnapshotObjects("inv.yaml", text);
    expect(read(`${yamlOf(profile("a"))}\n---\nkind: [unclosed\n`)).toThrow(
      /^inv\.yaml: document 2: Flow sequence in block collection must be sufficiently indented/,
    );
    expect(read(yamlOf(profile("a"), { kind: "List" }))).toThrow(
      "inv.yaml: document 2: a List needs an items list",
    );
    expect(read(yamlOf(profile("a"), { kind: "List", items: [{ kind: "Secret" }] }))).toThrow(
      'inv.yaml: document 2: "Secret" is neither a ClusterProfile nor a PlacementDecision',
    );
    expect(read(yamlOf(profile("a"), { kind: "ClusterProfile", metadata: {} }))).toThrow(
      "inv.yaml: document 2: a ClusterProfile needs apiVersion and metadata",
    );
    expect(read(yamlOf({ kind: "PlacementDecision", apiVersion: PROFILE_API, metadata: "x" }))).toThrow(
      "inv.yaml: document 1: a PlacementDecision needs apiVersion and metadata",
    );
  });

  it("skips empty documents", () => {
    expect(readSnapshotObjects("inv.yaml", `---\n${yamlOf(profile("a"))}\n---\n`)).toHaveLength(1);
  });
});

describe("the hub's inventory for a plan", () => {
  // The stored ClusterProfile version may be v1alpha2; PlacementDecisions are served at v1alpha1.
  const stored = { ...profile("a"), apiVersion: "multicluster.x-k8s.io/v1alpha2" };
  const hub = (objects: KubeObject[]) => {
    const kube = new FakeKube().serveKindsOf(objects);
    for (const object of objects) kube.put(object);
    return kube.client;
  };

  it("is its ClusterProfiles at the version given and its PlacementDecisions", async () => {
    const objects = await readHubInventoryObjects(hub([stored, decision("d", ["a"])]), stored.apiVersion);
    expect(objects.map((o) => `${o.apiVersion} ${o.kind} ${o.metadata.name}`)).toEqual([
      "multicluster.x-k8s.io/v1alpha2 ClusterProfile a",
      "multicluster.x-k8s.io/v1alpha1 PlacementDecision d",
    ]);
  });

  it("of a hub without the PlacementDecision CRD has no decisions, and is no error", async () => {
    const objects = await readHubInventoryObjects(hub([stored]), stored.apiVersion);
    expect(objects.map((o) => o.kind)).toEqual(["ClusterProfile"]);
  });
});

describe("the plan's placements", () => {
  it("are listed by name, whatever order the commits declare them in", () => {
    const selection = (name: string) => ({
      path: `${name}.yaml`,
      line: 1,
      kind: "KnativeServingPlacement" as const,
      namespace: "knative-fleet",
      name,
      clusters: [],
      skipped: [],
    });
    const { placements } = planPlacements([selection("b")], [selection("c"), selection("a")], "snapshot");
    expect(placements.map((p) => p.placement)).toEqual([
      "KnativeServingPlacement knative-fleet/a",
      "KnativeServingPlacement knative-fleet/b",
      "KnativeServingPlacement knative-fleet/c",
    ]);
  });
});
