import { describe, expect, it } from "vitest";
import { FINALIZERS } from "../../../src/api/labels.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { Logger } from "../../../src/observability/log.ts";
import { KnativeController } from "../../../src/reconcile/controller.ts";
import type { ReconcileDeps } from "../../../src/reconcile/reconciler.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { waitUntil } from "../../support/wait.ts";

// FinalizeRemoteCluster's sharing rule (upstream's) as the hub controller applies it: a CR being deleted
// leaves its cluster untouched while another live CR of its kind targets the same ClusterProfile. The
// controller finds those CRs by the cluster they target; the informers list them from an in-memory hub.

const SHARING = "another CR targets the same cluster; leaving it untouched";
const RELEASED = "the ClusterProfile left the inventory; releasing the CR without cleanup";

function serving(name: string, cluster: string, options: { deleting?: boolean; kind?: string } = {}) {
  const cr = crObject({ name, cluster, version: "1.22" }) as unknown as KubeObject;
  const kind = options.kind ?? "KnativeServing";
  return {
    ...cr,
    kind,
    metadata: {
      ...cr.metadata,
      resourceVersion: "1",
      finalizers: [FINALIZERS[kind as keyof typeof FINALIZERS]],
      ...(options.deleting && { deletionTimestamp: "2026-11-30T00:00:00Z" }),
    },
  } as KubeObject;
}

/**
 * A controller of one worker over `hub` where every ClusterProfile is gone: a finalize that looks for its
 * cluster releases the CR without cleanup.
 */
function oneWorkerController(hub: KubeClient, log: Logger): KnativeController {
  return new KnativeController({
    hub,
    deps: {
      log,
      now: () => new Date(),
      deploymentWatches: { release: () => {} },
      targets: {
        resolve: async () => ({ ok: false, reason: "ClusterProfileNotFound", message: "no such profile" }),
      },
    } as unknown as ReconcileDeps,
    workers: 1,
    resyncIntervalMs: 3_600_000,
  });
}

/** Runs the controller until the CR `leaving` is released; what its finalize said. */
async function finalize(hubCrs: KubeObject[]): Promise<string[]> {
  const hub = new FakeKube().serveKindsOf([
    serving("x", "c"),
    serving("x", "c", { kind: "KnativeEventing" }),
  ]);
  for (const cr of hubCrs) hub.put(cr);
  const log = capturingLogger();
  const controller = oneWorkerController(hub.client, log.logger);
  await controller.start();
  try {
    const finalizers = () =>
      (hub.find("KnativeServing", "leaving")?.metadata.finalizers as string[] | undefined) ?? [];
    await waitUntil(
      "the leaving CR released",
      async () => (finalizers().length === 0 ? true : undefined),
      4_000,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${log.text()}`);
    });
  } finally {
    await controller.stop();
  }
  return log
    .lines()
    .filter((line) => line.cr === "knative-fleet/leaving")
    .map((line) => String(line.msg));
}

describe("the hub controller's FinalizeRemoteCluster", () => {
  it("leaves the cluster untouched while another live CR of the kind targets the same ClusterProfile", async () => {
    const said = await finalize([
      serving("leaving", "spoke-1", { deleting: true }),
      serving("staying", "spoke-1"),
    ]);
    expect(said).toContain(SHARING);
    expect(said).not.toContain(RELEASED);
  });

  it("cleans up (looks for the cluster) when the others are on another cluster, of another kind, or leaving too", async () => {
    const said = await finalize([
      serving("leaving", "spoke-1", { deleting: true }),
      serving("elsewhere", "spoke-2"),
      serving("eventing", "spoke-1", { kind: "KnativeEventing" }),
      serving("also-leaving", "spoke-1", { deleting: true }),
    ]);
    expect(said).not.toContain(SHARING);
    expect(said).toContain(RELEASED);
  });
});

describe("the hub controller's deletions", () => {
  it("finalize beside the workers: CRs being deleted do not wait behind an install that holds every worker", async () => {
    const hub = new FakeKube().serveKindsOf([
      serving("x", "c"),
      serving("x", "c", { kind: "KnativeEventing" }),
    ]);
    const installing = serving("installing", "spoke-1");
    hub.put({ ...installing, metadata: { ...installing.metadata, finalizers: [] } });
    const leaving = Array.from({ length: 20 }, (_, i) => `leaving-${i}`);
    for (const [i, name] of leaving.entries()) hub.put(serving(name, `gone-${i}`, { deleting: true }));
    // The install's first write, its finalizer, never gets an answer: it holds the one worker.
    const stuck = Promise.withResolvers<never>();
    const client = Object.create(hub.client) as typeof hub.client;
    client.mergePatch = (...args) =>
      args[3] === "installing" ? stuck.promise : hub.client.mergePatch(...args);
    const controller = oneWorkerController(client, capturingLogger().logger);
    await controller.start();
    // Released: the finalizer is off (the in-memory hub keeps the object; an API server would delete it).
    const finalizers = (name: string) =>
      (hub.find("KnativeServing", name)?.metadata.finalizers as string[] | undefined) ?? [];
    const released = () => leaving.filter((name) => finalizers(name).length === 0).length;
    try {
      await waitUntil("every leaving CR released", async () => (released() === 20 ? true : undefined), 4_000);
    } finally {
      stuck.reject(new Error("the test is over"));
      await controller.stop();
    }
  });
});
