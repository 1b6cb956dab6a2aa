// Measures one install of the 2-CR workload by the real `knative-fleet run` process (a child, so its RSS is
// its own) on a sandbox hub + 2 spokes: KnativeServing 1.22 + Kourier on spoke-1 and KnativeEventing 1.22 on
// spoke-2, declared in a fleet repository served by a real git server. Prints per CR: create -> Ready beside
// the spoke's own rollout (its last Deployment Available), the step timeline from the process's debug log,
// the spoke requests during the install and in an idle window after Ready (counted by a reverse proxy in
// front of each spoke apiserver, which the ClusterProfiles name), and the process's RSS at start and peak.
// Usage: [KNATIVE_FLEET_SANDBOX=<state dir>] node scripts/bench-perf.ts [--idle-seconds 120]
//        [--poll-interval 1s] [--keep] [--entry src|dist|<cli script>] [--node-args="<node flags>"]
// --entry dist runs the built CLI (npm run build), as the image and the npm package do: no type stripping;
// a path runs that CLI script (another checkout, for a before/after comparison).
// Without KNATIVE_FLEET_SANDBOX a fresh sandbox is started in a temp dir and stopped at the end; with it the
// spokes are cleared of earlier installs of the workload first. --keep leaves the installs in place.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { parse, stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../src/api/labels.ts";
import { isDeploymentAvailable } from "../src/install/health.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { Informer } from "../src/kube/informer.ts";
import { down, readSandbox, type Sandbox, up } from "../test/sandbox/sandbox.ts";
import { writeServiceConfig } from "../test/support/fleet-service.ts";
import { startGitServer } from "../test/support/git-server.ts";
import { forceDeleteCrs, KOURIER } from "../test/support/handover.ts";
import { adminClient, copyClusterProfile, ensureNamespace, installFleetCrds } from "../test/support/hub.ts";
import { type LoopbackProxy, startClusterProxy } from "../test/support/loopback-proxies.ts";
import { imageRuntime, ServiceProcess, sampleValue, serviceEnv } from "../test/support/service-process.ts";
import { repoRoot } from "../test/support/shared.ts";
import { waitUntil } from "../test/support/wait.ts";
import { base64, testdata } from "../test/unit/access/support.ts";

const { values } = parseArgs({
  options: {
    "idle-seconds": { type: "string", default: "120" },
    "poll-interval": { type: "string", default: "1s" },
    keep: { type: "boolean", default: false },
    entry: { type: "string", default: "src" },
    "node-args": { type: "string" },
  },
});
const idleSeconds = Number(values["idle-seconds"]);

const CLUSTER_SCOPED = [
  ["rbac.authorization.k8s.io/v1", "ClusterRole"],
  ["rbac.authorization.k8s.io/v1", "ClusterRoleBinding"],
  ["admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"],
  ["admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"],
] as const;
const FLEET_NAMESPACE = "knative-fleet";
/** The bench's own ClusterProfiles: the sandbox's, but naming the counting proxy as the server. */
const PROFILE_NAMESPACE = "bench-perf";
const REPO = "fleet";

const stateDir = process.env.KNATIVE_FLEET_SANDBOX;
const ownSandbox = stateDir === undefined;
const sandbox: Sandbox = ownSandbox
  ? await up({ stateDir: mkdtempSync(join(tmpdir(), "bench-perf-sandbox-")), spokes: 2 })
  : (readSandbox(stateDir) ?? fail(`no sandbox in ${stateDir}`));
if (sandbox.spokes.length < 2) fail("the sandbox needs 2 spokes (npm run sandbox -- up --spokes 2)");
const spokes = sandbox.spokes.slice(0, 2);

const WORKLOAD = [
  { kind: "KnativeServing", name: "serving", spoke: spokes[0]!, namespace: "knative-serving", spec: KOURIER },
  { kind: "KnativeEventing", name: "eventing", spoke: spokes[1]!, namespace: "knative-eventing", spec: {} },
] as const;

const hub = adminClient(sandbox.hub);
const spokeClients = new Map(spokes.map((s) => [s.name, adminClient(s)]));
await installFleetCrds(hub);
for (const ns of [FLEET_NAMESPACE, PROFILE_NAMESPACE]) await ensureNamespace(hub, ns);
if (!ownSandbox) await clearSandbox();

// A reverse proxy per spoke, counting what reaches the spoke's apiserver (the knative-fleet process's requests only).
const proxies = new Map<string, LoopbackProxy>();
for (const spoke of spokes) {
  const proxy = await startClusterProxy({
    key: testdata("server.key"),
    cert: testdata("server.crt"),
    routes: { [spoke.name]: spoke.server },
    upstreamCa: Buffer.from(spoke.caData, "base64").toString("utf8"),
  });
  proxies.set(spoke.name, proxy);
  await copyClusterProfile(
    hub,
    { namespace: sandbox.clusterProfileNamespace, name: spoke.name },
    PROFILE_NAMESPACE,
    {
      url: `${proxy.url}/${spoke.name}`,
      caData: base64(testdata("ca.crt")),
    },
  );
}

const git = await startGitServer();
await git.createRepo(REPO, { "README.md": "bench-perf fleet\n" });
const scratch = mkdtempSync(join(tmpdir(), "bench-perf-"));
const configPath = writeServiceConfig({ repositoryUrl: git.url(REPO), namespace: FLEET_NAMESPACE });
const metricsPort = 19_000 + Math.floor(Math.random() * 1_000);
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
// dist/cli.js runs as the image runs it: the Dockerfile's node flags and environment, compiled releases.
const image = values.entry === "dist" ? imageRuntime(scratch) : { nodeArgs: [], env: {} };
const nodeArgs = values["node-args"]
  ? values["node-args"].split(" ").filter((a) => a !== "")
  : image.nodeArgs;
const service = new ServiceProcess({
  args: ["run", "--config", configPath, "--clusterprofile-provider-file", sandbox.providerFile],
  env: { ...serviceEnv(sandbox.hub.adminKubeconfig, scratch), ...image.env },
  metricsPort,
  logFile: join(scratch, "knative-fleet.log"),
  entry:
    values.entry === "dist"
      ? join(repoRoot, "dist", "cli.js")
      : values.entry === "src"
        ? join(repoRoot, "src", "cli.ts")
        : values.entry!,
  nodeArgs,
});
const rss: number[] = [];
const sampler = setInterval(() => {
  if (service.running) rss.push(service.rssKiB());
}, 100);
// The V8 heap beside RSS, from the process's own /metrics (prom-client's default metrics), in KiB.
const heap = { used: 0, total: 0, external: 0 };
const heapSampler = setInterval(async () => {
  const { status, body } = await service.get("/metrics");
  if (status !== 200) return;
  const kib = (name: string) => (sampleValue(body, name) ?? 0) / 1024;
  heap.used = Math.max(heap.used, kib("nodejs_heap_size_used_bytes"));
  heap.total = Math.max(heap.total, kib("nodejs_heap_size_total_bytes"));
  heap.external = Math.max(heap.external, kib("nodejs_external_memory_bytes"));
}, 250);

await waitUntil(
  "knative-fleet /readyz",
  async () => ((await service.get("/readyz")).status === 200 ? true : undefined),
  60_000,
);
await sleep(3_000); // settle: the first fleet poll has run (an empty fleet)
const startRss = service.rssKiB();

// What the bench observes on its own (admin) connections: the hub CRs and each spoke's Deployments.
const created = new Map<string, number>();
const ready = new Map<string, number>();
const hubWatches = WORKLOAD.map(({ kind }) => {
  const informer = new Informer(hub, OPERATOR_API_VERSION, kind, undefined, FLEET_NAMESPACE);
  informer.on((event, object) => {
    if (event === "DELETED") return;
    const key = `${kind}/${object.metadata.name}`;
    if (!created.has(key)) created.set(key, performance.now());
    const conditions = (object.status as { conditions?: { type: string; status: string }[] } | undefined)
      ?.conditions;
    if (!ready.has(key) && conditions?.some((c) => c.type === "Ready" && c.status === "True"))
      ready.set(key, performance.now());
  });
  informer.start();
  return informer;
});
const available = new Map<string, Map<string, number>>();
const spokeWatches = WORKLOAD.map(({ spoke, namespace, kind }) => {
  const times = new Map<string, number>();
  available.set(kind, times);
  const informer = new Informer(spokeClients.get(spoke.name)!, "apps/v1", "Deployment", undefined, namespace);
  informer.on((event, object) => {
    const name = object.metadata.name ?? "";
    if (event !== "DELETED" && isDeploymentAvailable(object)) {
      if (!times.has(name)) times.set(name, performance.now());
    } else times.delete(name);
  });
  informer.start();
  return informer;
});
await Promise.all([...hubWatches, ...spokeWatches].map((i) => i.hasSynced()));

const countsBefore = proxyCounts();
const pushed = performance.now();
await git.pushChange(REPO, {
  message: "Serving with Kourier on spoke-1, Eventing on spoke-2",
  files: Object.fromEntries(
    WORKLOAD.map((w) => [
      `clusters/${w.name}.yaml`,
      stringify({
        apiVersion: OPERATOR_API_VERSION,
        kind: w.kind,
        metadata: { name: w.name, namespace: FLEET_NAMESPACE },
        spec: {
          version: "1.22",
          ...w.spec,
          clusterProfileRef: { namespace: PROFILE_NAMESPACE, name: w.spoke.name },
        },
      }),
    ]),
  ),
});
await waitUntil(
  "both CRs Ready",
  async () => (WORKLOAD.every((w) => ready.has(`${w.kind}/${w.name}`)) ? true : undefined),
  300_000,
).catch((err: Error) => fail(`${err.message}\n${service.logTail()}`));
const countsInstalled = proxyCounts();
// The kernel's high-water mark catches what the 100 ms samples miss.
const installRss = Math.max(...rss, service.peakRssKiB());

console.log(
  `knative-fleet run (pid ${service.pid}, ${values.entry}/cli${values["node-args"] ? ` with ${values["node-args"]}` : ""}), hub + 2 spokes, poll interval ${values["poll-interval"]}`,
);
console.log(
  `fleet repo push -> first CR on the hub: ${((Math.min(...created.values()) - pushed) / 1000).toFixed(1)} s\n`,
);
// The child's log reaches its file through a pipe: wait for each CR's settling step to be there.
const steps = await waitUntil(
  "the step timeline in the log",
  async () => {
    const lines = stepLines(service.logFile);
    const settled = (w: (typeof WORKLOAD)[number]) =>
      lines.some((l) => l.kind === w.kind && l.step === "checkDeployments" && l.next === "settle");
    return WORKLOAD.every(settled) ? lines : undefined;
  },
  15_000,
).catch(() => stepLines(service.logFile));
for (const w of WORKLOAD) {
  const key = `${w.kind}/${w.name}`;
  const t0 = created.get(key)!;
  const times = [...available.get(w.kind)!.values()];
  const lastAvailable = Math.max(...times);
  const s = (t: number) => `${((t - t0) / 1000).toFixed(2)} s`;
  console.log(`${w.kind} ${FLEET_NAMESPACE}/${w.name} on ${w.spoke.name}:`);
  console.log(`  create -> Ready                          ${s(ready.get(key)!)}`);
  console.log(`  create -> last Deployment Available      ${s(lastAvailable)} (${times.length} Deployments)`);
  console.log(
    `  Ready after the spoke's rollout          ${((ready.get(key)! - lastAvailable) / 1000).toFixed(2)} s`,
  );
  const requests = countsInstalled.get(w.spoke.name)!.minus(countsBefore.get(w.spoke.name)!);
  console.log(`  spoke requests during install            ${requests}`);
  console.log("  step timeline (from the CR's creation; pass = one reconcile):");
  const wall = (ms: number) => ms - (performance.timeOrigin + t0);
  for (const line of steps.filter((l) => l.kind === w.kind && l.cr === `${FLEET_NAMESPACE}/${w.name}`)) {
    const start = wall(line.startedAt);
    console.log(
      `    ${(start / 1000).toFixed(2).padStart(6)} s -> ${((start + line.ms) / 1000).toFixed(2).padStart(6)} s  ${line.step}${line.next && line.next !== "continue" ? ` (${line.next})` : ""}`,
    );
  }
}

if (idleSeconds > 0) {
  await sleep(idleSeconds * 1_000);
  const countsIdle = proxyCounts();
  for (const spoke of spokes)
    console.log(
      `\nspoke requests in ${idleSeconds} idle s after Ready, ${spoke.name}: ${countsIdle.get(spoke.name)!.minus(countsInstalled.get(spoke.name)!)}`,
    );
}
const peakRss = Math.max(...rss, service.peakRssKiB());
console.log(
  `\nRSS: start ${mib(startRss)}, peak during install ${mib(installRss)}, peak overall ${mib(peakRss)}, end ${mib(service.rssKiB())}`,
);
console.log(
  `V8 heap (sampled every 250 ms): used peak ${mib(heap.used)}, total peak ${mib(heap.total)}, external peak ${mib(heap.external)}`,
);

clearInterval(sampler);
clearInterval(heapSampler);
for (const informer of [...hubWatches, ...spokeWatches]) informer.stop();
await service.stop();
if (!values.keep) await clearSandbox();
await git.close();
for (const proxy of proxies.values()) await proxy.close();
if (ownSandbox) await down(sandbox.stateDir);
process.exit(0);

function fail(message: string): never {
  console.error(`bench-perf: ${message}`);
  process.exit(1);
}

function mib(kib: number): string {
  return `${(kib / 1024).toFixed(0)} MiB`;
}

interface RequestCount {
  reads: number;
  writes: number;
  watches: number;
  minus(other: RequestCount): string;
}

/** Requests the proxy forwarded per spoke: reads (GET), watches (GET ?watch), writes (everything else). */
function proxyCounts(): Map<string, RequestCount> {
  const counts = new Map<string, RequestCount>();
  for (const spoke of spokes) {
    const lines = [...proxies.get(spoke.name)!.handled];
    const watches = lines.filter((h) => h.startsWith("GET ") && /[?&]watch=(1|true)/.test(h)).length;
    const reads = lines.filter((h) => h.startsWith("GET ")).length - watches;
    const count: RequestCount = {
      reads,
      writes: lines.length - reads - watches,
      watches,
      minus: (o) =>
        `${count.reads - o.reads} reads, ${count.writes - o.writes} writes, ${count.watches - o.watches} watches`,
    };
    counts.set(spoke.name, count);
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
 * Removes the workload: its hub CRs (finalizers dropped: no reconciler runs now) and, on the spokes, the
 * install namespaces, the Knative CRDs and the cluster-scoped objects knative-fleet labelled, so a run starts
 * from spokes as a fresh sandbox has them.
 */
async function clearSandbox(): Promise<void> {
  for (const kind of ["KnativeServing", "KnativeEventing"]) {
    const crs = await waitUntil(`${kind} served`, () =>
      hub.list(OPERATOR_API_VERSION, kind, { namespace: FLEET_NAMESPACE }).catch(() => undefined),
    );
    await forceDeleteCrs(hub, crs.items);
  }
  const managed = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;
  await Promise.all(
    WORKLOAD.map(async ({ spoke, namespace }) => {
      const client: KubeClient = spokeClients.get(spoke.name)!;
      for (const [apiVersion, kind] of CLUSTER_SCOPED) {
        const { items } = await client.list(apiVersion, kind, { labelSelector: managed });
        for (const item of items) await client.delete(apiVersion, kind, undefined, item.metadata.name ?? "");
      }
      const crds = await client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition");
      for (const crd of crds.items.filter((c) => /knative\.dev$/.test(c.metadata.name ?? "")))
        await client.delete(crd.apiVersion, crd.kind, undefined, crd.metadata.name ?? "");
      for (const ns of [namespace, "kourier-system"]) await client.delete("v1", "Namespace", undefined, ns);
      await waitUntil(
        `${spoke.name} cleared`,
        async () => ((await client.get("v1", "Namespace", undefined, namespace)) ? undefined : true),
        180_000,
      );
    }),
  );
}
