import { describe, expect, it } from "vitest";
import {
  PLACEMENT_KIND_LABEL,
  PLACEMENT_LABEL,
  SOURCE_CLUSTER_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../../src/api/labels.ts";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { expandForSync, withPlacements } from "../../../src/placement/combine.ts";
import { expandPlacements } from "../../../src/placement/expand.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { cluster, inventory, model, NS, PROFILES, placementFile, servingFile } from "./support.ts";

// How a placement's CRs join the fleet model: what a conflict with a per-cluster file says, and which live
// CRs of its clusters the sync keeps when the placement cannot be expanded.

const FLEET = [cluster("us-1"), cluster("eu-2")];
const listing = (name: string, clusters: string[]) =>
  placementFile(
    name,
    `  clusterProfiles: [${clusters.map((c) => `{ namespace: ${PROFILES}, name: ${c} }`).join(", ")}]`,
  );

describe("a placement and a per-cluster file", () => {
  it("on one cluster: each file's message names the other as a reader finds it (the placement, the CR and its line)", () => {
    const parsed = model({
      "p.yaml": listing("p", ["us-1"]),
      "clusters/us-1/serving.yaml": servingFile("us-1-serving", "us-1"),
    });
    const combined = withPlacements(parsed, expandPlacements(parsed.placements, inventory(FLEET)));
    expect(combined.diagnostics.map(formatDiagnostic).sort()).toEqual([
      "clusters/us-1/serving.yaml:1:1 spec.clusterProfileRef: KnativeServing knative-fleet/us-1-serving (clusters/us-1/serving.yaml:1) installs KnativeServing on ClusterProfile fleet-system/us-1, as does placement p (p.yaml:1); a cluster runs one KnativeServing, so none of them is applied (exclude the cluster from the placement, for example with a NotIn expression)",
      "p.yaml:1:1 spec.clusterProfileRef: placement p (p.yaml:1) installs KnativeServing on ClusterProfile fleet-system/us-1, as does KnativeServing knative-fleet/us-1-serving (clusters/us-1/serving.yaml:1); a cluster runs one KnativeServing, so none of them is applied (exclude the cluster from the placement, for example with a NotIn expression)",
    ]);
  });

  it("making one CR name for two clusters: both fail at metadata.name, and the cluster of neither is touched", () => {
    // The placement names its CR for us-1 `p-us-1`; the file makes a CR of that name for eu-2.
    const parsed = model({
      "p.yaml": listing("p", ["us-1"]),
      "clusters/eu-2/serving.yaml": servingFile("p-us-1", "eu-2"),
      "clusters/eu-2/other.yaml": servingFile("fine", "us-2"),
    });
    const combined = withPlacements(parsed, expandPlacements(parsed.placements, inventory(FLEET)));
    expect(combined.diagnostics.map(formatDiagnostic).sort()).toEqual([
      "clusters/eu-2/serving.yaml:1:1 metadata.name: KnativeServing knative-fleet/p-us-1 (clusters/eu-2/serving.yaml:1) and placement p (p.yaml:1) both make KnativeServing knative-fleet/p-us-1; none of them is applied",
      "p.yaml:1:1 metadata.name: placement p (p.yaml:1) and KnativeServing knative-fleet/p-us-1 (clusters/eu-2/serving.yaml:1) both make KnativeServing knative-fleet/p-us-1; none of them is applied",
    ]);
    expect(combined.resources.map((r) => r.resource.metadata.name)).toEqual(["fine"]);
    expect(combined.files.filter((f) => f.status === "failed").map((f) => f.path)).toEqual([
      "clusters/eu-2/serving.yaml",
      "p.yaml",
    ]);
  });
});

describe("the departures of one sync", () => {
  const liveCr = (name: string, placement: string, path: string): KubeObject => ({
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeServing",
    metadata: {
      name,
      namespace: NS,
      labels: { [PLACEMENT_LABEL]: placement, [PLACEMENT_KIND_LABEL]: "knativeservingplacement" },
      annotations: {
        [SOURCE_REPOSITORY_ANNOTATION]: TEST_REPOSITORY,
        [SOURCE_PATH_ANNOTATION]: path,
        [SOURCE_CLUSTER_ANNOTATION]: `${PROFILES}/${name}`,
      },
    },
  });
  const selector = (name: string) =>
    placementFile(name, "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }");

  it("keep every CR of a placement the hub cannot expand yet, and start the clock only for one it can", () => {
    const parsed = model({ "a.yaml": selector("a"), "b.yaml": listing("b", ["us-1"]) });
    // The ClusterProfiles are not known: `a` (a selector) is pending, `b` (a list) expands.
    const sync = expandForSync(parsed, inventory(undefined), {});
    const result = sync.departures({
      live: [liveCr("a-gone", "a", "a.yaml"), liveCr("b-gone", "b", "b.yaml")],
      repository: TEST_REPOSITORY,
      now: 1_000,
      gracePeriodMs: 60_000,
      previous: new Map(),
    });
    expect(result.held.map((cr) => cr.name).sort()).toEqual(["a-gone", "b-gone"]);
    expect(result.departures.map((d) => [d.name, d.pruneAt])).toEqual([["b-gone", 61_000]]);
    expect([...result.since.keys()]).toEqual([`KnativeServing ${NS}/b-gone`]);
  });
});
