import { describe, expect, it } from "vitest";
import { formatIdentity, type ResourceIdentity } from "../../../src/fleet/identity.ts";
import { ClusterIndex } from "../../../src/reconcile/cluster-index.ts";

const cr = (name: string, kind: ResourceIdentity["kind"] = "KnativeServing"): [string, ResourceIdentity] => {
  const identity = { kind, namespace: "knative-fleet", name };
  return [formatIdentity(identity), identity];
};

describe("the hub CRs by the cluster they target", () => {
  it("finds a cluster's CRs, of either kind, and only those", () => {
    const index = new ClusterIndex();
    index.note(...cr("eu-1-serving"), "fleet-system/eu-1");
    index.note(...cr("eu-1-eventing", "KnativeEventing"), "fleet-system/eu-1");
    index.note(...cr("us-1-serving"), "fleet-system/us-1");
    expect(index.crsOf("fleet-system/eu-1")).toEqual([
      cr("eu-1-serving")[1],
      cr("eu-1-eventing", "KnativeEventing")[1],
    ]);
    expect(index.crsOf("fleet-system/us-1")).toEqual([cr("us-1-serving")[1]]);
    expect(index.crsOf("fleet-system/ap-1")).toEqual([]);
    expect(index.clusters()).toEqual(new Set(["fleet-system/eu-1", "fleet-system/us-1"]));
    expect(index.clusterOf(cr("us-1-serving")[0])).toBe("fleet-system/us-1");
  });

  it("moves a CR whose clusterProfileRef changed, and forgets a cluster no CR targets any more", () => {
    const index = new ClusterIndex();
    const [key, identity] = cr("moving");
    index.note(key, identity, "fleet-system/eu-1");
    index.note(key, identity, "fleet-system/us-1");
    expect(index.crsOf("fleet-system/eu-1")).toEqual([]);
    expect(index.crsOf("fleet-system/us-1")).toEqual([identity]);
    expect(index.clusters()).toEqual(new Set(["fleet-system/us-1"]));
    expect(index.clusterOf(key)).toBe("fleet-system/us-1");
  });

  it("forgets a CR gone from the hub, and its cluster with its last CR", () => {
    const index = new ClusterIndex();
    const [kept, keptIdentity] = cr("kept");
    const [gone, goneIdentity] = cr("gone");
    index.note(kept, keptIdentity, "fleet-system/eu-1");
    index.note(gone, goneIdentity, "fleet-system/eu-1");
    index.note(gone, goneIdentity, undefined);
    expect(index.crsOf("fleet-system/eu-1")).toEqual([keptIdentity]);
    expect(index.clusterOf(gone)).toBeUndefined();
    index.note(kept, keptIdentity, undefined);
    expect(index.clusters()).toEqual(new Set());
    expect(index.crsOf("fleet-system/eu-1")).toEqual([]);
  });

  it("a CR noted again at the same cluster is listed once", () => {
    const index = new ClusterIndex();
    const [key, identity] = cr("again");
    index.note(key, identity, "fleet-system/eu-1");
    index.note(key, identity, "fleet-system/eu-1");
    expect(index.crsOf("fleet-system/eu-1")).toEqual([identity]);
  });
});
