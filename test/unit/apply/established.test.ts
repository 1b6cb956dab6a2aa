import { describe, expect, it } from "vitest";
import { runApplySet } from "../../../src/apply/engine.ts";
import {
  crdSelection,
  isCrdEstablished,
  notEstablished,
  type OpenCrdCache,
  waitEstablished,
  waitServed,
} from "../../../src/apply/established.ts";
import type { Selection } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { KubeApiError, type RestRequest } from "../../../src/kube/rest.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { HandCache } from "../../support/hand-cache.ts";

// The CRD Established wait over list-then-watch caches driven by hand: when it ends, what it selects, that
// its watch is stopped, and what a failed watch leads to (polling, here against the in-memory API server).
// The cache's own list/watch is kube/informer.ts's; the wait runs on the sandbox in every install test.

const LABELS = { "app.kubernetes.io/managed-by": "knative-fleet", "knative.dev/cr-name": "serving" };

const crd = (name: string, established?: boolean): KubeObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name, labels: LABELS },
  spec: { group: name.split(".").slice(1).join("."), names: { kind: "X" } },
  ...(established === undefined
    ? {}
    : {
        status: {
          conditions: [
            { type: "NamesAccepted", status: "True" },
            { type: "Established", status: established ? "True" : "False" },
          ],
        },
      }),
});

function handOpener(): { open: OpenCrdCache; caches: HandCache<Selection>[] } {
  const caches: HandCache<Selection>[] = [];
  return {
    caches,
    open: (_client, selection, onError) => {
      const cache = new HandCache(selection, onError);
      caches.push(cache);
      return cache;
    },
  };
}

/** Whether the promise has settled after the pending microtasks ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

const client = new FakeKube().client;

describe("isCrdEstablished / notEstablished", () => {
  it("needs an Established=True condition; a CRD without status, with False or missing is waited for", () => {
    expect(isCrdEstablished(crd("a.x.dev", true))).toBe(true);
    expect(isCrdEstablished(crd("a.x.dev", false))).toBe(false);
    expect(isCrdEstablished(crd("a.x.dev"))).toBe(false);
    expect(isCrdEstablished(undefined)).toBe(false);
    expect(isCrdEstablished({ ...crd("a.x.dev"), status: { conditions: "Established" } })).toBe(false);
    expect(
      notEstablished(["a.x.dev", "b.x.dev", "c.x.dev"], [crd("a.x.dev", true), crd("b.x.dev", false)]),
    ).toEqual(["b.x.dev", "c.x.dev"]);
  });
});

describe("crdSelection", () => {
  it("picks one CRD by name and by the set's labels", () => {
    expect(crdSelection(["images.caching.internal.knative.dev"], LABELS)).toEqual({
      labelSelector: "app.kubernetes.io/managed-by=knative-fleet,knative.dev/cr-name=serving",
      fieldSelector: "metadata.name=images.caching.internal.knative.dev",
    });
  });

  it("picks several by the labels only: a field selector takes one value", () => {
    expect(crdSelection(["a.x.dev", "b.x.dev"], LABELS)).toEqual({
      labelSelector: "app.kubernetes.io/managed-by=knative-fleet,knative.dev/cr-name=serving",
    });
  });
});

describe("waitEstablished", () => {
  it("ends when the last CRD is Established, not before, and stops its one watch", async () => {
    const { open, caches } = handOpener();
    const waiting = waitEstablished(client, [crd("a.x.dev"), crd("b.x.dev")], {
      timeoutMs: 5_000,
      labels: LABELS,
      open,
    });
    expect(caches).toHaveLength(1);
    const [cache] = caches as [HandCache<Selection>];
    expect(cache.started).toBe(true);
    expect(cache.opened.labelSelector).toContain("knative.dev/cr-name=serving");
    await cache.sync(crd("a.x.dev", true), crd("b.x.dev", false));
    expect(await settled(waiting)).toBe(false);
    expect(cache.stopped).toBe(false);
    cache.put(crd("b.x.dev", true));
    await waiting;
    expect(cache.stopped).toBe(true);
  });

  it("ends at the list when every CRD is already Established (no watch event needed)", async () => {
    const { open, caches } = handOpener();
    const waiting = waitEstablished(client, [crd("a.x.dev")], { timeoutMs: 5_000, labels: LABELS, open });
    await caches[0]!.sync(crd("a.x.dev", true));
    await waiting;
    expect(caches[0]!.stopped).toBe(true);
  });

  it("opens nothing when no CRD is waited for", async () => {
    const { open, caches } = handOpener();
    await waitEstablished(client, [], { timeoutMs: 5_000, labels: LABELS, open });
    expect(caches).toEqual([]);
  });

  it("fails after the timeout naming a CRD still not Established, its watch stopped", async () => {
    const { open, caches } = handOpener();
    const waiting = waitEstablished(client, [crd("a.x.dev"), crd("b.x.dev")], {
      timeoutMs: 50,
      labels: LABELS,
      open,
    });
    await caches[0]!.sync(crd("a.x.dev", true), crd("b.x.dev", false));
    await expect(waiting).rejects.toThrow(
      "CustomResourceDefinition.apiextensions.k8s.io b.x.dev did not become Established within 0.05s",
    );
    expect(caches[0]!.stopped).toBe(true);
  });

  it("a failed watch is stopped, reported, and the wait goes on by polling the CRDs not yet seen Established", async () => {
    const kube = new FakeKube().serveKindsOf([crd("a.x.dev")]);
    await kube.client.apply(crd("b.x.dev"));
    kube.resetCounts();
    const { open, caches } = handOpener();
    const errors: unknown[] = [];
    const waiting = waitEstablished(kube.client, [crd("a.x.dev"), crd("b.x.dev")], {
      timeoutMs: 5_000,
      labels: LABELS,
      open,
      onWatchError: (err) => errors.push(err),
      pollMs: 1,
    });
    await caches[0]!.sync(crd("a.x.dev", true));
    caches[0]!.onError(new Error("watch refused"));
    await waiting;
    expect(caches[0]!.stopped).toBe(true);
    expect(errors).toEqual([new Error("watch refused")]);
    // Only b was read: a had been seen Established by the watch.
    expect(kube.requests().reads).toBe(1);
  });

  it("the polling fallback keeps the deadline", async () => {
    const kube = new FakeKube().serveKindsOf([crd("a.x.dev")]);
    const { open, caches } = handOpener();
    const waiting = waitEstablished(kube.client, [crd("missing.x.dev")], {
      timeoutMs: 30,
      labels: LABELS,
      open,
      pollMs: 5,
    });
    caches[0]!.onError(new Error("list refused"));
    await expect(waiting).rejects.toThrow("missing.x.dev did not become Established within 0.03s");
  });
});

/** The CRD of kind Widget in x.dev, served in v1. */
const WIDGET_CRD: KubeObject = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.x.dev", labels: LABELS },
  spec: {
    group: "x.dev",
    names: { kind: "Widget", plural: "widgets" },
    scope: "Namespaced",
    versions: [{ name: "v1", served: true, storage: true }],
  },
};

/**
 * The API server's discovery of x.dev/v1 starts listing Widget only at its `servedAt`-th read, as a real
 * one's discovery follows an Established CRD after a while; returns the count of those reads.
 */
function discoveryLagging(kube: FakeKube, servedAt: number): { reads: number } {
  const seen = { reads: 0 };
  const request = kube.client.rest.request.bind(kube.client.rest);
  kube.client.rest.request = (req: RestRequest) => {
    if (req.method === "GET" && req.path === "/apis/x.dev/v1" && ++seen.reads === servedAt) {
      kube.serveKindsOf([{ apiVersion: "x.dev/v1", kind: "Widget", metadata: { name: "any" } }]);
    }
    return request(req);
  };
  return seen;
}

const WIDGET = { apiVersion: "x.dev/v1", kind: "Widget" };

describe("waitServed", () => {
  it("reads discovery again after each miss until the kind is listed, then ends, once per kind", async () => {
    const kube = new FakeKube();
    kube.serveKindsOf([{ apiVersion: "x.dev/v1", kind: "Gadget", metadata: { name: "any" } }]);
    // Discovery cached before the CRD: it does not list Widget.
    await kube.client.resourceInfo("x.dev/v1", "Gadget");
    const discovery = discoveryLagging(kube, 4);
    await waitServed(kube.client, [WIDGET, WIDGET], { timeoutMs: 5_000, pollMs: 1 });
    expect(discovery.reads).toBe(4);
    expect(await kube.client.resourceInfo("x.dev/v1", "Widget")).toEqual({
      resource: "widgets",
      namespaced: true,
    });
  });

  it("fails after its timeout naming the kind still not served", async () => {
    const kube = new FakeKube();
    await expect(waitServed(kube.client, [WIDGET], { timeoutMs: 20, pollMs: 2 })).rejects.toThrow(
      "Widget (x.dev/v1) is not served 0.02s after its CustomResourceDefinition became Established",
    );
  });

  it("does not wait out what is not a missing kind: a refused discovery fails at once", async () => {
    const kube = new FakeKube();
    let reads = 0;
    kube.client.rest.request = () => {
      reads++;
      return Promise.reject(new KubeApiError("GET", "/apis/x.dev/v1", 403, "Forbidden", "no"));
    };
    await expect(waitServed(kube.client, [WIDGET], { timeoutMs: 5_000, pollMs: 1 })).rejects.toThrow(
      "Forbidden",
    );
    expect(reads).toBe(1);
  });
});

describe("an apply pass that brings a CRD", () => {
  it("writes the objects of its new kind once discovery lists it, not at Established", async () => {
    const kube = new FakeKube().serveKindsOf([crd("a.x.dev")]);
    // The fake sets Established on the CRD's write; discovery lists Widget only at its sixth read (the pass
    // reads it twice before the CRD is written, and a write refreshes a miss once).
    discoveryLagging(kube, 6);
    const widget: KubeObject = {
      apiVersion: "x.dev/v1",
      kind: "Widget",
      metadata: { name: "w", namespace: "ns" },
    };
    await runApplySet(
      {
        client: kube.client,
        namespace: "ns",
        labels: LABELS,
        concurrency: 2,
        inventoryObject: (refs) => ({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "inventory", namespace: "ns" },
          data: { refs: JSON.stringify(refs) },
        }),
      },
      [WIDGET_CRD, widget],
      "apply",
    );
    expect(kube.find("Widget", "w")).toBeDefined();
  });
});
