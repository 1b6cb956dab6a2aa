import { Agent } from "undici";
import { describe, expect, it } from "vitest";
import type { TargetResolver } from "../../../src/access/target.ts";
import { ConditionType, findCondition, readinessOf } from "../../../src/api/conditions.ts";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { DeploymentWatches } from "../../../src/install/deployment-watch.ts";
import { KubeClient } from "../../../src/kube/client.ts";
import { Informer } from "../../../src/kube/informer.ts";
import { RestClient } from "../../../src/kube/rest.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  finalizeInstall,
  type ReconcileDeps,
  reconcileInstall,
  STEPS,
  WATCHED_RECHECK_MS,
} from "../../../src/reconcile/reconciler.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// The reconcile's step list on an in-memory cluster: what each way out of it writes to the CR's status,
// whether it retries, requeues or settles, and what it sends to the cluster.

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const POLL_MS = 1_234;

const serving = (status?: KnativeResource["status"], version = "1.21"): KnativeResource =>
  KnativeResourceSchema.parse({
    ...crObject({ name: "serving", cluster: "spoke-1", version }),
    ...(status ? { status } : {}),
  });

/**
 * A spoke whose Kubernetes version is `kept` (what the client read when it connected) until read afresh,
 * which answers `current`; the fresh reads are counted.
 */
function spokeRunning(fake: FakeKube, kept: string, current = kept) {
  const spoke = { freshReads: 0, resolve: undefined as unknown as TargetResolver["resolve"] };
  spoke.resolve = async () => ({
    ok: true,
    client: fake.client,
    cluster: "fleet-system/spoke-1",
    local: false,
    kubernetesVersion: async (options) => {
      if (!options?.fresh) return kept;
      spoke.freshReads++;
      return current;
    },
  });
  return spoke;
}

function depsFor(fake: FakeKube, resolve?: TargetResolver["resolve"]): ReconcileDeps {
  return {
    releases,
    // The sandbox's spokes run Kubernetes 1.35, newer than every release of the window needs.
    targets: { resolve: resolve ?? spokeRunning(fake, "v1.35.4").resolve },
    pollIntervalMs: POLL_MS,
    applyConcurrency: 4,
    now: () => new Date("2026-01-01T00:00:00Z"),
    log: silentLogger,
  };
}

/** A fake cluster serving every kind the 1.21 Serving release has. */
async function servingCluster(): Promise<FakeKube> {
  const release = await releases.load(serving());
  return new FakeKube().serveKindsOf(release.manifests);
}

describe("the reconcile steps", () => {
  it("are upstream's stages, in order, with the cluster's Kubernetes checked before anything is applied", () => {
    expect(STEPS.map(([name]) => name)).toEqual([
      "loadRelease",
      "checkMigration",
      "resolveTarget",
      "checkKubernetes",
      "install",
      "checkDeployments",
    ]);
  });

  it("a version jump of more than one minor settles without touching the cluster or retrying", async () => {
    const fake = await servingCluster();
    const outcome = await reconcileInstall(serving({ version: "1.19.0" }), depsFor(fake));
    expect(findCondition(outcome.status.conditions, ConditionType.VersionMigrationEligible)).toMatchObject({
      status: "False",
    });
    expect(findCondition(outcome.status.conditions, ConditionType.Ready)?.status).toBe("False");
    expect(outcome.error).toBeUndefined();
    expect(outcome.requeueAfterMs).toBeUndefined();
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
  });

  it("an unknown version fails the install and waits for a spec change (no retry)", async () => {
    const fake = await servingCluster();
    const outcome = await reconcileInstall(serving(undefined, "1.5"), depsFor(fake));
    expect(findCondition(outcome.status.conditions, ConditionType.InstallSucceeded)).toMatchObject({
      status: "False",
      reason: "Error",
    });
    expect(outcome.error).toBeUndefined();
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
  });

  it("an unresolved target says why on TargetClusterResolved and retries", async () => {
    const fake = await servingCluster();
    const outcome = await reconcileInstall(
      serving(),
      depsFor(fake, async () => ({
        ok: false,
        reason: "ClusterProfileNotFound",
        message: "no such profile",
      })),
    );
    expect(findCondition(outcome.status.conditions, ConditionType.TargetClusterResolved)).toMatchObject({
      status: "False",
      reason: "ClusterProfileNotFound",
      message: "no such profile",
    });
    expect(outcome.error?.message).toBe("ClusterProfileNotFound: no such profile");
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
  });

  it("says whether the cluster answered: a failed connection no, a missing ClusterProfile nothing", async () => {
    const fake = await servingCluster();
    const unresolved = (reason: "RemoteClientCreationFailed" | "ClusterProfileNotFound") =>
      reconcileInstall(
        serving(),
        depsFor(fake, async () => ({ ok: false, reason, message: "x" })),
      );
    expect((await unresolved("RemoteClientCreationFailed")).reachable).toBe(false);
    expect((await unresolved("ClusterProfileNotFound")).reachable).toBeUndefined();
    expect((await reconcileInstall(serving(), depsFor(fake))).reachable).toBe(true);
    // A cluster that went down after its client was made: port 9 on loopback refuses at once.
    const dispatcher = new Agent();
    const down = new KubeClient(
      new RestClient({ server: "http://127.0.0.1:9", connect: async () => ({ dispatcher, headers: {} }) }),
    );
    const outcome = await reconcileInstall(
      serving(),
      depsFor(fake, async () => ({
        ok: true,
        client: down,
        cluster: "fleet-system/spoke-1",
        local: false,
        kubernetesVersion: async () => "v1.35.0",
      })),
    );
    await dispatcher.close();
    expect(outcome.error).toBeInstanceOf(Error);
    expect(outcome.reachable).toBe(false);
    expect(outcome.requests, "the refused requests count too").toBeGreaterThan(0);
  });

  it("a cluster older than the release's minimum Kubernetes gets nothing; InstallSucceeded names both versions; retried", async () => {
    const fake = await servingCluster();
    // Knative 1.21 needs Kubernetes v1.33.0; the cluster runs a GKE build of 1.32.
    const spoke = spokeRunning(fake, "v1.32.9-gke.1200000");
    const outcome = await reconcileInstall(serving(), depsFor(fake, spoke.resolve));
    expect(findCondition(outcome.status.conditions, ConditionType.InstallSucceeded)).toMatchObject({
      status: "False",
      reason: "KubernetesVersionUnsupported",
      message:
        "Cluster fleet-system/spoke-1: Kubernetes v1.32.9-gke.1200000 is older than v1.33.0, the oldest " +
        "Kubernetes Knative 1.21.3 runs on (knative.dev/pkg's minimum version check). Nothing is applied to " +
        "it until it is upgraded.",
    });
    expect(findCondition(outcome.status.conditions, ConditionType.TargetClusterResolved)?.status).toBe(
      "True",
    );
    expect(findCondition(outcome.status.conditions, ConditionType.Ready)).toMatchObject({
      status: "False",
      reason: "KubernetesVersionUnsupported",
    });
    expect(outcome.error?.message).toContain("older than v1.33.0");
    expect(outcome.requeueAfterMs).toBeUndefined();
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
    expect(spoke.freshReads).toBe(1); // the kept version was checked again before refusing
  });

  it("the version kept with the client decides a compatible cluster; a refusal's fresh read sees an upgrade", async () => {
    const fake = await servingCluster();
    const current = spokeRunning(fake, "v1.33.0");
    const installing = await reconcileInstall(serving(), depsFor(fake, current.resolve));
    expect(findCondition(installing.status.conditions, ConditionType.InstallSucceeded)?.status).toBe("True");
    expect(current.freshReads).toBe(0);

    const upgraded = spokeRunning(fake, "v1.32.4", "v1.33.1");
    const after = await reconcileInstall(serving(installing.status), depsFor(fake, upgraded.resolve));
    expect(findCondition(after.status.conditions, ConditionType.InstallSucceeded)?.status).toBe("True");
    expect(upgraded.freshReads).toBe(1);
  });

  it("an upgrade whose release needs a newer Kubernetes leaves the installed release as it is", async () => {
    const fake = await servingCluster();
    const deps = depsFor(fake, spokeRunning(fake, "v1.33.7").resolve);
    await reconcileInstall(serving(), deps);
    fake.makeDeploymentsAvailable();
    const ready = await reconcileInstall(serving(), deps);
    expect(ready.status.version).toBe("1.21.3");

    fake.resetCounts();
    // 1.22 needs Kubernetes v1.34.0.
    const refused = await reconcileInstall(serving(ready.status, "1.22"), deps);
    expect(findCondition(refused.status.conditions, ConditionType.InstallSucceeded)).toMatchObject({
      status: "False",
      reason: "KubernetesVersionUnsupported",
    });
    expect(findCondition(refused.status.conditions, ConditionType.InstallSucceeded)?.message).toContain(
      "Kubernetes v1.33.7 is older than v1.34.0, the oldest Kubernetes Knative 1.22.1 runs on",
    );
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
    expect(refused.status.version).toBe("1.21.3");
    expect(findCondition(refused.status.conditions, ConditionType.VersionMigrationEligible)?.status).toBe(
      "True",
    );
  });

  it("a cluster whose version cannot be read afresh is retried, with nothing applied", async () => {
    const fake = await servingCluster();
    const resolve: TargetResolver["resolve"] = async () => ({
      ok: true,
      client: fake.client,
      cluster: "fleet-system/spoke-1",
      local: false,
      kubernetesVersion: async (options) => {
        if (options?.fresh) throw new Error("connect ECONNREFUSED 127.0.0.1:6443");
        return "v1.30.0";
      },
    });
    const outcome = await reconcileInstall(serving(), depsFor(fake, resolve));
    expect(findCondition(outcome.status.conditions, ConditionType.InstallSucceeded)).toMatchObject({
      status: "False",
      reason: "Error",
      message:
        "Install failed with message: cannot read the Kubernetes version of fleet-system/spoke-1: connect ECONNREFUSED 127.0.0.1:6443",
    });
    expect(outcome.error).toBeInstanceOf(Error);
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
  });

  it("a failed install marks InstallSucceeded False with upstream's text and retries", async () => {
    const fake = new FakeKube(); // serves no Knative kind: the first apply is refused
    const outcome = await reconcileInstall(serving(), depsFor(fake));
    const installed = findCondition(outcome.status.conditions, ConditionType.InstallSucceeded);
    expect(installed).toMatchObject({ status: "False", reason: "Error" });
    expect(installed?.message).toMatch(/^Install failed with message: /);
    expect(outcome.error).toBeInstanceOf(Error);
    expect(outcome.requeueAfterMs).toBeUndefined();
  });

  it("Deployments not yet Available: installed, waiting, requeued after the poll interval", async () => {
    const fake = await servingCluster();
    const outcome = await reconcileInstall(serving(), depsFor(fake));
    expect(findCondition(outcome.status.conditions, ConditionType.InstallSucceeded)?.status).toBe("True");
    const deployments = findCondition(outcome.status.conditions, ConditionType.DeploymentsAvailable);
    expect(deployments).toMatchObject({ status: "False", reason: "NotReady" });
    expect(deployments?.message).toMatch(/^Waiting on deployments: .*controller/);
    expect(outcome.requeueAfterMs).toBe(POLL_MS);
    expect(outcome.error).toBeUndefined();
    expect(outcome.status.version).toBeUndefined(); // not installed until Available
    expect(fake.find("ConfigMap", "knativeserving-serving-root-owner")).toBeDefined();
    expect(outcome.apply?.writes).toBeGreaterThan(0);
  });

  it("converged: Ready, settled, and a further reconcile sends no write at all", async () => {
    const fake = await servingCluster();
    const deps = depsFor(fake);
    await reconcileInstall(serving(), deps);
    fake.makeDeploymentsAvailable();
    const ready = await reconcileInstall(serving(), deps);
    expect(findCondition(ready.status.conditions, ConditionType.Ready)?.status).toBe("True");
    expect(ready.status.version).toBe("1.21.3");
    expect(ready.requeueAfterMs).toBeUndefined();

    fake.resetCounts();
    const again = await reconcileInstall(serving(ready.status), deps);
    expect(fake.requests().writes).toBe(0);
    expect(again.apply?.writes).toBe(0);
    expect(again.apply?.plan.drift).toEqual([]);
    expect(again.status).toEqual(ready.status);
    expect(again.requests).toBe(fake.requests().reads);
  });

  it("Deployments Available but a webhook Service without a ready endpoint: not Ready, upstream's condition, polled", async () => {
    const fake = await servingCluster();
    const deps = depsFor(fake);
    await reconcileInstall(serving(), deps);
    fake.makeDeploymentsAvailable();
    fake.remove("EndpointSlice", "webhook-fake"); // Serving's webhook has no endpoint; net-istio's has one
    const waiting = await reconcileInstall(serving(), deps);
    expect(findCondition(waiting.status.conditions, ConditionType.DeploymentsAvailable)).toMatchObject({
      status: "False",
      reason: "NotReady",
      message: "Waiting on webhook endpoints: webhook",
    });
    expect(findCondition(waiting.status.conditions, ConditionType.Ready)).toMatchObject({
      status: "False",
      reason: "NotReady",
      message: "Waiting on webhook endpoints: webhook",
    });
    expect(waiting.requeueAfterMs).toBe(POLL_MS);
    expect(waiting.error).toBeUndefined();
    expect(waiting.status.version).toBeUndefined();
    // What the rollout gate, the status file and the metrics read: not Current, and why.
    const verdict = readinessOf({
      metadata: { generation: 1 },
      status: { ...waiting.status, observedGeneration: 1 },
    });
    expect(verdict.phase).not.toBe("Current");
    expect(verdict.message).toBe(
      "DeploymentsAvailable=False (NotReady: Waiting on webhook endpoints: webhook)",
    );

    fake.makeServicesServed();
    const ready = await reconcileInstall(serving(waiting.status), deps);
    expect(findCondition(ready.status.conditions, ConditionType.Ready)?.status).toBe("True");
    expect(ready.status.version).toBe("1.21.3");
  });

  it("a spoke that forbids listing EndpointSlices: not Ready, the message names the permission, no crash", async () => {
    const fake = await servingCluster();
    const deps = depsFor(fake);
    await reconcileInstall(serving(), deps);
    fake.makeDeploymentsAvailable();
    fake.forbid("endpointslices");
    const outcome = await reconcileInstall(serving(), deps);
    expect(outcome.error).toBeUndefined();
    expect(outcome.requeueAfterMs).toBe(POLL_MS);
    expect(findCondition(outcome.status.conditions, ConditionType.DeploymentsAvailable)).toMatchObject({
      status: "False",
      reason: "NotReady",
      message:
        "Cannot verify webhook endpoints: listing endpointslices (discovery.k8s.io) in knative-serving is " +
        "forbidden; grant the cluster's credentials list on discovery.k8s.io endpointslices",
    });
    expect(findCondition(outcome.status.conditions, ConditionType.Ready)?.status).toBe("False");
  });

  it("with rollout watches: re-checked when woken (safety re-check only), and the watch ends with the wait", async () => {
    const fake = await servingCluster();
    const opened: { namespace: string; stopped: boolean }[] = [];
    const deploymentWatches = new DeploymentWatches({
      wake: () => {},
      fallbackMs: 60_000,
      // A cache that never lists: the step reads the cluster itself, as before the first list arrives.
      open: (client, namespace, onError) => {
        const informer = new Informer(client, "apps/v1", "Deployment", onError, namespace);
        const record = { namespace, stopped: false };
        opened.push(record);
        return {
          on: (handler) => informer.on(handler),
          start: () => {},
          stop: () => {
            record.stopped = true;
          },
          hasSynced: () => new Promise(() => {}),
          list: () => informer.list(),
        };
      },
    });
    const deps = { ...depsFor(fake), deploymentWatches };
    const waiting = await reconcileInstall(serving(), deps);
    expect(waiting.requeueAfterMs).toBe(WATCHED_RECHECK_MS);
    expect(opened.map((o) => o.namespace)).toEqual(["knative-serving"]);
    expect(deploymentWatches.watchCount).toBe(1);

    fake.makeDeploymentsAvailable();
    const ready = await reconcileInstall(serving(waiting.status), deps);
    expect(findCondition(ready.status.conditions, ConditionType.Ready)?.status).toBe("True");
    expect(deploymentWatches.watchCount).toBe(0);
    expect(opened.every((o) => o.stopped)).toBe(true);
  });
});

describe("finalize (FinalizeRemoteCluster)", () => {
  const deleting = (): KnativeResource => ({
    ...serving(),
    metadata: { ...serving().metadata, deletionTimestamp: "2026-01-01T00:00:00Z" },
  });

  it("a ClusterProfile that left the inventory releases the CR", async () => {
    const fake = await servingCluster();
    const deps = depsFor(fake, async () => ({
      ok: false,
      reason: "ClusterProfileNotFound",
      message: "ClusterProfile fleet-system/spoke-1 does not exist on the hub",
    }));
    expect(await finalizeInstall(deleting(), [], deps, silentLogger)).toEqual({ release: true });
  });

  it("one only outside allowedClusterProfileNamespaces keeps the finalizer and says how to release it", async () => {
    const fake = await servingCluster();
    const deps = depsFor(fake, async () => ({
      ok: false,
      reason: "ClusterProfileNotAllowed",
      message:
        "ClusterProfile fleet-system/spoke-1 is in namespace fleet-system, but knative-fleet only reads " +
        "ClusterProfiles in team-a (allowedClusterProfileNamespaces)",
    }));
    const outcome = await finalizeInstall(deleting(), [], deps, silentLogger);
    expect(outcome.release).toBe(false);
    expect(
      outcome.release === false &&
        findCondition(outcome.status.conditions, ConditionType.TargetClusterResolved),
    ).toMatchObject({
      status: "False",
      reason: "ClusterProfileNotAllowed",
      message:
        "ClusterProfile fleet-system/spoke-1 is in namespace fleet-system, but knative-fleet only reads " +
        "ClusterProfiles in team-a (allowedClusterProfileNamespaces). Cleanup of fleet-system/spoke-1 is " +
        "retried with backoff; if the cluster is gone for good, annotate the CR " +
        "fleet.knative.dev/abandon-cleanup=true to release it without cleanup.",
    });
  });
});
