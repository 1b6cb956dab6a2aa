import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { parse } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { freePort } from "../../sandbox/processes.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { only, type KubeObject as RenderedObject, renderChart } from "../../support/helm.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { ServiceProcess } from "../../support/service-process.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";
import { type LocalPod, layOutPod } from "./chart-pod.ts";

// `helm install` on the hub, short of the container runtime: the chart is rendered by the real helm, and
// the service runs as a child process with exactly the rendered container args and ConfigMaps. Only the
// mount paths move to writable temporary directories (chart-pod.ts; each rewrite is checked and printed).
// What the image adds comes from the Dockerfile: NODE_ENV=production, HOME=/tmp, and KO_DATA_PATH, which
// points at the same Knative releases the image bundles (../shared) instead of /opt/knative-fleet/kodata.
// The process talks to the sandbox hub as its admin ($KUBECONFIG; the chart's RBAC is proven on its own in
// test/integration/service/chart-rbac.test.ts and test/integration/chart/hub.test.ts).

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const spoke = adminClient(sandbox.spokes[0]!);
/** The release namespace: the Lease's, and the hub namespace of the fleet's CRs (fleet.defaultNamespace empty). */
const NAMESPACE = "release-test";
const RELEASE = "release-test";
const REPO = "fleet";
const CR = "release-serving";
const SPOKE_CLUSTER = `${sandbox.clusterProfileNamespace}/${sandbox.spokes[0]!.name}`;
const servingFile = (autoscaler = "") => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: ${CR}
spec:
  version: "1.22"
  clusterProfileRef:
    name: spoke-1
    namespace: fleet-system
  ingress:
    kourier:
      enabled: true
${autoscaler && `  config:\n    autoscaler:\n      enable-scale-to-zero: "${autoscaler}"\n`}`;
/** The chart's defaults for leader election (client-go's): 15 s lease, 2 s retry period with 1.2 jitter. */
const LEASE_DURATION_MS = 15_000;
const LONGEST_ACQUIRE_POLL_MS = 2.2 * 2_000;

interface Replica {
  podName: string;
  pod: LocalPod;
  objects: RenderedObject[];
  service: ServiceProcess;
}

describe("helm install on the hub: the service as the chart runs it", () => {
  const workRoot = mkdtempSync(join(tmpdir(), "knative-fleet-release-"));
  const replicas: Replica[] = [];
  const figures: Record<string, number | string> = {};
  let git: GitServer;

  /** Chart values as an operator would set them, pointing at the sandbox's repository, spokes and plugins. */
  const chartValues = (replicaCount: number, metricsPort: number) => ({
    replicas: replicaCount,
    metrics: { port: metricsPort },
    fleet: {
      repository: { url: git.url(REPO) },
      // Stands in for the webhook (a push syncs at once), so the figures measure the service, not a poll.
      pollInterval: "*/2 * * * * *",
    },
    multicluster: {
      remoteDeploymentsPollInterval: "1s",
      accessProvidersConfig: {
        providers: (JSON.parse(readFileSync(sandbox.providerFile, "utf8")) as { providers: unknown[] })
          .providers,
      },
      // The sandbox's plugin binaries are on this machine already: the image volume's mountPath is their
      // directory, so every provider command lies under it, as the chart demands.
      plugins: [
        {
          name: "sandbox-plugins",
          image: "registry.k8s.io/cluster-inventory-api/secretreader:v0.1.3",
          mountPath: sandbox.binDir,
        },
      ],
    },
  });

  /** Renders the chart for one pod (its own metrics port: the pods share this machine's network) and starts it. */
  async function startReplica(replicaCount: number, podName: string): Promise<Replica> {
    const objects = renderChart({
      values: chartValues(replicaCount, await freePort()),
      release: RELEASE,
      namespace: NAMESPACE,
      withRepository: false,
    });
    const dir = mkdtempSync(join(workRoot, `${podName}-`));
    const pod = layOutPod(objects, dir, podName);
    const service = new ServiceProcess({
      args: pod.args,
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        NODE_ENV: "production",
        HOME: "/tmp",
        KO_DATA_PATH: knativeReleasesDir(),
        KUBECONFIG: sandbox.hub.adminKubeconfig,
        ...pod.env,
      },
      metricsPort: pod.metricsPort,
      logFile: join(dir, "service.log"),
    });
    const replica = { podName, pod, objects, service };
    replicas.push(replica);
    return replica;
  }

  const printLogsOnFailure = () =>
    onTestFailed(() => {
      for (const r of replicas)
        console.error(`--- ${r.podName} (${r.service.logFile}):\n${r.service.logTail()}`);
    });
  const renderedConfig = (r: Replica) =>
    parse(
      only<RenderedObject & { data: Record<string, string> }>(
        r.objects,
        "ConfigMap",
        `${RELEASE}-knative-fleet`,
      ).data["config.yaml"]!,
    ) as { leaderElection: { enabled: boolean; leaseName: string; namespace: string } };
  const hubCr = () => hub.get(OPERATOR_API_VERSION, "KnativeServing", NAMESPACE, CR);
  const isReady = (cr: KubeObject | undefined) =>
    (cr?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.some(
      (c) => c.type === "Ready" && c.status === "True",
    );
  const waitForReady = (r: Replica) =>
    waitUntil(`${r.podName} /readyz 200`, async () =>
      (await r.service.get("/readyz")).status === 200 ? true : undefined,
    );
  const leads = async (r: Replica) => (await r.service.metric("knative_fleet_leader")) === 1;
  const leaseHolder = async (leaseName: string) =>
    (
      (await hub.get("coordination.k8s.io/v1", "Lease", NAMESPACE, leaseName))?.spec as
        | { holderIdentity?: string; leaseTransitions?: number }
        | undefined
    )?.holderIdentity;
  // The holder is "<pod name>_<uuid>": one identity per process, so a restarted container does not renew its
  // predecessor's Lease.
  const heldBy = (r: Replica) => new RegExp(`^${r.podName}_[0-9a-f-]{36}$`);
  const scaleToZeroOnSpoke = async () =>
    (
      (await spoke.get("v1", "ConfigMap", "knative-serving", "config-autoscaler"))?.data as
        | Record<string, string>
        | undefined
    )?.["enable-scale-to-zero"];
  const waitForSpokeScaleToZero = (value: string) =>
    waitUntil(
      `enable-scale-to-zero=${value} on spoke-1`,
      async () => ((await scaleToZeroOnSpoke()) === value ? true : undefined),
      90_000,
    );
  const pushAutoscaler = (value: string) =>
    git.pushChange(REPO, {
      files: { "clusters/spoke-1/knative-serving.yaml": servingFile(value) },
      message: `enable-scale-to-zero: ${value}`,
    });

  beforeAll(async () => {
    // What the README's install steps do before `helm install`: the CRDs (the chart's crds/) and the
    // release namespace.
    await installFleetCrds(hub);
    await ensureNamespace(hub, NAMESPACE);
    git = await startGitServer();
    await git.createRepo(REPO, { "clusters/spoke-1/knative-serving.yaml": servingFile() });
  });

  afterAll(async () => {
    // The fleet's CR goes through its finalizer, which removes Knative from spoke-1. The repository goes
    // down first so that no sync can mirror the CR back while it is deleted; a fresh single replica runs the
    // finalizer whatever state the tests left the replicas in.
    await git?.stop();
    await Promise.all(replicas.map((r) => r.service.stop()));
    if (await hubCr()) {
      const cleaner = await startReplica(1, "release-test-cleanup");
      await hub.delete(OPERATOR_API_VERSION, "KnativeServing", NAMESPACE, CR);
      await waitUntil("the CR's finalizer", async () => ((await hubCr()) ? undefined : true), 180_000).catch(
        async (err: Error) => {
          console.error(`${err.message}; removing the finalizer by hand\n${cleaner.service.logTail()}`);
          await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", NAMESPACE, CR, {
            metadata: { finalizers: null },
          });
        },
      );
      await cleaner.service.stop();
    }
    await hub.delete("v1", "Namespace", undefined, NAMESPACE).catch(() => {});
    await git?.close();
    rmSync(workRoot, { recursive: true, force: true });
    console.log("release figures:", JSON.stringify(figures));
  });

  it("one replica, started with exactly what the chart renders, makes spoke-1 Ready and stops cleanly on SIGTERM", async () => {
    printLogsOnFailure();
    figures.spoke1HadServingBefore = String(
      (await spoke.list("apps/v1", "Deployment", { namespace: "knative-serving" })).items.length > 0,
    );
    const startedAt = performance.now();
    const replica = await startReplica(1, "release-test-knative-fleet-7c9d5-x2k8q");
    const { pod, service } = replica;

    // Nothing but the mount paths moved: the two files the args name, and the clone's cache directory.
    console.log(
      "rewrites of the render:\n" + pod.rewrites.map((r) => `  ${r.where}: ${r.from} -> ${r.to}`).join("\n"),
    );
    expect(pod.rewrites.map((r) => `${r.where}: ${r.from}`).sort()).toEqual([
      `ConfigMap ${RELEASE}-knative-fleet config.yaml: /var/cache/knative-fleet`,
      "args: /etc/cluster-inventory",
      "args: /etc/knative-fleet",
    ]);
    expect(pod.args).toEqual([
      "run",
      "--config",
      expect.stringMatching(/\/config\.yaml$/),
      "--clusterprofile-provider-file",
      expect.stringMatching(/\/config\.json$/),
    ]);
    expect(renderedConfig(replica).leaderElection.enabled).toBe(false);

    // The probes the chart declares answer on the port it declares.
    await waitForReady(replica);
    figures.startToReadyzMs = Math.round(performance.now() - startedAt);
    for (const path of pod.probePaths) expect((await service.get(path)).status, path).toBe(200);

    await waitUntil(
      "the KnativeServing Ready on the hub",
      async () => (isReady(await hubCr()) ? true : undefined),
      240_000,
    );
    figures.startToCrReadyMs = Math.round(performance.now() - startedAt);
    const cr = await hubCr();
    expect(cr?.metadata.annotations?.["fleet.knative.dev/source-path"]).toBe(
      "clusters/spoke-1/knative-serving.yaml",
    );

    const deployments = (await spoke.list("apps/v1", "Deployment", { namespace: "knative-serving" })).items;
    expect(deployments.map((d) => d.metadata.name)).toEqual(
      expect.arrayContaining(["activator", "autoscaler", "controller", "webhook"]),
    );
    for (const d of deployments) {
      const conditions = (d.status as { conditions?: { type: string; status: string }[] }).conditions ?? [];
      expect(
        conditions.some((c) => c.type === "Available" && c.status === "True"),
        `${d.metadata.name} Available`,
      ).toBe(true);
    }

    expect(await service.metric("knative_fleet_leader")).toBe(1);
    await waitUntil("knative_fleet_spoke_ready 1", async () =>
      (await service.metric("knative_fleet_spoke_ready", {
        kind: "KnativeServing",
        cluster: SPOKE_CLUSTER,
      })) === 1
        ? true
        : undefined,
    );
    // The chart turns the status write-back on by default: the observed state is committed to the repository.
    await waitUntil(
      "status/README.md shows the CR Ready",
      async () =>
        /release-serving \| ✓/.test(await git.readFile(REPO, "main", "status/README.md").catch(() => ""))
          ? true
          : undefined,
      90_000,
    );

    // Idle memory: converged, polling the repository every 2 s, nothing to change. A fixed window on purpose:
    // it is the thing measured, not a condition awaited.
    const samples: number[] = [];
    for (let i = 0; i < 10; i++) {
      await sleep(1_000);
      samples.push(service.rssKiB());
    }
    figures.idleRssMiB = Math.round(samples.at(-1)! / 1024);
    figures.idleRssPeakMiB = Math.round(Math.max(...samples) / 1024);
    console.log(`idle RSS over 10 s (MiB): ${samples.map((kib) => Math.round(kib / 1024)).join(" ")}`);

    const termAt = performance.now();
    service.kill("SIGTERM");
    const exit = await service.exited;
    figures.sigtermToExitMs = Math.round(exit.atMs - termAt);
    expect(exit).toMatchObject({ code: 0, signal: null });
    // Well within the pod's 60 s grace period: nothing left behind (a pending poll timer, an open watch)
    // keeps the stopped process alive.
    expect(exit.atMs - termAt).toBeLessThan(5_000);
    expect(service.logTail(5)).toContain("knative-fleet stopped");
  }, 300_000);

  it("two replicas: exactly one leads; a SIGKILLed leader fails over, a SIGTERMed one hands over at once", async () => {
    printLogsOnFailure();
    const a = await startReplica(2, "release-test-knative-fleet-7c9d5-aaaaa");
    const b = await startReplica(2, "release-test-knative-fleet-7c9d5-bbbbb");
    const { leaderElection } = renderedConfig(a);
    expect(leaderElection).toEqual({
      enabled: true,
      leaseName: `${RELEASE}-knative-fleet`,
      namespace: NAMESPACE,
    });

    const leader = await exactlyOneLeader([a, b], leaderElection.leaseName);
    const standby = leader === a ? b : a;

    // A crash: no release, the standby waits out the lease. A change pushed meanwhile is picked up by it.
    const killedAt = performance.now();
    leader.service.kill("SIGKILL");
    await pushAutoscaler("false");
    await waitUntil(
      `${standby.podName} leads`,
      () => leads(standby).then((yes) => (yes ? true : undefined)),
      60_000,
    );
    const failoverMs = performance.now() - killedAt;
    await waitForSpokeScaleToZero("false");
    figures.sigkillFailoverMs = Math.round(failoverMs);
    figures.sigkillToChangeOnSpokeMs = Math.round(performance.now() - killedAt);
    expect((await leader.service.exited).signal).toBe("SIGKILL");
    // Never before the lease could have expired (from the last renewal the standby saw, at most one retry
    // period before the kill), and at the first poll after it.
    expect(failoverMs).toBeGreaterThan(LEASE_DURATION_MS - LONGEST_ACQUIRE_POLL_MS);
    expect(failoverMs).toBeLessThan(LEASE_DURATION_MS + 2 * LONGEST_ACQUIRE_POLL_MS + 2_000);
    expect(await leaseHolder(leaderElection.leaseName)).toMatch(heldBy(standby));

    // The Deployment replaces the killed pod: a new standby. A rollout then stops the leader with SIGTERM:
    // it releases the Lease, and the new pod leads at its next poll instead of after the lease duration.
    const replacement = await startReplica(2, "release-test-knative-fleet-7c9d5-ccccc");
    await waitForReady(replacement);
    expect(await replacement.service.metric("knative_fleet_leader")).toBe(0);
    const termAt = performance.now();
    standby.service.kill("SIGTERM");
    await waitUntil(`${replacement.podName} leads`, () =>
      leads(replacement).then((yes) => (yes ? true : undefined)),
    );
    const handoverMs = performance.now() - termAt;
    figures.sigtermHandoverMs = Math.round(handoverMs);
    const exit = await standby.service.exited;
    figures.sigtermLeaderExitMs = Math.round(exit.atMs - termAt);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(handoverMs).toBeLessThan(failoverMs);
    expect(handoverMs).toBeLessThan(LONGEST_ACQUIRE_POLL_MS + 5_000);
    expect(await leaseHolder(leaderElection.leaseName)).toMatch(heldBy(replacement));

    await pushAutoscaler("true");
    await waitForSpokeScaleToZero("true");
    console.log(
      `failover after SIGKILL ${(failoverMs / 1000).toFixed(1)} s; handover after SIGTERM ${(handoverMs / 1000).toFixed(1)} s`,
    );
  }, 300_000);

  /**
   * Waits until every candidate serves its probes and one leads, then checks over a few retry periods (a
   * fixed window: the invariant is what is checked) that it is the only one, and the Lease names it.
   */
  async function exactlyOneLeader(candidates: Replica[], leaseName: string): Promise<Replica> {
    for (const r of candidates) await waitForReady(r);
    const leader = await waitUntil("a leader", async () => {
      for (const r of candidates) if (await leads(r)) return r;
      return undefined;
    });
    for (let i = 0; i < 8; i++) {
      const flags = await Promise.all(candidates.map((r) => r.service.metric("knative_fleet_leader")));
      expect(flags.sort()).toEqual([0, 1]);
      expect(await leads(leader)).toBe(true);
      // A standby is ready too: it can take over.
      for (const r of candidates)
        expect((await r.service.get("/readyz")).status, `${r.podName} ready`).toBe(200);
      await sleep(500);
    }
    expect(await leaseHolder(leaseName)).toMatch(heldBy(leader));
    return leader;
  }
});
