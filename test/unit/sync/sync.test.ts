import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { ApplyStep } from "../../../src/mirror/decide.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import type { SyncRollout } from "../../../src/sync/sync.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { syncInto } from "../../support/sync.ts";
import { crFile } from "../mirror/support.ts";

const NS = "fleet";

/** A gate that lets everything through and adds a revert of `name` to `spec` (as halt-and-revert does). */
function revertingTo(name: string, object: (planned: KubeObject) => KubeObject): SyncRollout {
  return {
    open: async () => undefined,
    gate: async (_opened, steps) => ({
      steps: steps.map(
        (step): ApplyStep =>
          step.name === name && step.action === "create"
            ? { ...step, action: "update", reason: "reverted", object: object(step.object) }
            : step,
      ),
      revertEvents: [],
    }),
    orderPrunes: (_opened, candidates) => [...candidates],
    finish: async () => undefined,
  };
}

describe("sync: what the rollout gate writes is admitted too", () => {
  it("a revert carrying abandon-cleanup or a metadata-service URL is refused, not written", async () => {
    const files = [crFile("alpha", { namespace: NS }), crFile("beta", { namespace: NS })];
    const withAnnotation = (o: KubeObject): KubeObject => ({
      ...o,
      metadata: {
        ...o.metadata,
        annotations: { ...o.metadata.annotations, "fleet.knative.dev/abandon-cleanup": "true" },
      },
    });
    const withUrl = (o: KubeObject): KubeObject => ({
      ...o,
      spec: { ...(o.spec as object), additionalManifests: [{ URL: "http://169.254.169.254/latest/" }] },
    });
    for (const [name, forged, field] of [
      ["alpha", withAnnotation, "metadata.annotations.fleet.knative.dev/abandon-cleanup"],
      ["beta", withUrl, "spec.additionalManifests[0].URL"],
    ] as const) {
      const hub = new FakeKube().serveKindsOf(
        KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
      );
      const result = await syncInto(hub.client, {
        files,
        namespace: NS,
        commit: "1".repeat(40),
        rollout: revertingTo(name, forged),
      });
      const outcome = result.resources.find((r) => r.name === name)!;
      expect(outcome).toMatchObject({
        action: "refused",
        error: expect.stringContaining(`clusters/${name}.yaml: ${field}:`),
      });
      expect(
        hub.find("KnativeServing", name)?.metadata.annotations?.["fleet.knative.dev/abandon-cleanup"],
      ).toBeUndefined();
      expect(
        (hub.find("KnativeServing", name)?.spec as { additionalManifests?: unknown } | undefined)
          ?.additionalManifests,
      ).toBeUndefined();
    }
  });
});

describe("sync: upgrade chains", () => {
  const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
  /** The releases as they are, but their versions cannot be listed (a source that fails). */
  class UnlistedReleases extends ReleaseLoader {
    override availableVersions(): Promise<readonly string[]> {
      return Promise.reject(new Error("the release source cannot be listed"));
    }
  }
  const serving = (version: string) => [crFile("alpha", { namespace: NS, version })];
  const servingHub = () =>
    new FakeKube().serveKindsOf(
      KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
    );
  const versionOf = (kube: FakeKube) =>
    (kube.find("KnativeServing", "alpha")!.spec as { version?: string }).version;

  it("a file two minors ahead of its hub CR is given its chain's next step, and the sync says so", async () => {
    const kube = servingHub();
    const first = await syncInto(kube.client, {
      files: serving("1.21"),
      namespace: NS,
      commit: "a",
      releases,
    });
    expect(first.upgrades).toBeUndefined();
    const chained = await syncInto(kube.client, {
      files: serving("1.23"),
      namespace: NS,
      commit: "b",
      releases,
    });
    expect(versionOf(kube)).toBe("1.22");
    expect(chained.upgrades).toEqual([
      expect.objectContaining({
        key: `KnativeServing ${NS}/alpha`,
        from: "1.21",
        step: "1.22",
        target: "1.23",
      }),
    ]);
  });

  it("no chain where the releases cannot be listed: the file's version stays as it is (and is refused where it is)", async () => {
    const kube = servingHub();
    const unlisted = new UnlistedReleases(createKodataSource({ dir: knativeReleasesDir() }));
    await syncInto(kube.client, { files: serving("1.21"), namespace: NS, commit: "a", releases: unlisted });
    const result = await syncInto(kube.client, {
      files: serving("1.23"),
      namespace: NS,
      commit: "b",
      releases: unlisted,
    });
    expect(versionOf(kube)).toBe("1.23");
    expect(result.upgrades).toBeUndefined();
  });
});

describe("sync: hub writes", () => {
  /** A sync of 20 new CRs whose hub takes `delayOf(name)` ms per write; returns the outcomes and the peak. */
  async function syncTwenty(delayOf: (name: string) => number) {
    const files = Array.from({ length: 20 }, (_, i) =>
      crFile(`cr-${String(i).padStart(2, "0")}`, { namespace: NS }),
    );
    const hub = new FakeKube().serveKindsOf(
      KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
    );
    const apply = hub.client.apply.bind(hub.client);
    let running = 0;
    let peak = 0;
    hub.client.apply = async (object, options) => {
      peak = Math.max(peak, ++running);
      await new Promise((resolve) => setTimeout(resolve, delayOf(object.metadata.name ?? "")));
      running--;
      return apply(object, options);
    };
    const result = await syncInto(hub.client, { files, namespace: NS, commit: "1".repeat(40) });
    return { result, peak, hub };
  }

  it("a placement's many CRs are written several at once (at most 8), every one, the outcomes in the steps' order whatever order the writes end in", async () => {
    const slowFirst = await syncTwenty((name) => 40 - Number(name.slice(3)) * 2);
    const instant = await syncTwenty(() => 0);
    expect(slowFirst.peak).toBe(8);
    expect(slowFirst.result.resources.map((r) => [r.name, r.action])).toEqual(
      instant.result.resources.map((r) => [r.name, r.action]),
    );
    expect(slowFirst.result.resources.filter((r) => r.action === "create")).toHaveLength(20);
    expect(
      slowFirst.hub.objects().filter((o) => o.kind === "KnativeServing" && o.metadata.name !== "x"),
    ).toHaveLength(20);
  });
});
