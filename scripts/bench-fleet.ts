// The big-fleet run of issue #44: N ClusterProfiles on a sandbox hub, of which the sandbox's spokes are
// reachable and the rest are not, as a fleet that size always has some: a third black-holed (a listener that
// takes the connection and never answers), a third refusing it (a closed port), a third without credentials
// (the exec plugin finds no Secret). One KnativeServingPlacement selects every one of them, and R replicas of
// `knative-fleet run` shard the clusters (Leases, as the chart runs them; a replica that exits is started
// again, as its Deployment would). It measures: the install (push -> every CR on the hub, every reachable one
// Ready), the fleet at rest (requests, CPU, memory per replica), an upgrade 1.22 -> 1.23 through waves (a
// canary, two waves of the reachable clusters, the unreachable rest last), the sizes of what the hub and the
// repository hold, and the take-over when a replica is killed. Checked the whole run, as the soak checks
// them (test/soak/checks.ts): one owner per cluster, waves in order and within maxUnavailable, no declared CR
// pruned. The replicas run as the image runs them (the built CLI, the Dockerfile's node flags).
// Usage: KNATIVE_FLEET_SANDBOX=<state dir> node scripts/bench-fleet.ts [clusters=1000] [replicas=3] [workers=4]
// The sandbox: `npm run sandbox -- up --spokes 50 --bare` (its spokes are the reachable clusters; bare
// spokes serve installs and upgrades, which is all this run asks of them).
// BENCH_CPU_PROF=<dir>: each replica process writes a V8 CPU profile there when it exits (a leader that
// loses its Lease exits, so its profile shows what held its event loop).
// The spokes' processes run at nice BENCH_SPOKE_NICE (default 10) for the run: in a real fleet they are other
// machines, and here they would otherwise take the CPU the hub and its replicas have of their own.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { type KubeObject, nameOf } from "../src/kube/object.ts";
import { CLUSTER_PROFILE_NAMESPACE, clusterProfileStatus, SANDBOX_ENV } from "../test/sandbox/index.ts";
import { readSandbox, setSpokesNiceness } from "../test/sandbox/sandbox.ts";
import {
  clustersIn,
  ownershipViolations,
  type ReplicaSample,
  type WaveCr,
  waveViolation,
} from "../test/soak/checks.ts";
import { imageRuntime } from "../test/support/dockerfile.ts";
import { placementText } from "../test/support/fleet-files.ts";
import { startFleetProcess } from "../test/support/fleet-service.ts";
import { startGitServer } from "../test/support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds, replicaPod } from "../test/support/hub.ts";
import { cpuSeconds as processCpuSeconds, type ServiceProcess } from "../test/support/service-process.ts";
import { conditionsOf, dropHubCrs, FLEET_NAMESPACE } from "../test/support/serving-fleet.ts";
import { repoRoot } from "../test/support/shared.ts";
import { cleanSpokes } from "../test/support/spokes.ts";

const clusterCount = Number(process.argv[2] ?? 1000);
const replicaCount = Number(process.argv[3] ?? 3);
const workers = Number(process.argv[4] ?? 4);
const REPO = "bench-fleet";
const GROUP = "bench-fleet-shards";
const LABEL = { "bench.knative-fleet.dev/fleet": "big" };
const PROFILE_API = "multicluster.x-k8s.io/v1alpha1";
const MiB = 1024 * 1024;
const IDLE_SECONDS = 90;
const SAMPLE_MS = 2_000;
const OWNERSHIP_SKEW_MS = 1_500;
const SPOKE_NICENESS = Number(process.env.BENCH_SPOKE_NICE ?? 10);

const stateDir = process.env[SANDBOX_ENV];
const sandbox = stateDir ? readSandbox(stateDir) : undefined;
if (!sandbox) throw new Error(`${SANDBOX_ENV} must name a running sandbox's state dir`);
const hub = adminClient(sandbox.hub);
const scratch = mkdtempSync(join(tmpdir(), "bench-fleet-"));
const runtime = imageRuntime(mkdtempSync(join(tmpdir(), "bench-fleet-image-")));
const log = (line: string) => process.stderr.write(`bench-fleet: ${line}\n`);

/** A listener that takes every connection and never answers: a spoke behind a black hole. */
async function blackHole(): Promise<{ port: number; close(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A port nothing listens on: a spoke that refuses the connection. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

type Reach = "reachable" | "black-holed" | "refused" | "no-credentials";

/** The fleet's ClusterProfiles: the sandbox's spokes labelled into it, and the unreachable rest created. */
async function putProfiles(blackHolePort: number, refusedPort: number): Promise<Map<string, Reach>> {
  const reach = new Map<string, Reach>();
  for (const spoke of sandbox!.spokes) {
    await hub.mergePatch(PROFILE_API, "ClusterProfile", CLUSTER_PROFILE_NAMESPACE, spoke.name, {
      metadata: { labels: LABEL },
    });
    reach.set(spoke.name, "reachable");
  }
  const template = sandbox!.spokes[0]!;
  const far = clusterCount - sandbox!.spokes.length;
  const kinds: Reach[] = ["black-holed", "refused", "no-credentials"];
  const names = Array.from({ length: far }, (_, i) => `far-${String(i + 1).padStart(4, "0")}`);
  await inBatches(names, 16, async (name, i) => {
    const kind = kinds[i % kinds.length]!;
    const port = kind === "black-holed" ? blackHolePort : refusedPort;
    if (kind !== "no-credentials") {
      await hub.apply({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name, namespace: CLUSTER_PROFILE_NAMESPACE },
        type: "Opaque",
        stringData: { token: "bench-fleet" },
      } as KubeObject);
    }
    await hub.apply({
      apiVersion: PROFILE_API,
      kind: "ClusterProfile",
      metadata: { name, namespace: CLUSTER_PROFILE_NAMESPACE, labels: LABEL },
      spec: { displayName: name, clusterManager: { name: "bench-fleet" } },
    } as KubeObject);
    await hub.apply(
      {
        apiVersion: PROFILE_API,
        kind: "ClusterProfile",
        metadata: { name, namespace: CLUSTER_PROFILE_NAMESPACE },
        status: clusterProfileStatus({ ...template, name, server: `https://127.0.0.1:${port}` }),
      } as KubeObject,
      { subresource: "status" },
    );
    reach.set(name, kind);
  });
  return reach;
}

async function inBatches<T>(items: readonly T[], size: number, each: (item: T, i: number) => Promise<void>) {
  for (let start = 0; start < items.length; start += size) {
    await Promise.all(items.slice(start, start + size).map((item, j) => each(item, start + j)));
  }
}

/** The request counter of scripts/bench-scale-counter.ts, its types stripped (see bench-scale.ts). */
function counterModule(): string {
  const file = join(scratch, "bench-scale-counter.mjs");
  const source = readFileSync(join(repoRoot, "scripts", "bench-scale-counter.ts"), "utf8");
  writeFileSync(file, stripTypeScriptTypes(source));
  return file;
}

interface Replica {
  name: string;
  process: ServiceProcess;
  /** The request counts of each process it ran. */
  countFiles: string[];
  /** Started again after it exited (as its Deployment would); off for the one killed on purpose. */
  supervised: boolean;
  restarts: number;
  /** CPU seconds of its processes so far, read from /proc each sample (a process that exited keeps its last). */
  cpuByPid: Map<number, number>;
}

async function startReplica(name: string, repositoryUrl: string, counter: string): Promise<Replica> {
  const countsFile = (n: number) => join(scratch, `${name}-${n}-requests.json`);
  const replica: Replica = {
    name,
    process: await startReplicaProcess(name, repositoryUrl, counter, countsFile(0)),
    countFiles: [countsFile(0)],
    supervised: true,
    restarts: 0,
    cpuByPid: new Map(),
  };
  const supervise = async (): Promise<void> => {
    const exit = await replica.process.exited;
    if (!replica.supervised) return;
    log(`${name} exited (${JSON.stringify(exit)}); starting it again`);
    replica.restarts++;
    replica.countFiles.push(countsFile(replica.restarts));
    replica.process = await startReplicaProcess(name, repositoryUrl, counter, countsFile(replica.restarts));
    void supervise();
  };
  void supervise();
  return replica;
}

async function startReplicaProcess(name: string, repositoryUrl: string, counter: string, counts: string) {
  const pod = await replicaPod(hub, GROUP, name);
  return startFleetProcess({
    sandbox: sandbox!,
    service: {
      repositoryUrl,
      statusInterval: "30s",
      leaderElection: { leaseName: GROUP, namespace: GROUP },
    },
    config: { logLevel: "info", workers, workersPerCluster: 1, sharding: { enabled: true } },
    scratch,
    name,
    entry: join(repoRoot, "dist", "cli.js"),
    nodeArgs: [
      ...runtime.nodeArgs,
      ...(process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
    ],
    env: {
      ...runtime.env,
      POD_NAME: name,
      POD_UID: String(pod.metadata.uid),
      NODE_OPTIONS: [runtime.env.NODE_OPTIONS, `--import=${counter}`].filter(Boolean).join(" "),
      BENCH_REQUEST_COUNTS: counts,
      BENCH_REST_MODULE: pathToFileURL(join(repoRoot, "dist", "kube", "rest.js")).href,
    },
  });
}

/** Hub and spoke requests a replica's processes sent so far (reads = GET). */
function requestsOf(replica: Replica) {
  const out = { hubReads: 0, hubWrites: 0, spokeReads: 0, spokeWrites: 0 };
  for (const file of replica.countFiles) {
    let byServer: Record<string, Record<string, number>> = {};
    try {
      byServer = JSON.parse(readFileSync(file, "utf8"));
    } catch {
      // not written yet
    }
    for (const [server, methods] of Object.entries(byServer)) {
      for (const [method, n] of Object.entries(methods)) {
        const key = `${server === sandbox!.hub.server ? "hub" : "spoke"}${method === "GET" ? "Reads" : "Writes"}`;
        out[key as keyof typeof out] += n;
      }
    }
  }
  return out;
}

function procStatusMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status)?.[1]) / 1024;
  } catch {
    return Number.NaN; // exited
  }
}

/** CPU seconds of every process the replica ran (the running one read now). */
function cpuSeconds(replica: Replica): number {
  const pid = replica.process.pid;
  try {
    replica.cpuByPid.set(pid, processCpuSeconds(pid));
  } catch {
    // exited: its last reading stands
  }
  return [...replica.cpuByPid.values()].reduce((a, b) => a + b, 0);
}

/** Per cluster, a replica's reconciles so far (from its /metrics). */
async function reconcilesOf(replica: Replica): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  const { status, body } = await replica.process.get("/metrics").catch(() => ({ status: 0, body: "" }));
  if (status !== 200) return totals;
  for (const m of body.matchAll(/^knative_fleet_reconcile_duration_seconds_count\{([^}]*)\} (\S+)/gm)) {
    const cluster = /cluster="([^"]*)"/.exec(m[1]!)?.[1];
    if (cluster) totals.set(cluster, (totals.get(cluster) ?? 0) + Number(m[2]));
  }
  return totals;
}
const hubCrs = async () =>
  (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: FLEET_NAMESPACE })).items;
const clusterOf = (cr: KubeObject) =>
  ((cr.spec as { clusterProfileRef?: { name?: string } }).clusterProfileRef?.name ?? "") as string;
const isReady = (cr: KubeObject) => conditionsOf(cr).some((c) => c.type === "Ready" && c.status === "True");
const specVersion = (cr: KubeObject) => String((cr.spec as { version?: unknown }).version ?? "");
const statusVersion = (cr: KubeObject) =>
  String((cr.status as { version?: unknown } | undefined)?.version ?? "");
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const f = (x: number, digits = 1) => x.toFixed(digits);
const spread = (xs: number[]) =>
  xs.length === 0 ? "-" : `${f(Math.min(...xs))} / ${f(median(xs))} / ${f(Math.max(...xs))}`;

/** The soak's invariants, checked on every sample of the run. */
class Invariants {
  ownershipSamples = 0;
  crSamples = 0;
  wavesChecked = 0;
  readonly violations: string[] = [];
  /** Once every CR was on the hub: a declared CR gone or being deleted is a prune of what is declared. */
  declared: Set<string> | undefined;

  replicas(samples: ReplicaSample[]): void {
    this.ownershipSamples++;
    for (const found of ownershipViolations(samples, OWNERSHIP_SKEW_MS))
      this.violations.push(`${found.invariant}: ${found.evidence}`);
  }

  crs(crs: KubeObject[]): void {
    this.crSamples++;
    if (!this.declared) return;
    const present = new Map(crs.map((cr) => [nameOf(cr), cr]));
    for (const name of this.declared) {
      const cr = present.get(name);
      if (!cr) this.violations.push(`declared-never-pruned: ${name} is gone from the hub`);
      else if (cr.metadata.deletionTimestamp)
        this.violations.push(`declared-never-pruned: ${name} is being deleted`);
    }
  }
}
const invariants = new Invariants();

/** Every replica's /metrics (ownership) and CPU, every SAMPLE_MS while `sampling`. */
async function sampleReplicas(replicas: Replica[], until: { stop: boolean }): Promise<void> {
  while (!until.stop) {
    const samples: ReplicaSample[] = [];
    await Promise.all(
      replicas.map(async (replica) => {
        cpuSeconds(replica);
        const process = replica.process;
        if (!process.running) return;
        const { status, body } = await process.get("/metrics").catch(() => ({ status: 0, body: "" }));
        if (status !== 200) return;
        samples.push({
          replica: `${replica.name} (pid ${process.pid})`,
          at: Date.now(),
          leader: /^knative_fleet_leader 1$/m.test(body),
          clusters: clustersIn(body),
        });
      }),
    );
    invariants.replicas(samples);
    await sleep(SAMPLE_MS);
  }
}

/**
 * The wave check of the upgrade: each CR seen with the new version is checked against its wave's. A CR's
 * baseline is `from` when it was healthy on it as the policy arrived (`healthyAtStart`), and none otherwise:
 * the gate records a baseline only for a healthy CR, so one never healthy (an unreachable cluster) counts
 * as changed and unhealthy from the start and takes new content in its own place (docs/rollout.md, 2).
 */
class WaveWatch {
  readonly #tracks = new Map<string, WaveCr & { cluster: string }>();
  readonly releasedAt = new Map<string, number>();
  readonly #started = performance.now();
  readonly from: string;
  readonly healthyAtStart: ReadonlySet<string>;
  readonly waveOf: (cluster: string) => string;
  readonly maxUnavailableOf: (wave: string) => number;
  readonly order: readonly string[];
  constructor(
    from: string,
    healthyAtStart: ReadonlySet<string>,
    waveOf: (cluster: string) => string,
    maxUnavailableOf: (wave: string) => number,
    order: readonly string[],
  ) {
    this.from = from;
    this.healthyAtStart = healthyAtStart;
    this.waveOf = waveOf;
    this.maxUnavailableOf = maxUnavailableOf;
    this.order = order;
  }

  observe(crs: KubeObject[]): void {
    const now = Date.now();
    const fresh: string[] = [];
    for (const cr of crs) {
      const key = nameOf(cr);
      const cluster = clusterOf(cr);
      const hash = specVersion(cr);
      const healthy = isReady(cr) && (hash === this.from || statusVersion(cr).startsWith(`${hash}.`));
      const track = this.#tracks.get(key) ?? {
        key,
        cluster,
        wave: this.waveOf(cluster),
        hash,
        baseline: this.healthyAtStart.has(key) ? this.from : undefined,
        healthy,
        member: true,
        unhealthySince: undefined,
        changedAt: undefined,
      };
      if (track.hash !== hash || (!this.#tracks.has(key) && hash !== this.from)) {
        track.changedAt = now;
        track.wasUnavailable = track.hash !== track.baseline && !track.healthy;
        fresh.push(key);
        this.releasedAt.set(cluster, (performance.now() - this.#started) / 1000);
      }
      if (!healthy && track.healthy) track.unhealthySince = now;
      if (healthy) track.unhealthySince = undefined;
      track.unhealthySince ??= healthy ? undefined : now;
      Object.assign(track, { hash, healthy });
      this.#tracks.set(key, track);
    }
    const all = [...this.#tracks.values()];
    for (const key of fresh) {
      const letThrough = this.#tracks.get(key)!;
      invariants.wavesChecked++;
      const evidence = waveViolation(
        letThrough,
        all,
        this.maxUnavailableOf(letThrough.wave),
        now,
        SAMPLE_MS * 2,
      );
      if (evidence) invariants.violations.push(`waves-within-max-unavailable: ${evidence}`);
      // Waves in order: nothing of a later wave changes before every CR of the earlier ones is done.
      const rank = this.order.indexOf(letThrough.wave);
      const behind = all.filter(
        (cr) => this.order.indexOf(cr.wave) < rank && (cr.hash === this.from || !cr.healthy),
      );
      if (behind.length > 0)
        invariants.violations.push(
          `waves-in-order: ${key} (wave ${letThrough.wave}) changed while ${behind.length} CRs of earlier waves were not done (${behind
            .slice(0, 3)
            .map((cr) => cr.key)
            .join(", ")})`,
        );
    }
  }
}

// Set up: a clean hub and spokes, the profiles, the group's namespace, a fleet repository.
await installFleetCrds(hub);
await ensureNamespace(hub, FLEET_NAMESPACE);
await ensureNamespace(hub, GROUP);
// What the chart's Deployment gives each replica: a Pod named POD_NAME, running as its ServiceAccount.
await hub.apply({
  apiVersion: "v1",
  kind: "ServiceAccount",
  metadata: { name: "knative-fleet", namespace: GROUP },
} as KubeObject);
await dropHubCrs(hub);
await cleanSpokes(
  sandbox,
  sandbox.spokes.map((s) => s.name),
);
setSpokesNiceness(sandbox.stateDir, SPOKE_NICENESS);
const hole = await blackHole();
const refused = await closedPort();
const profilesStarted = performance.now();
const reach = await putProfiles(hole.port, refused);
log(`${reach.size} ClusterProfiles in ${f((performance.now() - profilesStarted) / 1000)} s`);
const reachable = [...reach].filter(([, r]) => r === "reachable").map(([name]) => name);

const git = await startGitServer();
await git.createRepo(REPO, { "README.md": "bench-fleet\n" });
const counter = counterModule();
const replicas: Replica[] = [];
const sampling = { stop: false };
let samplingDone: Promise<void> = Promise.resolve();
const placement = (version: string) =>
  placementText({
    name: "big",
    spec: {
      clusterSelectorTerms: [{ labelSelector: { matchLabels: LABEL } }],
      template: {
        spec: {
          version,
          ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
          config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" } },
        },
      },
    },
  });
// The upgrade's waves: a canary, the reachable clusters in two waves, the unreachable rest last (remaining).
const canary = reachable.slice(0, 1);
const early = reachable.slice(1, 1 + Math.floor((reachable.length - 1) / 2));
const late = reachable.slice(1 + early.length);
const waveClusters: Record<string, string[]> = { canary, early, late };
const WAVE_MAX_UNAVAILABLE: Record<string, number> = {
  canary: 1,
  early: Math.max(2, Math.floor(early.length / 4)),
  late: Math.max(1, Math.floor(late.length / 4)),
  remaining: Math.max(1, Math.floor((clusterCount - reachable.length) / 4)),
};
const waveOf = (cluster: string) =>
  Object.entries(waveClusters).find(([, names]) => names.includes(cluster))?.[0] ?? "remaining";
const byName = (names: string[]) => names.map((name) => ({ namespace: CLUSTER_PROFILE_NAMESPACE, name }));
const policy = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata:
  name: big
spec:
  waves:
${Object.entries(waveClusters)
  .map(
    ([name, names]) =>
      `    - name: ${name}\n      maxUnavailable: ${WAVE_MAX_UNAVAILABLE[name]}\n      clusterProfiles: ${JSON.stringify(byName(names))}`,
  )
  .join("\n")}
  maxUnavailable: 25%
  soak: 10s
  timeLimit: 30m
  onFailure: Halt
`;

try {
  for (let i = 0; i < replicaCount; i++)
    replicas.push(await startReplica(`bench-fleet-${i + 1}`, git.url(REPO), counter));
  for (const r of replicas) {
    while ((await r.process.get("/readyz").catch(() => ({ status: 0 }))).status !== 200) await sleep(500);
  }
  samplingDone = sampleReplicas(replicas, sampling);
  await sleep(20_000); // the members agree on one view (a replica takes its share ~15 s after it starts)
  const start = replicas.map((r) => ({ cpu: cpuSeconds(r), requests: requestsOf(r) }));

  // ── Install: one placement over every cluster, no rollout policy ──────────────────────────────────────
  const pushedAt = performance.now();
  await git.pushChange(REPO, {
    files: { "clusters/placements/big.yaml": placement("1.22") },
    message: "one placement, every cluster",
  });
  const seconds = () => (performance.now() - pushedAt) / 1000;
  let mirroredS: number | undefined;
  const readyAt = new Map<string, number>();
  while (readyAt.size < reachable.length) {
    if (seconds() > 30 * 60) throw new Error(`${readyAt.size} of ${reachable.length} Ready after 30 minutes`);
    const crs = await hubCrs();
    if (mirroredS === undefined && crs.length >= clusterCount) {
      mirroredS = seconds();
      invariants.declared = new Set(crs.map(nameOf));
    }
    invariants.crs(crs);
    for (const cr of crs) {
      const cluster = clusterOf(cr);
      if (reach.get(cluster) === "reachable" && !readyAt.has(cluster) && isReady(cr))
        readyAt.set(cluster, seconds());
    }
    await sleep(SAMPLE_MS);
  }
  const installS = seconds();
  const afterInstall = replicas.map((r) => ({ cpu: cpuSeconds(r), requests: requestsOf(r) }));
  log(`every reachable CR Ready after ${f(installS)} s; ${IDLE_SECONDS} s at rest`);

  // ── At rest ────────────────────────────────────────────────────────────────────────────────────────────
  const restUntil = performance.now() + IDLE_SECONDS * 1000;
  while (performance.now() < restUntil) {
    invariants.crs(await hubCrs());
    await sleep(SAMPLE_MS);
  }
  const afterIdle = replicas.map((r) => ({ cpu: cpuSeconds(r), requests: requestsOf(r) }));
  const atRest = await hubCrs();
  const notReady = new Map<string, number>();
  for (const cr of atRest) {
    if (isReady(cr)) continue;
    const ready = conditionsOf(cr).find((c) => c.type === "Ready") as { reason?: string } | undefined;
    const why = ready?.reason ?? "no Ready condition";
    notReady.set(why, (notReady.get(why) ?? 0) + 1);
  }

  // ── Upgrade 1.22 -> 1.23 through the waves ─────────────────────────────────────────────────────────────
  await git.pushChange(REPO, { files: { "clusters/rollout.yaml": policy }, message: "rollout in waves" });
  await sleep(15_000); // the policy's first sync records the fleet as it is: nothing to roll
  const healthyAtStart = new Set(atRest.filter(isReady).map(nameOf));
  const waves = new WaveWatch("1.22", healthyAtStart, waveOf, (wave) => WAVE_MAX_UNAVAILABLE[wave]!, [
    "canary",
    "early",
    "late",
    "remaining",
  ]);
  const upgradeAt = performance.now();
  await git.pushChange(REPO, {
    files: { "clusters/placements/big.yaml": placement("1.23") },
    message: "Knative 1.23",
  });
  const upgradedAt = new Map<string, number>();
  while (upgradedAt.size < reachable.length) {
    const s = (performance.now() - upgradeAt) / 1000;
    if (s > 30 * 60) throw new Error(`${upgradedAt.size} of ${reachable.length} on 1.23 after 30 minutes`);
    const crs = await hubCrs();
    invariants.crs(crs);
    waves.observe(crs);
    for (const cr of crs) {
      const cluster = clusterOf(cr);
      if (
        reach.get(cluster) === "reachable" &&
        !upgradedAt.has(cluster) &&
        isReady(cr) &&
        statusVersion(cr).startsWith("1.23.")
      )
        upgradedAt.set(cluster, s);
    }
    await sleep(SAMPLE_MS);
  }
  const upgradeS = (performance.now() - upgradeAt) / 1000;
  // The unreachable rest: the remaining wave opens, lets its maxUnavailable through, and waits on them.
  const remainingUntil = performance.now() + 30_000;
  while (performance.now() < remainingUntil) {
    const crs = await hubCrs();
    invariants.crs(crs);
    waves.observe(crs);
    await sleep(SAMPLE_MS);
  }
  const afterUpgrade = replicas.map((r) => ({ cpu: cpuSeconds(r), requests: requestsOf(r) }));
  const crs = await hubCrs();
  const released = crs.filter((cr) => specVersion(cr) === "1.23");
  const remainingReleased = released.filter((cr) => waveOf(clusterOf(cr)) === "remaining").length;

  // ── Sizes ──────────────────────────────────────────────────────────────────────────────────────────────
  const events = (await hub.list("v1", "Event", { namespace: FLEET_NAMESPACE })).items;
  const configMaps = (await hub.list("v1", "ConfigMap", { namespace: FLEET_NAMESPACE })).items.filter((c) =>
    nameOf(c).startsWith("knative-fleet"),
  );
  const leases = (await hub.list("coordination.k8s.io/v1", "Lease", { namespace: GROUP })).items;
  const statusReadme = await git.readFile(REPO, "main", "status/README.md").catch(() => "");
  const statusFleet = await git.readFile(REPO, "main", "status/fleet.yaml").catch(() => "");

  // ── A replica killed: the time until the survivors reconciled every reachable cluster it owned ─────────
  const victim = replicas[0]!;
  victim.supervised = false;
  const before = await Promise.all(replicas.map(reconcilesOf));
  // A survivor that restarts meanwhile counts from zero: any reconcile of its new process is a take-over.
  const pidsBefore = replicas.map((r) => r.process.pid);
  const owned = reachable.filter((c) => (before[0]!.get(`${CLUSTER_PROFILE_NAMESPACE}/${c}`) ?? 0) > 0);
  const killedAt = performance.now();
  victim.process.kill("SIGKILL");
  const survivors = replicas.slice(1);
  let takenS: number | undefined;
  while (owned.length > 0 && (performance.now() - killedAt) / 1000 < 300) {
    invariants.crs(await hubCrs());
    const now = await Promise.all(survivors.map(reconcilesOf));
    const taken = owned.every((c) =>
      now.some(
        (m, i) =>
          (m.get(`${CLUSTER_PROFILE_NAMESPACE}/${c}`) ?? 0) >
          (survivors[i]!.process.pid === pidsBefore[i + 1]
            ? (before[i + 1]!.get(`${CLUSTER_PROFILE_NAMESPACE}/${c}`) ?? 0)
            : 0),
      ),
    );
    if (taken) {
      takenS = (performance.now() - killedAt) / 1000;
      break;
    }
    await sleep(500);
  }
  sampling.stop = true;
  await samplingDone;

  // ── Report ─────────────────────────────────────────────────────────────────────────────────────────────
  const counts = [...reach.values()].reduce(
    (m, r) => m.set(r, (m.get(r) ?? 0) + 1),
    new Map<Reach, number>(),
  );
  const times = [...readyAt.values()];
  console.log(
    `\n${clusterCount} ClusterProfiles (${[...counts].map(([r, n]) => `${n} ${r}`).join(", ")}), one placement over all, ` +
      `${replicaCount} replicas sharding, ${workers} workers each; Serving 1.22 + Kourier, then 1.23 in waves`,
  );
  console.log(
    "\n| push -> every CR on the hub | reachable Ready: first / median / all (s) | not Ready at rest, by reason |",
  );
  console.log("|---|---|---|");
  console.log(
    `| ${mirroredS === undefined ? "-" : f(mirroredS)} s | ${spread(times)} | ${[...notReady].map(([why, n]) => `${n} ${why}`).join(", ")} |`,
  );
  const waveTimes = (wave: string) =>
    waveClusters[wave]!.map((c) => upgradedAt.get(c)).filter((t): t is number => t !== undefined);
  console.log(
    `\nUpgrade 1.22 -> 1.23: every reachable cluster on 1.23 and Ready ${f(upgradeS)} s after the push; ` +
      `on 1.23 (s after the push, first / median / all): canary ${spread(waveTimes("canary"))}, ` +
      `early ${spread(waveTimes("early"))}, late ${spread(waveTimes("late"))}; ` +
      `the remaining wave let ${remainingReleased} of ${clusterCount - reachable.length} unreachable CRs through (maxUnavailable ${WAVE_MAX_UNAVAILABLE.remaining})`,
  );
  console.log(
    "\n| replica | restarts | clusters reconciled | CPU install (s) | CPU at rest | CPU upgrade (s) | hub req/min at rest (r/w) | spoke req/min at rest (r/w) | RSS at rest / peak (MiB) |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const [i, r] of replicas.entries()) {
    const rest = afterIdle[i]!.requests;
    const installed = afterInstall[i]!.requests;
    const perMin = (a: number, b: number) => f(((a - b) * 60) / IDLE_SECONDS);
    console.log(
      `| ${r.name} | ${r.restarts} | ${before[i]!.size} | ${f(afterInstall[i]!.cpu - start[i]!.cpu)} | ` +
        `${f(((afterIdle[i]!.cpu - afterInstall[i]!.cpu) / IDLE_SECONDS) * 100)} % | ${f(afterUpgrade[i]!.cpu - afterIdle[i]!.cpu)} | ` +
        `${perMin(rest.hubReads, installed.hubReads)} / ${perMin(rest.hubWrites, installed.hubWrites)} | ` +
        `${perMin(rest.spokeReads, installed.spokeReads)} / ${perMin(rest.spokeWrites, installed.spokeWrites)} | ` +
        `${r === victim ? "killed" : f(procStatusMiB(r.process.pid, "VmRSS"), 0)} / ${r === victim ? "-" : f(procStatusMiB(r.process.pid, "VmHWM"), 0)} |`,
    );
  }
  const bytes = (o: KubeObject) => Buffer.byteLength(JSON.stringify(o));
  console.log(
    `\nHub: ${crs.length} KnativeServing CRs (${f(crs.reduce((s, c) => s + bytes(c), 0) / MiB)} MiB); ` +
      `${events.length} Events (${f(events.reduce((s, e) => s + bytes(e), 0) / 1024, 0)} KiB); ` +
      `${leases.length} Leases; ConfigMaps ${configMaps.map((c) => `${nameOf(c)} ${f(bytes(c) / 1024, 0)} KiB`).join(", ")}. ` +
      `Repository: status/README.md ${f(Buffer.byteLength(statusReadme) / 1024, 0)} KiB, status/fleet.yaml ${f(Buffer.byteLength(statusFleet) / 1024, 0)} KiB`,
  );
  console.log(
    `${victim.name} killed (it had reconciled ${owned.length} reachable clusters): ` +
      `${takenS === undefined ? "not all taken over within 300 s" : `every one reconciled by a survivor ${f(takenS)} s later`}`,
  );
  console.log(
    `Invariants: ${invariants.ownershipSamples} ownership samples, ${invariants.crSamples} samples of the hub's CRs, ` +
      `${invariants.wavesChecked} CRs let through checked against their wave: ` +
      `${invariants.violations.length === 0 ? "no violation" : `${invariants.violations.length} violations:\n${invariants.violations.slice(0, 20).join("\n")}`}`,
  );
  if (invariants.violations.length > 0) process.exitCode = 1;
} finally {
  sampling.stop = true;
  for (const r of replicas) {
    r.supervised = false;
    await r.process.stop().catch(() => {});
  }
  await dropHubCrs(hub).catch(() => {});
  await git.close();
  hole.close();
  // The unreachable profiles go again: the sandbox serves other benches and tests after this one.
  await inBatches(
    [...reach].filter(([, r]) => r !== "reachable").map(([name]) => name),
    16,
    async (name) => {
      await hub.delete(PROFILE_API, "ClusterProfile", CLUSTER_PROFILE_NAMESPACE, name).catch(() => {});
      await hub.delete("v1", "Secret", CLUSTER_PROFILE_NAMESPACE, name).catch(() => {});
    },
  );
  await hub.delete("v1", "Namespace", undefined, GROUP).catch(() => {});
  setSpokesNiceness(sandbox.stateDir, 0);
}
