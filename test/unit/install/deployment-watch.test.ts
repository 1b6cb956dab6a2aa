import { describe, expect, it } from "vitest";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { DeploymentWatches } from "../../../src/install/deployment-watch.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { crObject } from "../../support/fleet-files.ts";
import { HandCache } from "../../support/hand-cache.ts";

// The rollout watches' bookkeeping over list-then-watch caches driven by hand: which watches run, when a
// CR is woken, and what a failed watch leads to. The caches' own list/watch is kube/informer.ts's (tested
// there and, with DeploymentWatches, on the sandbox in test/integration/engine/deployment-watch.test.ts).

const deployment = (namespace: string, name: string, available = false): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace, generation: 1 },
  spec: { replicas: 1 },
  status: available
    ? {
        observedGeneration: 1,
        updatedReplicas: 1,
        availableReplicas: 1,
        conditions: [{ type: "Available", status: "True" }],
      }
    : { observedGeneration: 1, conditions: [{ type: "Available", status: "False" }] },
});

const cr = (kind: "KnativeServing" | "KnativeEventing", name: string): KnativeResource =>
  KnativeResourceSchema.parse(crObject({ kind, name, cluster: "spoke-1", version: "1.22" }));

const SERVING = cr("KnativeServing", "serving");
const SERVING_DESIRED = [
  deployment("knative-serving", "controller"),
  deployment("knative-serving", "webhook"),
  deployment("kourier-system", "3scale-kourier-gateway"),
  { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "config-network", namespace: "knative-serving" } },
];
const CLIENT = {} as KubeClient; // never used: the caches are opened by hand

function setUp(now = { ms: 0 }) {
  const caches: HandCache<string>[] = [];
  const woken: string[] = [];
  const watches = new DeploymentWatches({
    wake: (r) => woken.push(`${r.kind}/${r.metadata.name}`),
    fallbackMs: 60_000,
    now: () => now.ms,
    open: (_client, namespace, onError) => {
      const cache = new HandCache(namespace, onError);
      caches.push(cache);
      return cache;
    },
  });
  const cache = (namespace: string) => caches.filter((c) => c.opened === namespace && !c.stopped);
  return { watches, caches, cache, woken, now };
}

describe("DeploymentWatches", () => {
  it("watches each namespace the install has Deployments in, once, and starts the watch", () => {
    const { watches, caches } = setUp();
    expect(watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED)).toBe(true);
    expect(caches.map((c) => c.opened)).toEqual(["knative-serving", "kourier-system"]);
    expect(caches.every((c) => c.started)).toBe(true);
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED); // the next pass while still rolling out
    expect(caches).toHaveLength(2);
    expect(watches.watchCount).toBe(2);
  });

  it("reads nothing from a watch before its first list arrived", async () => {
    const { watches, cache } = setUp();
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    expect(watches.cached("spoke-1", SERVING, SERVING_DESIRED)).toBeUndefined();
    await cache("knative-serving")[0]!.sync(deployment("knative-serving", "controller"));
    expect(watches.cached("spoke-1", SERVING, SERVING_DESIRED)).toBeUndefined(); // kourier-system not yet
    await cache("kourier-system")[0]!.sync();
    expect(watches.cached("spoke-1", SERVING, SERVING_DESIRED)?.map((d) => d.metadata.name)).toEqual([
      "controller",
    ]);
  });

  it("wakes the CR once, when its last Deployment becomes Available, not before", async () => {
    const { watches, cache, woken } = setUp();
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    const serving = cache("knative-serving")[0]!;
    const kourier = cache("kourier-system")[0]!;
    await serving.sync(deployment("knative-serving", "controller"), deployment("knative-serving", "webhook"));
    await kourier.sync(deployment("kourier-system", "3scale-kourier-gateway", true));
    serving.put(deployment("knative-serving", "controller", true));
    expect(woken).toEqual([]);
    serving.put(deployment("knative-serving", "unrelated", true));
    expect(woken).toEqual([]);
    serving.put(deployment("knative-serving", "webhook", true));
    expect(woken).toEqual(["KnativeServing/serving"]);
    serving.put(deployment("knative-serving", "webhook", true)); // a later status update
    expect(woken).toEqual(["KnativeServing/serving"]);
  });

  it("wakes at once when the first list already shows every Deployment Available", async () => {
    const { watches, cache, woken } = setUp();
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    await cache("knative-serving")[0]!.sync(
      deployment("knative-serving", "controller", true),
      deployment("knative-serving", "webhook", true),
    );
    expect(woken).toEqual([]);
    await cache("kourier-system")[0]!.sync(deployment("kourier-system", "3scale-kourier-gateway", true));
    expect(woken).toEqual(["KnativeServing/serving"]);
  });

  it("shares a namespace's watch between CRs and stops it when the last one is released", () => {
    const { watches, caches, cache } = setUp();
    const other = cr("KnativeServing", "other");
    const otherDesired = [deployment("knative-serving", "activator")];
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    watches.await("spoke-1", CLIENT, other, otherDesired);
    expect(cache("knative-serving")).toHaveLength(1);
    watches.release(SERVING);
    expect(cache("kourier-system")).toHaveLength(0); // only SERVING waited there
    expect(cache("knative-serving")).toHaveLength(1);
    watches.release(other);
    expect(caches.every((c) => c.stopped)).toBe(true);
    expect(watches.watchCount).toBe(0);
  });

  it("releasing a cluster (handed to another shard) stops its watches and keeps the others'", () => {
    const { watches, cache, caches } = setUp();
    const other = cr("KnativeServing", "other");
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    watches.await("spoke-2", CLIENT, other, [deployment("knative-serving", "activator")]);
    expect(watches.watchCount).toBe(3);
    watches.releaseClusters((cluster) => cluster === "spoke-1");
    expect(watches.watchCount).toBe(1);
    expect(cache("knative-serving")).toHaveLength(1);
    expect(caches.filter((c) => c.stopped).map((c) => c.opened)).toEqual([
      "knative-serving",
      "kourier-system",
    ]);
  });

  it("a watch on another cluster is another watch; a CR that moved leaves the old cluster's", () => {
    const { watches, caches } = setUp();
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    watches.await("spoke-2", CLIENT, SERVING, SERVING_DESIRED);
    expect(caches.filter((c) => !c.stopped)).toHaveLength(2);
    expect(caches.slice(0, 2).every((c) => c.stopped)).toBe(true);
  });

  it("a failed watch is stopped, wakes its CRs, and its namespace is polled until the fallback ends", async () => {
    const { watches, cache, woken, now } = setUp();
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    const failing = cache("kourier-system")[0]!;
    failing.onError(new Error("GET watch: 403 Forbidden"));
    expect(failing.stopped).toBe(true);
    expect(woken).toEqual(["KnativeServing/serving"]);
    expect(watches.watchCount).toBe(0); // its other namespace's watch has nobody left either
    expect(watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED)).toBe(false);
    expect(watches.watchCount).toBe(0);
    now.ms = 60_001;
    expect(watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED)).toBe(true);
    expect(watches.watchCount).toBe(2);
  });

  it("stop ends every watch", () => {
    const { watches, caches } = setUp();
    watches.await("spoke-1", CLIENT, SERVING, SERVING_DESIRED);
    watches.stop();
    expect(caches.every((c) => c.stopped)).toBe(true);
    expect(watches.watchCount).toBe(0);
  });
});
