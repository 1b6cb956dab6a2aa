import { describe, expect, it } from "vitest";
import { withDesiredHash } from "../../../src/apply/compare.ts";
import {
  type ApplyPlan,
  type ApplyState,
  diffAgainstLive,
  stampForApply,
} from "../../../src/apply/engine.ts";
import { decodeInventory } from "../../../src/apply/inventory.ts";
import { anchorName, buildAnchor, ownershipLabels } from "../../../src/install/identity.ts";
import { type KubeObject, objectKey, refOf } from "../../../src/kube/object.ts";

const cm = (name: string, data: Record<string, string>, namespace = "knative-serving"): KubeObject =>
  withDesiredHash({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace }, data });
const crd = (name: string): KubeObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name },
});
const clusterRole = (name: string): KubeObject => ({
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "ClusterRole",
  metadata: { name },
});

const set = { namespace: "knative-serving", inventoryObject: () => cm("anchor", {}) };
const planApply = (
  desired: KubeObject[],
  objects: ApplyState["objects"],
  inventory: ApplyState["inventory"],
): ApplyPlan =>
  diffAgainstLive(set, desired, { objects, inventory, inventoryExists: true, namespaceExists: true });
const planIsEmpty = (plan: ApplyPlan): boolean =>
  plan.setup.length === 0 && plan.create.length === 0 && plan.update.length === 0 && plan.prune.length === 0;

describe("apply plan", () => {
  it("drift: an edit by hand is put back; a key added by hand to a watched ConfigMap is reported, not applied", () => {
    const edited = cm("config-a", { x: "1" });
    const added = cm("config-b", { y: "2" });
    const live = new Map([
      [objectKey(edited), { ...structuredClone(edited), data: { x: "by hand" } }],
      [objectKey(added), { ...structuredClone(added), data: { y: "2", z: "by hand" } }],
    ]);
    const watching = { ...set, watchAddedKeys: (o: KubeObject) => o.metadata.name === "config-b" };
    const plan = diffAgainstLive(watching, [edited, added], {
      objects: live,
      inventory: [refOf(edited), refOf(added)],
      inventoryExists: true,
      namespaceExists: true,
    });
    expect(plan.update.map((u) => objectKey(u.desired))).toEqual([objectKey(edited)]);
    expect(plan.unchanged.map(objectKey)).toEqual([objectKey(added)]);
    expect(plan.drift.map((d) => [d.ref.name, d.putBack, d.fields.map((f) => f.path)])).toEqual([
      ["config-a", true, ["data.x"]],
      ["config-b", false, ["data.z"]],
    ]);
    // Unwatched, the added key is none of the install's business.
    expect(planApply([edited, added], live, []).drift.map((d) => d.ref.name)).toEqual(["config-a"]);
  });

  it("creates what is missing, updates what differs, leaves the rest alone", () => {
    const a = cm("config-a", { x: "1" });
    const b = cm("config-b", { y: "2" });
    const c = cm("config-c", { z: "3" });
    const live = new Map([
      [objectKey(b), structuredClone(b)],
      [objectKey(c), { ...structuredClone(c), data: { z: "edited by hand" } }],
    ]);
    const plan = planApply([a, b, c], live, []);
    expect(plan.create.map(objectKey)).toEqual([objectKey(a)]);
    expect(plan.unchanged.map(objectKey)).toEqual([objectKey(b)]);
    expect(plan.update.map((u) => objectKey(u.desired))).toEqual([objectKey(c)]);
    expect(planIsEmpty(plan)).toBe(false);
  });

  it("a converged cluster gives an empty plan", () => {
    const a = cm("config-a", { x: "1" });
    expect(planIsEmpty(planApply([a], new Map([[objectKey(a), structuredClone(a)]]), [refOf(a)]))).toBe(true);
  });

  it("prunes what the previous inventory had and desired lost, but never a CRD", () => {
    const kept = cm("config-a", { x: "1" });
    const gone = cm("config-old", {});
    const plan = planApply([kept], new Map(), [
      refOf(kept),
      refOf(gone),
      refOf(crd("old.serving.knative.dev")),
      refOf(clusterRole("old-role")),
    ]);
    expect(plan.prune.map((r) => r.name).sort()).toEqual(["config-old", "old-role"]);
  });
});

describe("anchor and ownership", () => {
  const owner = { kind: "KnativeServing", name: "spoke-1-serving" };

  it("names the anchor as the upstream operator does and records the inventory", () => {
    expect(anchorName(owner)).toBe("knativeserving-spoke-1-serving-root-owner");
    const refs = [refOf(cm("b", {})), refOf(clusterRole("r")), refOf(cm("a", {}))];
    const anchor = buildAnchor(owner, "knative-serving", refs);
    expect(anchor.metadata.annotations?.["operator.knative.dev/protected"]).toBe("true");
    expect(anchor.metadata.annotations?.["operator.knative.dev/anchor"]).toBe("true");
    expect(anchor.metadata.labels?.["operator.knative.dev/cr-name"]).toBe("spoke-1-serving");
    expect(decodeInventory(anchor).map((r) => r.name)).toEqual(["a", "b", "r"]);
  });

  it("owns namespace-scoped objects in the install namespace only", () => {
    const ref = { apiVersion: "v1", kind: "ConfigMap", name: anchorName(owner), uid: "u-1" };
    const [inNs, otherNs, cluster] = stampForApply(
      { namespace: "knative-serving", labels: ownershipLabels(owner) },
      [cm("a", {}), cm("b", {}, "kourier-system"), clusterRole("r")],
      ref,
    );
    expect(inNs!.metadata.ownerReferences).toEqual([{ ...ref, controller: true, blockOwnerDeletion: true }]);
    expect(otherNs!.metadata.ownerReferences).toBeUndefined();
    expect(cluster!.metadata.ownerReferences).toBeUndefined();
    for (const o of [inNs!, otherNs!, cluster!])
      expect(o.metadata.labels).toMatchObject(ownershipLabels(owner));
  });
});
