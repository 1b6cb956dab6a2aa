// Measures one install of the 2-CR workload on a sandbox hub + 2 spokes, side by side: knative-fleet (the
// real `knative-fleet run` process, the built CLI with the image's node flags) and the upstream Knative
// Operator (../shared/reference/knative-operator, its multicluster feature), each from clean spokes, the other
// one stopped and its installs removed first. Workload: KnativeServing 1.22 + Kourier on spoke-1 and
// KnativeEventing 1.22 on spoke-2; knative-fleet reads them from a fleet repository served by a real git
// server, the upstream operator gets the same CRs on the hub (in the spoke's install namespace: this upstream
// build installs into the CR's namespace). Both reach the spokes through the same ClusterProfiles, which
// name a counting reverse proxy in front of each spoke apiserver. Prints per implementation and CR:
// create -> Ready beside the spoke's own rollout (its last Deployment Available), the spoke requests until
// both CRs are Ready and in an idle window after, the controller's RSS (/proc) at start and peak; for
// knative-fleet also the step timeline from its debug log; then a table of both.
// Usage: [KNATIVE_FLEET_SANDBOX=<state dir>] node scripts/bench-perf.ts [--only knative-fleet|upstream]
//        [--idle-seconds 120] [--poll-interval 1s] [--keep] [--entry dist|src|<cli script>]
//        [--node-args="<more node flags>"] [--scale 1,5,10,20]
// --scale then runs scripts/bench-scale.ts on the same sandbox in the same run, for the 1/5/10/20-spoke
// table (its own process, so the two benches keep one home each); a sandbox this bench starts itself then
// has that many light spokes (test/sandbox/sandbox.ts LIGHT_SPOKE_CONTROLLERS), the side by side runs on two of them;
// --keep does not apply then (bench-scale starts from cleared spokes).
// --entry dist (the default) runs the built CLI (npm run build) as the image does: the node flags of the
// Dockerfile's ENTRYPOINT, the environment of its runtime stage, releases compiled by compile-kodata; src runs src/cli.ts; a path runs that CLI script
// (another checkout, for a before/after comparison). --poll-interval is both implementations'
// --remote-deployments-poll-interval.
// Without KNATIVE_FLEET_SANDBOX a fresh sandbox is started in a temp dir and stopped at the end; with it the
// spokes are cleared of earlier installs of the workload first. --keep leaves the last installs in place.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { parse, stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { isDeploymentAvailable } from "../src/install/health.ts";
import { Informer } from "../src/kube/informer.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { down, readSandbox, type Sandbox, up } from "../test/sandbox/sandbox.ts";
import { builtCli, imageRuntime } from "../test/support/dockerfile.ts";
import { writeServiceConfig } from "../test/support/fleet-service.ts";
import { startGitServer } from "../test/support/git-server.ts";
import { forceDeleteCrs, KOURIER, startUpstream } from "../test/support/handover.ts";
import { adminClient, countingProxyOf, ensureNamespace, installFleetCrds } from "../test/support/hub.ts";
import type { LoopbackProxy } from "../test/support/loopback-proxies.ts";
import {
  nextMetricsPort,
  peakRssKiB,
  ServiceProcess,
  sampleValue,
  serviceEnv,
} from "../test/support/service-process.ts";
import { repoRoot } from "../test/support/shared.ts";
import { clearKnative } from "../test/support/spokes.ts";
import { prepareUpstreamHub } from "../test/support/upstream-operator.ts";
import { waitUntil } from "../test/support/wait.ts";

const SIDES = ["upstream", "knative-fleet"] as const;
type Side = (typeof SIDES)[number];

const { values } = parseArgs({
  options: {
    only: { type: "string" },
    "idle-seconds": { type: "string", default: "120" },
    "poll-interval": { type: "string", default: "1s" },
    keep: { type: "boolean", default: false },
    entry: { type: "string", default: "dist" },
    "node-args": { type: "string", default: "" },
    scale: { type: "string" },
  },
});
const idleSeconds = Number(values["idle-seconds"]);
if (values.only !== undefined && !SIDES.includes(values.only as Side))
  fail(`--only takes ${SIDES.join(" or ")}, not ${values.only}`);
const sides: readonly Side[] = values.only ? [values.only as Side] : SIDES;

const FLEET_NAMESPACE = "knative-fleet";
/** The bench's own ClusterProfiles: the sandbox's, but naming the counting proxy as the server. */
const PROFILE_NAMESPACE = "bench-perf";
const REPO = "fleet";

const fleetEntry =
  values.entry === "dist"
    ? (() => {
        try {
          return builtCli();
        } catch (err) {
          return fail((err as Error).message);
        }
      })()
    : values.entry === "src"
      ? join(repoRoot, "src", "cli.ts")
      : values.entry!;
// dist/cli.js runs as the image runs it (test/support/dockerfile.ts: the Dockerfile's node flags and
// environment, releases compiled at build time); --node-args adds flags.
const fleetScratch = mkdtempSync(join(tmpdir(), "bench-perf-"));
const image = values.entry === "dist" ? imageRuntime(fleetScratch) : { nodeArgs: [], env: {} };
const fleetNodeArgs = [...image.nodeArgs, ...values["node-args"]!.split(" ").filter((a) => a !== "")];

const scaleCounts = values.scale?.split(",").map(Number);
if (scaleCounts?.some((n) => !Number.isInteger(n) || n < 1))
  fail(`--scale takes spoke counts such as 1,5,10,20, not ${values.scale}`);
const spokesNeeded = Math.max(2, ...(scaleCounts ?? []));

const stateDir = process.env[SANDBOX_ENV];
const ownSandbox = stateDir === undefined;
const sandbox: Sandbox = ownSandbox
  ? await up({
      stateDir: mkdtempSync(join(tmpdir(), "bench-perf-sandbox-")),
      spokes: spokesNeeded,
      spokeKind: scaleCounts === undefined ? "full" : "light",
    })
  : (readSandbox(stateDir) ?? fail(`no sandbox in ${stateDir}`));
if (sandbox.spokes.length < spokesNeeded)
  fail(`the sandbox needs ${spokesNeeded} spokes (npm run sandbox -- up --spokes ${spokesNeeded} --light)`);
const spokes = sandbox.spokes.slice(0, 2);

const WORKLOAD = [
  { kind: "KnativeServing", name: "serving", spoke: spokes[0]!, namespace: "knative-serving", spec: KOURIER },
  { kind: "KnativeEventing", name: "eventing", spoke: spokes[1]!, namespace: "knative-eventing", spec: {} },
] as const;
type Cr = (typeof WORKLOAD)[number];

const hub = adminClient(sandbox.hub);
const spokeClients = new Map(spokes.map((s) => [s.name, adminClient(s)]));
await installFleetCrds(hub);
for (const ns of [FLEET_NAMESPACE, PROFILE_NAMESPACE, ...WORKLOAD.map((w) => w.namespace)])
  await ensureNamespace(hub, ns);
if (sides.includes("upstream")) await prepareUpstreamHub(hub);

// A reverse proxy per spoke, counting what reaches the spoke's apiserver (the measured controller's only).
const proxies = new Map<string, LoopbackProxy>();
for (const spoke of spokes)
  proxies.set(spoke.name, await countingProxyOf(hub, sandbox, spoke, PROFILE_NAMESPACE));

const git = await startGitServer();
await git.createRepo(REPO, { "README.md": "bench-perf fleet\n" });

/** The spec of a workload CR, whoever reconciles it. */
const crSpec = (w: Cr) => ({
  version: "1.22",
  ...w.spec,
  clusterProfileRef: { namespace: PROFILE_NAMESPACE, name: w.spoke.name },
});

/** The controller under measurement: a child process, observed from outside. */
interface Controller {
  readonly label: string;
  /** Where its hub CRs live. */
  crNamespace(w: Cr): string;
  start(): Promise<{
    pid: number;
    rssKiB(): number;
    peakRssKiB(): number;
    stop(): Promise<unknown>;
    logTail(): string;
  }>;
  /** Creates the workload's hub CRs. */
  create(): Promise<void>;
}

const controllers: Record<Side, Controller> = {
  "knative-fleet": {
    label: `knative-fleet run (node ${[...fleetNodeArgs, values.entry === "dist" ? "dist/cli.js" : fleetEntry].join(" ")}${Object.entries(
      image.env,
    )
      .map(([k, v]) => `, ${k}=${v}`)
      .join("")})`,
    crNamespace: () => FLEET_NAMESPACE,
    async start() {
      const scratch = fleetScratch;
      const configPath = writeServiceConfig({ repositoryUrl: git.url(REPO), namespace: FLEET_NAMESPACE });
      const metricsPort = nextMetricsPort();
      writeFileSync(
        configPath,
        stringify({
          ...(parse(readFileSync(configPath, "utf8")) as object),
          allowedClusterProfileNamespaces: [PROFILE_NAMESPACE],
          remoteDeploymentsPollInterval: values["poll-interval"],
          logLevel: "debug",
          metricsPort,
        }),
      );
      const service = new ServiceProcess({
        args: ["run", "--config", configPath, "--clusterprofile-provider-file", sandbox.providerFile],
        env: { ...serviceEnv(sandbox.hub.adminKubeconfig, scratch), ...image.env },
        metricsPort,
        logFile: join(scratch, "knative-fleet.log"),
        entry: fleetEntry,
        nodeArgs: fleetNodeArgs,
      });
      fleetService = service;
      await service.ready().catch((err: Error) => fail(err.message));
      await sleep(3_000); // settle: the first fleet poll has run (an empty fleet)
      return service;
    },
    async create() {
      await git.pushChange(REPO, {
        message: "Serving with Kourier on spoke-1, Eventing on spoke-2",
        files: Object.fromEntries(
          WORKLOAD.map((w) => [
            `clusters/${w.name}.yaml`,
            stringify({
              apiVersion: OPERATOR_API_VERSION,
              kind: w.kind,
              metadata: { name: w.name, namespace: FLEET_NAMESPACE },
              spec: crSpec(w),
            }),
          ]),
        ),
      });
    },
  },
  upstream: {
    label: "upstream Knative Operator (knative/operator b4f2c2549cd0, ../shared/reference/knative-operator)",
    crNamespace: (w) => w.namespace,
    async start() {
      const operator = await startUpstream(sandbox, {
        providerFile: sandbox.providerFile,
        pollInterval: values["poll-interval"],
      });
      await sleep(3_000); // settle, as knative-fleet does
      return {
        pid: operator.pid,
        rssKiB: () => operator.rssKiB(),
        peakRssKiB: () => peakRssKiB(operator.pid),
        stop: () => operator.stop(),
        logTail: () => operator.tail(),
      };
    },
    async create() {
      for (const w of WORKLOAD)
        await hub.apply({
          apiVersion: OPERATOR_API_VERSION,
          kind: w.kind,
          metadata: { name: w.name, namespace: w.namespace },
          spec: crSpec(w),
        });
    },
  },
};
let fleetService: ServiceProcess | undefined;

interface CrFigures {
  createToReady: number;
  createToRollout: number;
  deployments: number;
}
interface SideFigures {
  crs: Map<string, CrFigures>;
  install: Map<string, RequestCount>;
  idle: Map<string, RequestCount> | undefined;
  startRss: number;
  peakRss: number;
}

const figures = new Map<Side, SideFigures>();
for (const side of sides) {
  await clearSandbox(); // the spokes as a fresh sandbox has them; the other implementation is stopped
  figures.set(side, await measure(side, controllers[side]));
}
printTable();

if (!values.keep || scaleCounts) await clearSandbox();
await git.close();
for (const proxy of proxies.values()) await proxy.close();
const scaleExit = scaleCounts ? benchScale(scaleCounts) : 0;
if (ownSandbox) await down(sandbox.stateDir);
process.exit(scaleExit);

/** bench-scale's 1/5/10/20-spoke table on this sandbox, printed into this run's output. */
function benchScale(counts: readonly number[]): number {
  console.log(`\n== bench-scale ${counts.join(",")} on the same sandbox`);
  const run = spawnSync(process.execPath, [join(repoRoot, "scripts", "bench-scale.ts"), counts.join(",")], {
    stdio: "inherit",
    env: { ...process.env, [SANDBOX_ENV]: sandbox.stateDir },
  });
  return run.status ?? 1;
}

async function measure(side: Side, controller: Controller): Promise<SideFigures> {
  console.log(
    `\n== ${controller.label}\n   hub + 2 spokes, --remote-deployments-poll-interval ${values["poll-interval"]}`,
  );
  const running = await controller.start();
  const rss: number[] = [];
  const sampler = setInterval(() => {
    try {
      rss.push(running.rssKiB());
    } catch {} // it exited: the run fails below
  }, 100);
  // knative-fleet's V8 heap beside RSS, from its own /metrics (prom-client's default metrics), in KiB.
  const heap = { used: 0, total: 0, external: 0 };
  const heapSampler = setInterval(async () => {
    const response = side === "knative-fleet" ? await fleetService!.get("/metrics") : undefined;
    if (response?.status !== 200) return;
    const kib = (name: string) => (sampleValue(response.body, name) ?? 0) / 1024;
    heap.used = Math.max(heap.used, kib("nodejs_heap_size_used_bytes"));
    heap.total = Math.max(heap.total, kib("nodejs_heap_size_total_bytes"));
    heap.external = Math.max(heap.external, kib("nodejs_external_memory_bytes"));
  }, 250);
  const startRss = running.rssKiB();

  // What the bench observes on its own (admin) connections: the hub CRs and each spoke's Deployments.
  const created = new Map<string, number>();
  const ready = new Map<string, number>();
  const hubWatches = WORKLOAD.map((w) => {
    const informer = new Informer(hub, OPERATOR_API_VERSION, w.kind, undefined, controller.crNamespace(w));
    informer.on((event, object) => {
      if (event === "DELETED" || object.metadata.name !== w.name) return;
      if (!created.has(w.kind)) created.set(w.kind, performance.now());
      const conditions = (object.status as { conditions?: { type: string; status: string }[] } | undefined)
        ?.conditions;
      if (!ready.has(w.kind) && conditions?.some((c) => c.type === "Ready" && c.status === "True"))
        ready.set(w.kind, performance.now());
    });
    informer.start();
    return informer;
  });
  const changes = new Map<string, AvailabilityChange[]>();
  const spokeWatches = WORKLOAD.map(({ spoke, namespace, kind }) => {
    const seen: AvailabilityChange[] = [];
    changes.set(kind, seen);
    const informer = new Informer(
      spokeClients.get(spoke.name)!,
      "apps/v1",
      "Deployment",
      undefined,
      namespace,
    );
    informer.on((event, object) =>
      seen.push({
        name: object.metadata.name ?? "",
        at: performance.now(),
        available: event !== "DELETED" && isDeploymentAvailable(object),
      }),
    );
    informer.start();
    return informer;
  });
  await Promise.all([...hubWatches, ...spokeWatches].map((i) => i.hasSynced()));

  const countsBefore = proxyCounts();
  const pushed = performance.now();
  await controller.create();
  await waitUntil(
    "both CRs Ready",
    async () => (WORKLOAD.every((w) => ready.has(w.kind)) ? true : undefined),
    300_000,
  ).catch((err: Error) => fail(`${err.message}\n${running.logTail()}`));
  const countsInstalled = proxyCounts();
  // The kernel's high-water mark catches what the 100 ms samples miss.
  const installRss = Math.max(...rss, running.peakRssKiB());

  console.log(
    `   pid ${running.pid}; create -> first CR on the hub: ${((Math.min(...created.values()) - pushed) / 1000).toFixed(1)} s`,
  );
  const steps = side === "knative-fleet" ? await fleetSteps(fleetService!) : [];
  const crs = new Map<string, CrFigures>();
  for (const w of WORKLOAD) {
    const t0 = created.get(w.kind)!;
    const deployments = spokeWatches[WORKLOAD.indexOf(w)]!.list().map((d) => d.metadata.name ?? "");
    const f = {
      createToReady: ready.get(w.kind)! - t0,
      createToRollout: allAvailableAt(changes.get(w.kind)!, deployments) - t0,
      deployments: deployments.length,
    };
    crs.set(w.kind, f);
    const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
    console.log(`${w.kind} ${controller.crNamespace(w)}/${w.name} on ${w.spoke.name}:`);
    console.log(`  create -> Ready                          ${s(f.createToReady)}`);
    console.log(
      `  create -> every Deployment Available     ${s(f.createToRollout)} (${f.deployments} Deployments)`,
    );
    console.log(`  Ready after the spoke's rollout          ${s(f.createToReady - f.createToRollout)}`);
    console.log(
      `  spoke requests until both are Ready      ${countsInstalled.get(w.spoke.name)!.since(countsBefore.get(w.spoke.name)!)}`,
    );
    if (steps.length === 0) continue;
    console.log("  step timeline (from the CR's creation; pass = one reconcile):");
    const wall = (ms: number) => ms - (performance.timeOrigin + t0);
    for (const line of steps.filter((l) => l.kind === w.kind && l.cr === `${FLEET_NAMESPACE}/${w.name}`)) {
      const start = wall(line.startedAt);
      console.log(
        `    ${(start / 1000).toFixed(2).padStart(6)} s -> ${((start + line.ms) / 1000).toFixed(2).padStart(6)} s  ${line.step}${line.next && line.next !== "continue" ? ` (${line.next})` : ""}`,
      );
    }
  }

  let idle: Map<string, RequestCount> | undefined;
  if (idleSeconds > 0) {
    await sleep(idleSeconds * 1_000);
    const countsIdle = proxyCounts();
    idle = new Map(spokes.map((s) => [s.name, countsIdle.get(s.name)!.since(countsInstalled.get(s.name)!)]));
    for (const spoke of spokes)
      console.log(
        `spoke requests in ${idleSeconds} idle s after Ready, ${spoke.name}: ${idle.get(spoke.name)}`,
      );
  }
  const peakRss = Math.max(...rss, running.peakRssKiB());
  console.log(
    `RSS: start ${mib(startRss)}, peak during install ${mib(installRss)}, peak overall ${mib(peakRss)}, end ${mib(running.rssKiB())}`,
  );
  if (side === "knative-fleet")
    console.log(
      `V8 heap (sampled every 250 ms): used peak ${mib(heap.used)}, total peak ${mib(heap.total)}, external peak ${mib(heap.external)}`,
    );

  clearInterval(sampler);
  clearInterval(heapSampler);
  for (const informer of [...hubWatches, ...spokeWatches]) informer.stop();
  await running.stop();
  const install = new Map(
    spokes.map((s) => [s.name, countsInstalled.get(s.name)!.since(countsBefore.get(s.name)!)]),
  );
  return { crs, install, idle, startRss, peakRss };
}

function printTable(): void {
  const row = (label: string, cell: (f: SideFigures) => string) =>
    console.log(`| ${label} | ${sides.map((side) => cell(figures.get(side)!)).join(" | ")} |`);
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const short = (w: Cr) => w.kind.replace("Knative", "");
  console.log(
    `\n| | ${sides.map((side) => (side === "upstream" ? "upstream operator" : side)).join(" | ")} |`,
  );
  console.log(`|---|${sides.map(() => "---").join("|")}|`);
  for (const w of WORKLOAD) {
    row(`${short(w)} create → Ready (spoke's Deployments all Available)`, (f) => {
      const cr = f.crs.get(w.kind)!;
      return `${s(cr.createToReady)} (${s(cr.createToRollout)})`;
    });
    row(`${short(w)} Ready after the spoke's rollout`, (f) => {
      const cr = f.crs.get(w.kind)!;
      return s(cr.createToReady - cr.createToRollout);
    });
  }
  for (const w of WORKLOAD)
    row(`spoke requests until both are Ready, ${short(w)} (reads/writes/watches)`, (f) =>
      f.install.get(w.spoke.name)!.short(),
    );
  if (idleSeconds > 0)
    for (const w of WORKLOAD)
      row(`spoke requests in ${idleSeconds} idle s after Ready, ${short(w)} (reads/writes/watches)`, (f) =>
        f.idle!.get(w.spoke.name)!.short(),
      );
  row("controller RSS at start / peak", (f) => `${mib(f.startRss, "")} / ${mib(f.peakRss)}`);
}

function fail(message: string): never {
  console.error(`bench-perf: ${message}`);
  process.exit(1);
}

function mib(kib: number, unit = " MiB"): string {
  return `${(kib / 1024).toFixed(0)}${unit}`;
}

interface AvailabilityChange {
  name: string;
  at: number;
  available: boolean;
}

/**
 * The spoke's rollout: the first moment every one of `deployments` (those the install ends with) was
 * Available at once. A Deployment rewritten after that (the upstream operator re-applies them) does not move it.
 */
function allAvailableAt(changes: readonly AvailabilityChange[], deployments: readonly string[]): number {
  const available = new Map<string, boolean>();
  for (const change of changes) {
    available.set(change.name, change.available);
    if (deployments.every((d) => available.get(d))) return change.at;
  }
  return Number.NaN;
}

interface RequestCount {
  reads: number;
  writes: number;
  watches: number;
  since(earlier: RequestCount): RequestCount;
  short(): string;
}

function requestCount(reads: number, writes: number, watches: number): RequestCount {
  return {
    reads,
    writes,
    watches,
    since: (o) => requestCount(reads - o.reads, writes - o.writes, watches - o.watches),
    short: () => `${reads}/${writes}/${watches}`,
    toString: () => `${reads} reads, ${writes} writes, ${watches} watches`,
  } as RequestCount;
}

/** Requests the proxy forwarded per spoke: reads (GET), watches (GET ?watch), writes (everything else). */
function proxyCounts(): Map<string, RequestCount> {
  const counts = new Map<string, RequestCount>();
  for (const spoke of spokes) {
    const lines = [...proxies.get(spoke.name)!.handled];
    const watches = lines.filter((h) => h.startsWith("GET ") && /[?&]watch=(1|true)/.test(h)).length;
    const reads = lines.filter((h) => h.startsWith("GET ")).length - watches;
    counts.set(spoke.name, requestCount(reads, lines.length - reads - watches, watches));
  }
  return counts;
}

interface StepLine {
  cr: string;
  kind: string;
  step: string;
  startedAt: number;
  ms: number;
  next?: string;
}

/** The step timeline from knative-fleet's log, once each CR's settling step is there (the log is piped). */
function fleetSteps(service: ServiceProcess): Promise<StepLine[]> {
  return waitUntil(
    "the step timeline in the log",
    async () => {
      const lines = stepLines(service.logFile);
      const settled = (w: Cr) =>
        lines.some((l) => l.kind === w.kind && l.step === "checkDeployments" && l.next === "settle");
      return WORKLOAD.every(settled) ? lines : undefined;
    },
    15_000,
  ).catch(() => stepLines(service.logFile));
}

function stepLines(logFile: string): StepLine[] {
  return readFileSync(logFile, "utf8")
    .split("\n")
    .flatMap((line) => {
      try {
        const parsed = JSON.parse(line) as StepLine & { msg?: string };
        return parsed.msg === "reconcile step" ? [parsed] : [];
      } catch {
        return [];
      }
    });
}

/**
 * Removes the workload, whichever implementation installed it: its hub CRs in every namespace (finalizers
 * dropped: no controller runs now) and every trace of it on the spokes (clearKnative).
 */
async function clearSandbox(): Promise<void> {
  for (const kind of ["KnativeServing", "KnativeEventing"]) {
    const crs = await waitUntil(`${kind} served`, () =>
      hub.list(OPERATOR_API_VERSION, kind).catch(() => undefined),
    );
    await forceDeleteCrs(hub, crs.items);
  }
  await Promise.all(
    WORKLOAD.map(({ spoke, namespace }) =>
      clearKnative(spokeClients.get(spoke.name)!, [namespace, "kourier-system"]),
    ),
  );
}
