// Measures the fleet at 1 -> 5 -> 10 -> 20 spokes: a real `knative-fleet run` process (fixed workers,
// one per spoke at most), Serving 1.22 with Kourier pushed to the fleet repository for the first N spokes
// of a running sandbox at once, and printed per N: time from the push until every CR is Ready (first,
// median, last), requests the controller sent to the hub and to the spokes per install and per idle
// minute after (reads = GET, writes = the rest), the cost of one no-op reconcile per CR (what the 5-minute
// drift resync costs; forced here by annotating every hub CR) and of one that puts back a hand edit (requests
// and CPU per CR, docs/drift.md), the controller's CPU time, and its memory:
// RSS at start, peak (VmHWM) and settled (the lowest RSS of the idle window after every CR is Ready, once
// V8's memory reducer has collected what the installs left), and the V8 heap used, settled the same way.
// Then the slopes over N (least squares): MiB of settled RSS and heap per additional CR/cluster, and MiB of
// peak per install in progress.
// The process runs as the image runs it: the built CLI (dist/cli.js; `npm run build` first) with the
// Node settings of the Dockerfile (the entrypoint's node flags, NODE_ENV/NODE_OPTIONS/MALLOC_*) and its compiled releases.
// Usage: KNATIVE_FLEET_SANDBOX=<state dir> node scripts/bench-scale.ts [counts=1,5,10,20] [workers=4] [idleSeconds=180]
// BENCH_HEAP_SNAPSHOTS=<dir> also writes a heap snapshot of the process at the end of each N (after the
// figures are taken: a snapshot collects garbage and allocates), to diff what is kept per cluster.
// The sandbox needs at least max(counts) spokes (`npm run sandbox -- up --spokes 20 --light` for 20).
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { readSandbox, type Sandbox } from "../test/sandbox/sandbox.ts";
import { imageRuntime } from "../test/support/dockerfile.ts";
import { startFleetProcess } from "../test/support/fleet-service.ts";
import { startGitServer } from "../test/support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../test/support/hub.ts";
import { cpuSeconds, type ServiceProcess } from "../test/support/service-process.ts";
import { dropHubCrs, FLEET_NAMESPACE, isReady, servingFile } from "../test/support/serving-fleet.ts";
import { repoRoot } from "../test/support/shared.ts";
import { cleanSpokes } from "../test/support/spokes.ts";

const counts = (process.argv[2] ?? "1,5,10,20").split(",").map(Number);
const workers = Number(process.argv[3] ?? 4);
// V8 gives back the pages an install used only after minutes of quiet: a shorter window misses it.
const idleSeconds = Number(process.argv[4] ?? 180);
const heapSnapshots = process.env.BENCH_HEAP_SNAPSHOTS;
const REPO = "bench-scale";
const MiB = 1024 * 1024;
const ENTRY = join(repoRoot, "dist", "cli.js");
if (!existsSync(ENTRY)) throw new Error(`${ENTRY} is missing: run npm run build first`);
// The image's node flags and runtime environment, and its compiled releases (test/support/dockerfile.ts).
const runtime = imageRuntime(mkdtempSync(join(tmpdir(), "bench-scale-image-")));

interface Requests {
  hubReads: number;
  hubWrites: number;
  spokeReads: number;
  spokeWrites: number;
}

interface Row {
  spokes: number;
  readyFirstS: number;
  readyMedianS: number;
  readyAllS: number;
  install: Requests;
  idlePerMinute: Requests;
  noopPerCr: Requests;
  /** Controller CPU per CR of that no-op round, and of a round where every CR's cluster had a hand edit to put back. */
  noopCpuPerCrMs: number;
  driftPerCr: Requests;
  driftCpuPerCrMs: number;
  rssStartMiB: number;
  rssPeakMiB: number;
  rssSettledMiB: number;
  heapStartMiB: number;
  heapSettledMiB: number;
  cpuInstallS: number;
  cpuIdlePercent: number;
}

function requestsIn(file: string, hubServer: string): Requests {
  let byServer: Record<string, Record<string, number>> = {};
  try {
    byServer = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    // not written yet
  }
  const out: Requests = { hubReads: 0, hubWrites: 0, spokeReads: 0, spokeWrites: 0 };
  for (const [server, methods] of Object.entries(byServer)) {
    const hub = server === hubServer;
    for (const [method, n] of Object.entries(methods)) {
      const read = method === "GET";
      if (hub) out[read ? "hubReads" : "hubWrites"] += n;
      else out[read ? "spokeReads" : "spokeWrites"] += n;
    }
  }
  return out;
}

/** The counts once they stopped moving for 5 s (the work a change queued has finished). */
async function settledRequests(file: string, hubServer: string): Promise<Requests> {
  let last = JSON.stringify(requestsIn(file, hubServer));
  for (let stable = 0; stable < 5; ) {
    await sleep(1_000);
    const now = JSON.stringify(requestsIn(file, hubServer));
    stable = now === last ? stable + 1 : 0;
    last = now;
  }
  return JSON.parse(last) as Requests;
}

const minus = (a: Requests, b: Requests, per = 1): Requests => ({
  hubReads: (a.hubReads - b.hubReads) / per,
  hubWrites: (a.hubWrites - b.hubWrites) / per,
  spokeReads: (a.spokeReads - b.spokeReads) / per,
  spokeWrites: (a.spokeWrites - b.spokeWrites) / per,
});

/** A field of /proc/<pid>/status in MiB (VmRSS: resident now; VmHWM: the peak since the process started). */
function statusMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const kib = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(
    readFileSync(`/proc/${pid}/status`, "utf8"),
  )?.[1];
  if (kib === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(kib) / 1024;
}

/**
 * The request counter, with its types stripped here: loading a .ts file would load Node's type stripper
 * into the measured process (about 17 MiB of RSS the image does not have).
 */
function counterModule(scratch: string): string {
  const source = readFileSync(join(repoRoot, "scripts", "bench-scale-counter.ts"), "utf8");
  const file = join(scratch, "bench-scale-counter.mjs");
  writeFileSync(file, stripTypeScriptTypes(source));
  return file;
}

async function measure(sandbox: Sandbox, n: number): Promise<Row> {
  const hub = adminClient(sandbox.hub);
  const spokes = sandbox.spokes.slice(0, n).map((s) => s.name);
  await dropHubCrs(hub);
  await cleanSpokes(sandbox, spokes);
  const scratch = mkdtempSync(join(tmpdir(), "bench-scale-"));
  const git = await startGitServer();
  await git.createRepo(REPO, { "README.md": "bench-scale fleet\n" });
  const countsFile = join(scratch, "requests.json");
  const service = startFleetProcess({
    sandbox,
    service: { repositoryUrl: git.url(REPO) },
    config: { workers, workersPerCluster: 1 },
    scratch,
    name: "service",
    entry: ENTRY,
    nodeArgs: runtime.nodeArgs,
    env: {
      ...runtime.env,
      NODE_OPTIONS: [
        runtime.env.NODE_OPTIONS,
        `--import=${counterModule(scratch)}`,
        ...(heapSnapshots ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${heapSnapshots}`] : []),
      ]
        .filter((option) => option !== undefined)
        .join(" "),
      BENCH_REQUEST_COUNTS: countsFile,
      BENCH_REST_MODULE: pathToFileURL(join(repoRoot, "dist", "kube", "rest.js")).href,
    },
  });
  const heapUsedMiB = async () => ((await service.metric("nodejs_heap_size_used_bytes")) ?? Number.NaN) / MiB;
  try {
    while ((await service.get("/readyz")).status !== 200) {
      if (!service.running) throw new Error(`the service exited:\n${service.logTail()}`);
      await sleep(200);
    }
    await sleep(6_000); // the first sync of the empty repository, so it is not counted as install work
    const rssStartMiB = statusMiB(service.pid, "VmRSS");
    const heapStartMiB = await heapUsedMiB();
    const before = requestsIn(countsFile, sandbox.hub.server);
    const cpuBefore = cpuSeconds(service.pid);
    const files = Object.assign({}, ...spokes.map((s) => servingFile(s)));
    const pushedAt = performance.now();
    await git.pushChange(REPO, { files, message: `Serving on ${n} spokes` });
    const readyAt = new Map<string, number>();
    while (readyAt.size < n) {
      if (performance.now() - pushedAt > 20 * 60_000) throw new Error(`not all Ready after 20 minutes`);
      for (const s of spokes) {
        if (!readyAt.has(s) && (await isReady(hub, "KnativeServing", `serving-${s}`)))
          readyAt.set(s, (performance.now() - pushedAt) / 1000);
      }
      await sleep(250);
    }
    await sleep(1_000); // the last status write lands
    const afterInstall = requestsIn(countsFile, sandbox.hub.server);
    const cpuInstall = cpuSeconds(service.pid);
    const idleStart = performance.now();
    let rssSettledMiB = Number.POSITIVE_INFINITY;
    let heapSettledMiB = Number.POSITIVE_INFINITY;
    while (performance.now() - idleStart < idleSeconds * 1000) {
      rssSettledMiB = Math.min(rssSettledMiB, statusMiB(service.pid, "VmRSS"));
      heapSettledMiB = Math.min(heapSettledMiB, await heapUsedMiB());
      await sleep(1_000);
    }
    const afterIdle = requestsIn(countsFile, sandbox.hub.server);
    const cpuIdle = cpuSeconds(service.pid);
    // A no-op reconcile of every CR, as the drift resync runs it: an annotation (a metadata change) queues it.
    for (const s of spokes) {
      await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", FLEET_NAMESPACE, `serving-${s}`, {
        metadata: { annotations: { "bench.knative-fleet.dev/touched": String(Date.now()) } },
      });
    }
    const afterNoop = await settledRequests(countsFile, sandbox.hub.server);
    const cpuNoop = cpuSeconds(service.pid);
    // A drift check that finds drift: a hand edit (kubectl edit's field manager) on every spoke, then the
    // same touch; the pass puts it back, reads the fleet file for the line and records it on the CR.
    for (const [i, s] of spokes.entries()) {
      await adminClient(sandbox.spokes[i]!).rest.request({
        method: "PATCH",
        path: "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler",
        query: { fieldManager: "kubectl-edit" },
        body: { data: { _example: null } }, // a key the release sets: put back by the pass
        contentType: "application/strategic-merge-patch+json",
      });
      await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", FLEET_NAMESPACE, `serving-${s}`, {
        metadata: { annotations: { "bench.knative-fleet.dev/touched": String(Date.now()) } },
      });
    }
    const afterDrift = await settledRequests(countsFile, sandbox.hub.server);
    const cpuDrift = cpuSeconds(service.pid);
    const rssPeakMiB = statusMiB(service.pid, "VmHWM");
    if (heapSnapshots) await heapSnapshot(service, heapSnapshots, n);
    const times = [...readyAt.values()].sort((a, b) => a - b);
    return {
      spokes: n,
      readyFirstS: times[0]!,
      readyMedianS: times[Math.floor((times.length - 1) / 2)]!,
      readyAllS: times.at(-1)!,
      install: minus(afterInstall, before, n),
      idlePerMinute: minus(afterIdle, afterInstall, idleSeconds / 60),
      noopPerCr: minus(afterNoop, afterIdle, n),
      noopCpuPerCrMs: ((cpuNoop - cpuIdle) / n) * 1000,
      driftPerCr: minus(afterDrift, afterNoop, n),
      driftCpuPerCrMs: ((cpuDrift - cpuNoop) / n) * 1000,
      rssStartMiB,
      rssPeakMiB,
      rssSettledMiB,
      heapStartMiB,
      heapSettledMiB,
      cpuInstallS: cpuInstall - cpuBefore,
      cpuIdlePercent: ((cpuIdle - cpuInstall) / idleSeconds) * 100,
    };
  } finally {
    await service.stop();
    await dropHubCrs(hub);
    await git.close();
  }
}

/** SIGUSR2 (--heapsnapshot-signal) and waits until the snapshot is written; renames it after N. */
async function heapSnapshot(service: ServiceProcess, dir: string, n: number): Promise<void> {
  const written = () =>
    readdirSync(dir).filter((f) => f.endsWith(".heapsnapshot") && f.includes(`.${service.pid}.`));
  service.kill("SIGUSR2");
  for (let size = -1; ; ) {
    await sleep(2_000);
    const file = written()[0];
    if (file === undefined) continue;
    const now = readFileSync(join(dir, file)).length;
    if (now === size) {
      renameSync(join(dir, file), join(dir, `bench-scale-${n}-spokes.heapsnapshot`));
      return;
    }
    size = now;
  }
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  const mx = mean(xs);
  const my = mean(ys);
  const sxx = xs.reduce((a, x) => a + (x - mx) ** 2, 0);
  return xs.reduce((a, x, i) => a + (x - mx) * (ys[i]! - my), 0) / sxx;
}

const stateDir = process.env[SANDBOX_ENV];
const sandbox = stateDir ? readSandbox(stateDir) : undefined;
if (!sandbox) throw new Error(`${SANDBOX_ENV} must name a running sandbox's state dir`);
if (Math.max(...counts) > sandbox.spokes.length)
  throw new Error(`the sandbox has ${sandbox.spokes.length} spokes; ${Math.max(...counts)} asked for`);
const hub = adminClient(sandbox.hub);
await installFleetCrds(hub);
await ensureNamespace(hub, FLEET_NAMESPACE);

const rows: Row[] = [];
for (const n of counts) {
  process.stderr.write(`bench-scale: ${n} spoke(s), ${workers} workers...\n`);
  const row = await measure(sandbox, n);
  rows.push(row);
  process.stderr.write(`${JSON.stringify(row)}\n`);
}

const f = (x: number, digits = 1) => x.toFixed(digits);
const rw = (reads: number, writes: number) => `${f(reads)} / ${f(writes)}`;
console.log(
  `\nServing 1.22 + Kourier on N spokes at once; ${workers} workers, 1 per spoke; idle window ${idleSeconds} s; ` +
    `node ${[...runtime.nodeArgs, "dist/cli.js"].join(" ")} with ` +
    `${Object.entries(runtime.env)
      .map(([k, v]) => `${k}=${v}`)
      .join(" ")} (the Dockerfile's)`,
);
console.log(
  "| spokes | Ready first / median / all (s) | hub req per install (r/w) | spoke req per install (r/w) | hub req per idle min (r/w) | spoke req per idle min (r/w) | no-op reconcile per CR, hub / spoke (r/w), CPU | drift put back per CR, hub / spoke (r/w), CPU | RSS start / peak / settled (MiB) | V8 heap used start / settled (MiB) | CPU install (s) | CPU idle |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  console.log(
    `| ${r.spokes} | ${f(r.readyFirstS)} / ${f(r.readyMedianS)} / ${f(r.readyAllS)} | ` +
      `${rw(r.install.hubReads, r.install.hubWrites)} | ${rw(r.install.spokeReads, r.install.spokeWrites)} | ` +
      `${rw(r.idlePerMinute.hubReads, r.idlePerMinute.hubWrites)} | ` +
      `${rw(r.idlePerMinute.spokeReads, r.idlePerMinute.spokeWrites)} | ` +
      `${rw(r.noopPerCr.hubReads, r.noopPerCr.hubWrites)}; ${rw(r.noopPerCr.spokeReads, r.noopPerCr.spokeWrites)}; ${f(r.noopCpuPerCrMs, 0)} ms | ` +
      `${rw(r.driftPerCr.hubReads, r.driftPerCr.hubWrites)}; ${rw(r.driftPerCr.spokeReads, r.driftPerCr.spokeWrites)}; ${f(r.driftCpuPerCrMs, 0)} ms | ` +
      `${f(r.rssStartMiB, 0)} / ${f(r.rssPeakMiB, 0)} / ${f(r.rssSettledMiB, 0)} | ` +
      `${f(r.heapStartMiB)} / ${f(r.heapSettledMiB)} | ${f(r.cpuInstallS)} | ${f(r.cpuIdlePercent)} % |`,
  );
}
if (rows.length > 1) {
  const xs = rows.map((r) => r.spokes);
  const per = (y: (r: Row) => number) => f(slope(xs, rows.map(y)), 2);
  console.log(
    `\nPer additional CR/cluster (slope over N): settled RSS ${per((r) => r.rssSettledMiB)} MiB, ` +
      `settled V8 heap used ${per((r) => r.heapSettledMiB)} MiB; peak RSS per install in progress ` +
      `${per((r) => r.rssPeakMiB)} MiB`,
  );
}
