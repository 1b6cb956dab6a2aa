import { describe, expect, it } from "vitest";
import { deleteClusterScoped } from "../../../src/apply/engine.ts";
import { type KubeObject, type ObjectRef, refOf } from "../../../src/kube/object.ts";
import { FakeKube } from "../../support/fake-kube.ts";

const RBAC = "rbac.authorization.k8s.io/v1";
const AGGREGATE = { "duck.knative.dev/addressable": "true" };
const aggregated: KubeObject = {
  apiVersion: RBAC,
  kind: "ClusterRole",
  metadata: { name: "addressable-resolver" },
  aggregationRule: { clusterRoleSelectors: [{ matchLabels: AGGREGATE }] },
};
const roles: KubeObject[] = [
  aggregated,
  { apiVersion: RBAC, kind: "ClusterRole", metadata: { name: "serving-addressable", labels: AGGREGATE } },
  { apiVersion: RBAC, kind: "ClusterRole", metadata: { name: "knative-serving-admin" } },
  { apiVersion: RBAC, kind: "ClusterRoleBinding", metadata: { name: "knative-serving-controller-admin" } },
];

/** A fake spoke holding the roles, with every delete recorded in order. */
async function spoke(): Promise<{ fake: FakeKube; deletes: string[] }> {
  const fake = new FakeKube().serveKindsOf(roles);
  for (const role of roles) await fake.client.apply(role);
  const deletes: string[] = [];
  const deleteByName = fake.client.delete.bind(fake.client);
  fake.client.delete = (apiVersion, kind, namespace, name, propagation) => {
    deletes.push(name);
    return deleteByName(apiVersion, kind, namespace, name, propagation);
  };
  return { fake, deletes };
}

describe("deleteClusterScoped: aggregated ClusterRoles and the aggregation controller", () => {
  it("deletes the aggregated roles before the roles they aggregate, and checks them once more without waiting", async () => {
    const { fake, deletes } = await spoke();
    const deleted = await deleteClusterScoped(fake.client, roles.map(refOf));
    // First, so the controller's cache no longer holds it when the other deletes queue their syncs.
    expect(deletes[0]).toBe("addressable-resolver");
    // Then the rest, and one more delete of the aggregated role (answered 404: nothing came back).
    expect(deletes.slice(1, -1).sort()).toEqual([
      "knative-serving-admin",
      "knative-serving-controller-admin",
      "serving-addressable",
    ]);
    expect(deletes.at(-1)).toBe("addressable-resolver");
    expect(deletes).toHaveLength(5);
    expect(deleted.map((ref: ObjectRef) => ref.name).sort()).toEqual(
      roles.map((r) => r.metadata.name).sort(),
    );
    expect(fake.objects()).toEqual([]);
  });

  it("a role the controller re-creates meanwhile (a sync queued before the delete) is deleted again", async () => {
    const { fake, deletes } = await spoke();
    // The controller's stale cache still holds the role when the role it aggregates goes, and once more
    // when it is deleted again: its apply of the rules creates it anew each time.
    const recreatedOn = ["serving-addressable", "addressable-resolver#2"];
    const seen = new Map<string, number>();
    const deleteByName = fake.client.delete;
    fake.client.delete = async (apiVersion, kind, namespace, name, propagation) => {
      const existed = await deleteByName(apiVersion, kind, namespace, name, propagation);
      const count = (seen.get(name) ?? 0) + 1;
      seen.set(name, count);
      if (recreatedOn.includes(name) || recreatedOn.includes(`${name}#${count}`))
        await fake.client.apply(aggregated);
      return existed;
    };
    await deleteClusterScoped(fake.client, roles.map(refOf));
    expect(fake.objects()).toEqual([]);
    // Deleted first, then after the rest (found again), a second later (found again), and once more.
    expect(deletes.filter((name) => name === "addressable-resolver")).toHaveLength(4);
  });

  it("a spoke without the aggregated role's kind served does not stop the rest", async () => {
    const { fake } = await spoke();
    const gone: ObjectRef = { apiVersion: "example.dev/v1", kind: "Gone", namespace: "", name: "x" };
    await deleteClusterScoped(fake.client, [gone, ...roles.map(refOf)]);
    expect(fake.objects()).toEqual([]);
  });
});
