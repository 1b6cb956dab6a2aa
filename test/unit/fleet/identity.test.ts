import { describe, expect, it } from "vitest";
import {
  clusterKey,
  clusterLabel,
  clusterRefOf,
  formatIdentity,
  identityOf,
  type ResourceIdentity,
  targetOf,
} from "../../../src/fleet/identity.ts";
import type { KubeObject } from "../../../src/kube/object.ts";

// The one home of a hub CR's identity and of its cluster (src/fleet/identity.ts). Two slips it closes: a
// second spelling of a CR parsed back into its parts (the work queue's `Kind/ns/name`), and a cluster
// reference without a namespace spelt `/name` by one reader and "hub" by another.

const cr = (spec: unknown, kind = "KnativeServing"): KubeObject => ({
  apiVersion: "operator.knative.dev/v1beta1",
  kind,
  metadata: { namespace: "knative-fleet", name: "spoke-1-serving" },
  spec,
});

describe("a hub CR's identity", () => {
  it("is read off the CR and spelt `Kind namespace/name`", () => {
    const identity = identityOf(cr({}));
    expect(identity).toEqual({ kind: "KnativeServing", namespace: "knative-fleet", name: "spoke-1-serving" });
    expect(formatIdentity(identity)).toBe("KnativeServing knative-fleet/spoke-1-serving");
  });

  it("keys a map that gives the parts back: nothing parses the spelling", () => {
    const crs = [cr({}), cr({}, "KnativeEventing"), { ...cr({}), metadata: { namespace: "a", name: "b" } }];
    const parts = new Map<string, ResourceIdentity>(
      crs.map((o) => [formatIdentity(identityOf(o)), identityOf(o)]),
    );
    expect(parts.size).toBe(3); // the same namespace/name of two kinds are two CRs
    for (const object of crs) {
      expect(parts.get(formatIdentity(identityOf(object)))).toEqual(identityOf(object));
    }
  });
});

describe("a cluster reference", () => {
  it("is a namespace and a name, both non-empty strings", () => {
    expect(clusterRefOf({ namespace: "clusters", name: "spoke-1" })).toEqual({
      namespace: "clusters",
      name: "spoke-1",
    });
  });

  it.each([
    ["no namespace", { name: "spoke-1" }],
    ["an empty namespace", { namespace: "", name: "spoke-1" }],
    ["a namespace that is no string", { namespace: 7, name: "spoke-1" }],
    ["no name", { namespace: "clusters" }],
    ["an empty name", { namespace: "clusters", name: "" }],
    ["a name that is no string", { namespace: "clusters", name: ["spoke-1"] }],
    ["null", null],
    ["a string", "clusters/spoke-1"],
    ["an array", ["clusters", "spoke-1"]],
  ])("with %s names no cluster", (_, value) => {
    expect(clusterRefOf(value)).toBeUndefined();
  });

  it("keeps only the namespace and name", () => {
    expect(clusterRefOf({ namespace: "clusters", name: "spoke-1", extra: true })).toEqual({
      namespace: "clusters",
      name: "spoke-1",
    });
  });

  it("without a namespace is in the one given for it (a PlacementDecision's own), never `/name`", () => {
    expect(clusterRefOf({ name: "spoke-1" }, "decisions")).toEqual({
      namespace: "decisions",
      name: "spoke-1",
    });
    expect(clusterRefOf({ namespace: "", name: "spoke-1" }, "decisions")).toEqual({
      namespace: "decisions",
      name: "spoke-1",
    });
    expect(clusterRefOf({ namespace: "clusters", name: "spoke-1" }, "decisions")).toEqual({
      namespace: "clusters",
      name: "spoke-1",
    });
    expect(clusterRefOf({ name: "" }, "decisions")).toBeUndefined();
    expect(clusterRefOf({ name: "spoke-1" }, "")).toBeUndefined();
  });
});

describe("a CR's target", () => {
  it("is its spec.clusterProfileRef, or none for the hub itself", () => {
    expect(targetOf(cr({ clusterProfileRef: { namespace: "clusters", name: "spoke-1" } }))).toEqual({
      namespace: "clusters",
      name: "spoke-1",
    });
    expect(targetOf(cr({}))).toBeUndefined();
    expect(targetOf(cr(undefined))).toBeUndefined();
    expect(targetOf(cr("not a spec"))).toBeUndefined();
    expect(targetOf(undefined)).toBeUndefined();
  });

  it("with a malformed reference counts with the hub in every reader: no `/name`, no `undefined/name`", () => {
    for (const ref of [
      { name: "spoke-1" },
      { namespace: "", name: "spoke-1" },
      { namespace: 1, name: "x" },
    ]) {
      const label = clusterLabel(targetOf(cr({ clusterProfileRef: ref })));
      expect(label).toBe("hub");
    }
  });
});

describe("a cluster's spelling", () => {
  it("is `namespace/name` as a key, and as a label with `hub` for no cluster", () => {
    const ref = { namespace: "clusters", name: "spoke-1" };
    expect(clusterKey(ref)).toBe("clusters/spoke-1");
    expect(clusterLabel(ref)).toBe("clusters/spoke-1");
    expect(clusterLabel(undefined)).toBe("hub");
  });

  it("labels a CR's cluster as its ClusterProfile's key: the shard key, queue group and metric label agree", () => {
    const object = cr({ clusterProfileRef: { namespace: "clusters", name: "spoke-1" } });
    expect(clusterLabel(targetOf(object))).toBe(clusterKey({ namespace: "clusters", name: "spoke-1" }));
  });
});
