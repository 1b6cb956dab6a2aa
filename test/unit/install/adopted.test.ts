import { describe, expect, it } from "vitest";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { LAST_APPLIED_ANNOTATION } from "../../../src/api/labels.ts";
import { applyInstall } from "../../../src/install/apply.ts";
import { renderInstall } from "../../../src/install/desired.ts";
import { anchorName, ownerOf } from "../../../src/install/identity.ts";
import { locateInstall } from "../../../src/install/layout.ts";
import { removeInstall } from "../../../src/install/removal.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// An install found in the older upstream layout (the hub CR's namespace) goes through install/ where it is:
// applied over there, its namespace labelled as upstream labels it, removed there.

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const resource: KnativeResource = KnativeResourceSchema.parse(
  crObject({ name: "serving", namespace: "team-a", cluster: "spoke-1" }),
);

async function installedIn(namespace: string) {
  const release = await releases.load(resource);
  const fake = new FakeKube().serveKindsOf(release.manifests);
  const rendered = renderInstall(resource, release, namespace);
  await applyInstall(fake.client, resource, rendered, { mode: "apply", concurrency: 4, namespace });
  return { fake, release };
}

describe("an install adopted in the older upstream layout", () => {
  it("is located, applied over where it is with nothing in the canonical namespace, and a second pass writes nothing", async () => {
    const { fake, release } = await installedIn("team-a");
    const location = await locateInstall(fake.client, resource);
    expect(location).toEqual({ namespace: "team-a", adopted: true });

    const rendered = renderInstall(resource, release, location.namespace);
    fake.resetCounts();
    const again = await applyInstall(fake.client, resource, rendered, {
      mode: "apply",
      concurrency: 4,
      namespace: location.namespace,
    });
    expect(again.writes).toBe(0);
    expect(fake.requests().writes).toBe(0);
    expect(fake.objects().filter((o) => o.metadata.namespace === "knative-serving")).toEqual([]);
    const anchor = fake.find("ConfigMap", anchorName(ownerOf(resource)));
    expect(anchor?.metadata.namespace).toBe("team-a");
    // Every applied object carries what it was applied as, for a client-side applier taking over.
    const config = fake.find("ConfigMap", "config-network");
    expect(JSON.parse(config?.metadata.annotations?.[LAST_APPLIED_ANNOTATION] ?? "{}")).toMatchObject({
      metadata: { name: "config-network", namespace: "team-a" },
    });
  });

  it("an existing namespace gets the release's Namespace labels only, not managed-by; once set, no write", async () => {
    const release = await releases.load(resource);
    const fake = new FakeKube().serveKindsOf(release.manifests);
    await fake.client.apply({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "knative-serving" },
    });
    const rendered = renderInstall(resource, release);
    const first = await applyInstall(fake.client, resource, rendered, { mode: "apply", concurrency: 4 });
    expect(first.writes).toBeGreaterThan(0);
    const labels = fake.find("Namespace", "knative-serving")?.metadata.labels;
    expect(labels).toMatchObject({ "app.kubernetes.io/name": "knative-serving" });
    expect(labels?.["app.kubernetes.io/managed-by"]).toBeUndefined();
    const second = await applyInstall(fake.client, resource, rendered, { mode: "apply", concurrency: 4 });
    expect(second.writes).toBe(0);
  });

  it("is removed where it is", async () => {
    const { fake } = await installedIn("team-a");
    const { namespace } = await locateInstall(fake.client, resource);
    const { deleted } = await removeInstall(fake.client, resource, async () => [], namespace);
    expect(deleted.some((ref) => ref.kind === "ConfigMap" && ref.namespace === "team-a")).toBe(true);
    expect(fake.find("ConfigMap", anchorName(ownerOf(resource)))).toBeUndefined();
  });
});
