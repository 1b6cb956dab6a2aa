import { describe, expect, it } from "vitest";
import type { DeploymentWatches } from "../../../src/install/deployment-watch.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { KnativeController } from "../../../src/reconcile/controller.ts";
import type { ReconcileDeps } from "../../../src/reconcile/reconciler.ts";

// The hub controller's work queue keys a CR by its identity's one spelling (formatIdentity) and keeps the
// parts beside the key: a reconcile reads the CR's kind, namespace and name from there, never from the key.

function controller(released: unknown[], workers = 2): KnativeController {
  const deploymentWatches = {
    release: (resource: unknown) => released.push(resource),
  } as unknown as DeploymentWatches;
  return new KnativeController({
    hub: {} as KubeClient, // the informers are never started: every CR is one the hub no longer has
    deps: { deploymentWatches, log: silentLogger } as unknown as ReconcileDeps,
    workers,
    resyncIntervalMs: 60_000,
  });
}

describe("the hub controller's work queue", () => {
  it("hands a reconcile the CR's parts as they were queued: a CR gone from the hub is released by them", async () => {
    const released: unknown[] = [];
    const hub = controller(released);
    hub.enqueue({ kind: "KnativeEventing", namespace: "team-a", name: "spoke-1-eventing" });
    hub.enqueue({ kind: "KnativeServing", namespace: "team-a", name: "spoke-1-eventing" });
    await hub.queue.idle();
    expect(released).toEqual([
      { kind: "KnativeEventing", metadata: { namespace: "team-a", name: "spoke-1-eventing" } },
      { kind: "KnativeServing", metadata: { namespace: "team-a", name: "spoke-1-eventing" } },
    ]);
  });

  it("queues a CR once however often it is added while it waits", async () => {
    const released: unknown[] = [];
    const hub = controller(released, 1);
    const waiting = { kind: "KnativeServing", namespace: "team-a", name: "serving" } as const;
    hub.enqueue({ kind: "KnativeEventing", namespace: "team-a", name: "eventing" }); // takes the one worker
    hub.enqueue(waiting);
    hub.enqueue({ ...waiting });
    expect(hub.queue.length).toBe(1);
    await hub.queue.idle();
    expect(released).toHaveLength(2);
  });
});
