import { describe, expect, it } from "vitest";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { applyInstall } from "../../../src/install/apply.ts";
import { renderInstall } from "../../../src/install/desired.ts";
import { anchorName, ownerOf } from "../../../src/install/identity.ts";
import { removalOf, removedBy, removeInstall, sharingCr } from "../../../src/install/removal.ts";
import { describeRef, isCrd, type ObjectRef, refKey, refOf } from "../../../src/kube/object.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { type CrOptions, crObject } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const cr = (options: Partial<CrOptions> = {}): KnativeResource =>
  KnativeResourceSchema.parse(crObject({ name: "serving", cluster: "spoke-1", ...options }));
const ref = (kind: string, name: string, namespace = "", apiVersion = "v1"): ObjectRef => ({
  apiVersion,
  kind,
  namespace,
  name,
});
const names = (refs: readonly ObjectRef[]) => refs.map(describeRef).sort();

describe("removalOf: FinalizeRemoteCluster's rule", () => {
  const inventory = [
    ref("ConfigMap", "config-network", "knative-serving"),
    ref("ClusterRole", "knative-serving-admin", "", "rbac.authorization.k8s.io/v1"),
    ref("CustomResourceDefinition", "services.serving.knative.dev", "", "apiextensions.k8s.io/v1"),
    ref("Service", "kourier", "kourier-system"),
  ];

  it("deletes cluster-scoped objects and the anchor by name, lets GC take the namespace's objects, keeps CRDs and other namespaces", () => {
    const removal = removalOf(cr(), inventory);
    expect(names(removal.deletedByName)).toEqual([
      "ClusterRole.rbac.authorization.k8s.io knative-serving-admin",
      "ConfigMap knative-serving/knativeserving-serving-root-owner",
    ]);
    expect(names(removal.collected)).toEqual(["ConfigMap knative-serving/config-network"]);
    expect(names(removal.kept)).toEqual([
      "CustomResourceDefinition.apiextensions.k8s.io services.serving.knative.dev",
      "Namespace knative-serving",
      "Service kourier-system/kourier",
    ]);
    expect(removedBy(removal)).toHaveLength(3);
  });

  it("a hub install works in the CR's own namespace", () => {
    const removal = removalOf(cr({ cluster: null, namespace: "team-a" }), [ref("ConfigMap", "x", "team-a")]);
    expect(names(removal.collected)).toEqual(["ConfigMap team-a/x"]);
    expect(names(removal.kept)).toEqual(["Namespace team-a"]);
  });
});

describe("sharingCr: two CRs of a kind on one cluster", () => {
  it("finds another live CR of the same kind on the same cluster only", () => {
    const self = cr();
    const twin = cr({ name: "other" });
    const deleting = KnativeResourceSchema.parse({
      ...crObject({ name: "going", cluster: "spoke-1" }),
      metadata: { name: "going", namespace: "knative-fleet", deletionTimestamp: "2026-01-01T00:00:00Z" },
    });
    expect(sharingCr(self, [self, twin])?.metadata.name).toBe("other");
    expect(sharingCr(self, [self, deleting])).toBeUndefined();
    expect(sharingCr(self, [cr({ name: "e", kind: "KnativeEventing" })])).toBeUndefined();
    expect(sharingCr(self, [cr({ name: "elsewhere", cluster: "spoke-2" })])).toBeUndefined();
    expect(sharingCr(cr({ cluster: null }), [cr({ name: "hub-too", cluster: null })])?.metadata.name).toBe(
      "hub-too",
    );
  });
});

describe("removeInstall executes removalOf", () => {
  it("after an install, the cluster keeps exactly what removalOf keeps", async () => {
    const resource = cr();
    const release = await releases.load(resource);
    const rendered = renderInstall(resource, release);
    const fake = new FakeKube().serveKindsOf(release.manifests);
    const applied = await applyInstall(fake.client, resource, rendered, { mode: "apply", concurrency: 4 });
    const planned = removalOf(resource, applied.desired.map(refOf));

    const unasked = async (): Promise<ObjectRef[]> => {
      throw new Error("the fallback renders the release: asked only when the anchor is gone");
    };
    const { deleted } = await removeInstall(fake.client, resource, unasked);
    expect(names(deleted)).toEqual(names(planned.deletedByName));
    const left = new Set(fake.objects().map((o) => refKey(refOf(o))));
    for (const gone of removedBy(planned)) expect(left.has(refKey(gone)), describeRef(gone)).toBe(false);
    // What stays is what removalOf keeps: CRDs, the install namespace, objects in other namespaces.
    const kept = new Set(planned.kept.map(refKey));
    expect(
      fake
        .objects()
        .filter((o) => !kept.has(refKey(refOf(o))))
        .map((o) => describeRef(refOf(o))),
    ).toEqual([]);
    expect(fake.objects().some(isCrd)).toBe(true);
  });

  it("stops the workloads by name before the anchor goes, not waiting for the garbage collector", async () => {
    const resource = cr();
    const release = await releases.load(resource);
    const fake = new FakeKube().serveKindsOf(release.manifests);
    const applied = await applyInstall(fake.client, resource, renderInstall(resource, release), {
      mode: "apply",
      concurrency: 4,
    });
    const deployments = applied.desired.filter((o) => o.kind === "Deployment").map(refOf);
    expect(deployments.length).toBeGreaterThan(3);
    const deletes: string[] = [];
    const deleteByName = fake.client.delete.bind(fake.client);
    fake.client.delete = (apiVersion, kind, namespace, name, propagation) => {
      deletes.push(`${kind} ${namespace ?? ""}/${name}`);
      return deleteByName(apiVersion, kind, namespace, name, propagation);
    };
    await removeInstall(fake.client, resource, async () => []);
    // The anchor last: a removal cut short before it finds the inventory again.
    expect(deletes.at(-1)).toBe(`ConfigMap knative-serving/${anchorName(ownerOf(resource))}`);
    for (const d of deployments) expect(deletes, d.name).toContain(`Deployment ${d.namespace}/${d.name}`);
  });

  it("a spoke refusing the deletes fails the removal with its answer and keeps the anchor (the retry finds its inventory)", async () => {
    const resource = cr();
    const release = await releases.load(resource);
    const fake = new FakeKube().serveKindsOf(release.manifests);
    await applyInstall(fake.client, resource, renderInstall(resource, release), {
      mode: "apply",
      concurrency: 4,
    });
    // Both steps fail at once, as a spoke whose RBAC was taken away refuses them.
    fake.forbid("deployments");
    fake.forbid("clusterrolebindings");
    await expect(removeInstall(fake.client, resource, async () => [])).rejects.toThrow(/is forbidden/);
    expect(fake.find("ConfigMap", anchorName(ownerOf(resource)))).toBeDefined();
  });

  it("without an anchor, works from the fallback (the release rendered in full)", async () => {
    const resource = cr();
    const fake = new FakeKube().serveKindsOf([
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "r" } },
    ]);
    await fake.client.apply({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "r" },
    });
    const { deleted } = await removeInstall(fake.client, resource, async () => [
      ref("ClusterRole", "r", "", "rbac.authorization.k8s.io/v1"),
    ]);
    expect(names(deleted)).toEqual(["ClusterRole.rbac.authorization.k8s.io r"]);
    expect(fake.objects()).toEqual([]);
  });
});
