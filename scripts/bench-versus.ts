// Side by side at N spokes (issue #44): one upstream Knative Operator process (../shared/reference, its
// multicluster feature) against one knative-fleet replica (the built CLI as the image runs it), each
// installing Serving 1.22 with Kourier on every spoke from clean spokes, in rounds whose order alternates
// (upstream first in odd rounds), so a slow minute of the machine falls on both. Both reach the spokes
// through counting proxies (ClusterProfiles in `bench-versus` naming them), so each side's requests are its
// own. Per run, the clocks starting at the hub on both sides (the first CR there, the first being deleted;
// knative-fleet's Git poll before them is reported on its own): → every CR Ready (the hub CR's condition),
// the spoke requests until then and per idle minute after, → clean (every hub CR gone and every spoke's
// install Deployments gone: the workloads stopped), the controller's peak RSS (VmHWM) and its CPU
// (credential plugins included) for the install and at rest. Prints each run, then the medians and the
// ratios knative-fleet / upstream (at most 1: knative-fleet at or below upstream).
// Usage: [KNATIVE_FLEET_SANDBOX=<state dir>] node scripts/bench-versus.ts [--spokes 20] [--rounds 3]
//        [--idle-seconds 60] [--poll-interval 1s] [--side knative-fleet|upstream] [--ready-limit-seconds 900]
// --side runs one side only (to look into it between full runs): its runs, no ratios. A run that does not
// reach all Ready within --ready-limit-seconds is reported as such and left out of the medians (the upstream
// operator can sit on "`.rules accessor error`" for good where an aggregated ClusterRole it reads has no
// rules); the rounds go on.
// Without KNATIVE_FLEET_SANDBOX a light sandbox of --spokes spokes is started here and stopped at the end
// (`npm run sandbox -- up --spokes 20 --light` for one to keep). `npm run build` first.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { inParallel } from "../src/apply/parallel.ts";
import type { KubeClient } from "../src/kube/client.ts";
import type { KubeObject } from "../src/kube/object.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { down, readSandbox, type Sandbox, up } from "../test/sandbox/sandbox.ts";
import { builtCli, imageRuntime } from "../test/support/dockerfile.ts";
import { type CrOptions, crObject, crText } from "../test/support/fleet-files.ts";
import { startFleetProcess } from "../test/support/fleet-service.ts";
import { startGitServer } from "../test/support/git-server.ts";
import { forceDeleteCrs, KOURIER, startUpstream } from "../test/support/handover.ts";
import { adminClient, countingProxyOf, ensureNamespace, installFleetCrds } from "../test/support/hub.ts";
import type { LoopbackProxy } from "../test/support/loopback-proxies.ts";
import { cpuSeconds, peakRssKiB } from "../test/support/service-process.ts";
import { conditionsOf } from "../test/support/serving-fleet.ts";
import { clearKnative } from "../test/support/spokes.ts";
import { prepareUpstreamHub } from "../test/support/upstream-operator.ts";
import { waitUntil } from "../test/support/wait.ts";

const { values } = parseArgs({
  options: {
    spokes: { type: "string", default: "20" },
    rounds: { type: "string", default: "3" },
    "idle-seconds": { type: "string", default: "60" },
    "poll-interval": { type: "string", default: "1s" },
    side: { type: "string" },
    "ready-limit-seconds": { type: "string", default: "900" },
  },
});
const spokeCount = Number(values.spokes);
const rounds = Number(values.rounds);
const idleSeconds = Number(values["idle-seconds"]);
const readyLimitSeconds = Number(values["ready-limit-seconds"]);
if (![spokeCount, rounds, idleSeconds, readyLimitSeconds].every((n) => Number.isInteger(n) && n >= 1))
  fail("--spokes, --rounds, --idle-seconds and --ready-limit-seconds take whole numbers of at least 1");

const SIDES = ["upstream", "knative-fleet"] as const;
type Side = (typeof SIDES)[number];
const onlySide = values.side as Side | undefined;
if (onlySide !== undefined && !SIDES.includes(onlySide)) fail(`--side takes ${SIDES.join(" or ")}`);
const FLEET_NAMESPACE = "knative-fleet";
/** Where the upstream operator's CRs live: this build installs into the CR's namespace. */
const UPSTREAM_NAMESPACE = "knative-serving";
const INSTALL_NAMESPACES = ["knative-serving", "kourier-system"];
const PROFILE_NAMESPACE = "bench-versus";
const REPO = "fleet";
const TIME_LIMIT_MS = 900_000;

const fleetCli = (() => {
  try {
    return builtCli();
  } catch (err) {
    return fail((err as Error).message);
  }
})();
const scratch = mkdtempSync(join(tmpdir(), "bench-versus-"));
const image = imageRuntime(scratch);

const stateDir = process.env[SANDBOX_ENV];
const sandbox: Sandbox =
  stateDir === undefined
    ? await up({
        stateDir: mkdtempSync(join(tmpdir(), "bench-versus-sandbox-")),
        spokes: spokeCount,
        spokeKind: "light",
      })
    : (readSandbox(stateDir) ?? fail(`no sandbox in ${stateDir}`));
if (sandbox.spokes.length < spokeCount)
  fail(`the sandbox has ${sandbox.spokes.length} spokes, not ${spokeCount}`);
const spokes = sandbox.spokes.slice(0, spokeCount);
const spokeClients = spokes.map((s) => adminClient(s));

const hub = adminClient(sandbox.hub);
await installFleetCrds(hub);
await prepareUpstreamHub(hub);
for (const ns of [FLEET_NAMESPACE, UPSTREAM_NAMESPACE, PROFILE_NAMESPACE]) await ensureNamespace(hub, ns);

// A counting proxy per spoke (each spoke has its own CA), named by a copy of its ClusterProfile.
const proxies: LoopbackProxy[] = [];
for (const spoke of spokes) proxies.push(await countingProxyOf(hub, sandbox, spoke, PROFILE_NAMESPACE));
const git = await startGitServer();
await git.createRepo(REPO, { "README.md": "bench-versus fleet\n" });

/** One Serving per spoke, the same spec on both sides; only the hub namespace differs. */
const servingCr = (spoke: string, namespace: string): CrOptions => ({
  name: `serving-${spoke}`,
  namespace,
  cluster: spoke,
  clusterNamespace: PROFILE_NAMESPACE,
  version: "1.22",
  spec: KOURIER,
});

/** A controller under measurement: a child process, observed from outside. */
interface Controller {
  /** Where its hub CRs live. */
  namespace: string;
  start(): Promise<{ pid: number; stop(): Promise<unknown>; logTail(): string }>;
  create(): Promise<unknown>;
  remove(): Promise<unknown>;
}

const controllers: Record<Side, Controller> = {
  "knative-fleet": {
    namespace: FLEET_NAMESPACE,
    async start() {
      const service = startFleetProcess({
        sandbox,
        service: { repositoryUrl: git.url(REPO), namespace: FLEET_NAMESPACE },
        config: {
          allowedClusterProfileNamespaces: [PROFILE_NAMESPACE],
          remoteDeploymentsPollInterval: values["poll-interval"],
          // The bench deletes the whole fleet on purpose, with no person there to confirm the prune.
          prune: { prune: true, allowEmpty: true, maxPruneFraction: 1 },
        },
        scratch,
        name: "knative-fleet",
        env: image.env,
        entry: fleetCli,
        nodeArgs: image.nodeArgs,
      });
      await service.ready().catch((err: Error) => fail(err.message));
      return { pid: service.pid, stop: () => service.stop(), logTail: () => service.logTail() };
    },
    create: () =>
      git.pushChange(REPO, {
        message: `Serving with Kourier on ${spokeCount} spokes`,
        files: Object.fromEntries(
          spokes.map((s) => [`clusters/serving-${s.name}.yaml`, crText(servingCr(s.name, FLEET_NAMESPACE))]),
        ),
      }),
    remove: () =>
      git.pushChange(REPO, {
        message: "Serving removed from every spoke",
        files: Object.fromEntries(spokes.map((s) => [`clusters/serving-${s.name}.yaml`, null])),
      }),
  },
  upstream: {
    namespace: UPSTREAM_NAMESPACE,
    async start() {
      const operator = await startUpstream(sandbox, {
        providerFile: sandbox.providerFile,
        pollInterval: values["poll-interval"],
      });
      return { pid: operator.pid, stop: () => operator.stop(), logTail: () => operator.tail() };
    },
    async create() {
      for (const s of spokes) await hub.apply(crObject(servingCr(s.name, UPSTREAM_NAMESPACE)));
    },
    async remove() {
      for (const s of spokes)
        await hub.delete(OPERATOR_API_VERSION, "KnativeServing", UPSTREAM_NAMESPACE, `serving-${s.name}`);
    },
  },
};

interface Figures {
  /** create (knative-fleet: the push) → the first CR on the hub, delete → the first CR being deleted (s). */
  toHub: number;
  toDeleting: number;
  /** create → every CR Ready, and → the first, in seconds. */
  allReady: number;
  firstReady: number;
  /** Spoke requests (all spokes) per install, and per idle minute after. */
  installRequests: number;
  idleRequestsPerMinute: number;
  /** delete → every hub CR gone, → every install's Deployments gone (s). */
  deleteToHubGone: number;
  deleteToClean: number;
  peakRssMiB: number;
  /** CPU seconds for the install (to all Ready), and per idle minute. */
  installCpu: number;
  idleCpuPerMinute: number;
}

const runs: { side: Side; round: number; figures: Figures }[] = [];
/** Runs that did not reach all Ready within the limit, by side. */
const unconverged: Record<Side, number> = { upstream: 0, "knative-fleet": 0 };
for (let round = 1; round <= rounds; round++) {
  const order = round % 2 === 1 ? SIDES : [...SIDES].reverse();
  for (const side of order.filter((s) => onlySide === undefined || s === onlySide)) {
    await clear();
    const figures = await measure(side, controllers[side]);
    if (figures === undefined) unconverged[side]++;
    else runs.push({ side, round, figures });
    console.log(
      `round ${round} ${side}: ${figures === undefined ? "did not converge" : JSON.stringify(figures)}`,
    );
  }
}
if (onlySide === undefined) printTable();
await clear();
await git.close();
for (const proxy of proxies) await proxy.close();
if (stateDir === undefined) await down(sandbox.stateDir);
process.exit(0);

/** The run's figures, or undefined when it did not reach all Ready within the limit. */
async function measure(side: Side, controller: Controller): Promise<Figures | undefined> {
  const running = await controller.start();
  await sleep(3_000); // settled: knative-fleet's first poll has run (an empty fleet)
  const requestsAt = () => proxies.reduce((sum, p) => sum + p.handled.length, 0);
  const cpu = () => cpuSeconds(running.pid, true);
  const before = { requests: requestsAt(), cpu: cpu() };
  const pushed = performance.now();
  await controller.create();
  // The clocks start at the hub on both sides: knative-fleet's Git poll (every 5 s here, a webhook's push
  // event in production) is not the controller's work; it is reported on its own.
  const created = await observedAt(
    controller.namespace,
    `${side}: the first Serving on the hub`,
    (crs) => crs.length > 0,
  );
  let firstReady = Number.NaN;
  let toldAt = created;
  const converged = await waitUntil(
    `${side}: every Serving Ready`,
    async () => {
      const crs = await servings(controller.namespace);
      const notReady = crs.filter(
        (cr) => !conditionsOf(cr).some((c) => c.type === "Ready" && c.status === "True"),
      );
      const ready = crs.length - notReady.length;
      if (ready > 0 && Number.isNaN(firstReady)) firstReady = performance.now() - created;
      if (performance.now() - toldAt > 30_000) {
        // A run that does not converge says why while it waits, not only at the time limit.
        toldAt = performance.now();
        const why =
          conditionsOf(notReady[0]).find((c) => c.type === "Ready")?.message ?? "no Ready condition";
        console.log(
          `   ${side}: ${ready} of ${spokeCount} Ready; ${notReady[0]?.metadata.name ?? "not created yet"}: ${why}`,
        );
      }
      return ready === spokeCount ? true : undefined;
    },
    readyLimitSeconds * 1_000,
  ).then(
    () => true,
    (err: Error) => {
      console.log(`   ${side} did not converge: ${err.message}\n${running.logTail()}`);
      return false;
    },
  );
  if (!converged) {
    await running.stop();
    return undefined;
  }
  const allReady = performance.now() - created;
  const installed = { requests: requestsAt(), cpu: cpu() };
  await sleep(idleSeconds * 1_000);
  const rested = { requests: requestsAt(), cpu: cpu() };
  const removing = performance.now();
  await controller.remove();
  const removed = await observedAt(
    controller.namespace,
    `${side}: a Serving being deleted`,
    (crs) => crs.length < spokeCount || crs.some((cr) => cr.metadata.deletionTimestamp !== undefined),
  );
  let deleteToHubGone = Number.NaN;
  await waitUntil(
    `${side}: every Serving gone, its Deployments too`,
    async () => {
      if (Number.isNaN(deleteToHubGone)) {
        if ((await servings(controller.namespace)).length > 0) return undefined;
        deleteToHubGone = performance.now() - removed;
      }
      const left = await Promise.all(spokeClients.map(installDeployments));
      return left.every((n) => n === 0) ? true : undefined;
    },
    TIME_LIMIT_MS,
  ).catch((err: Error) => fail(`${err.message}\n${running.logTail()}`));
  const deleteToClean = performance.now() - removed;
  const peakRssMiB = peakRssKiB(running.pid) / 1024;
  await running.stop();
  const perMinute = (n: number) => (n * 60) / idleSeconds;
  return {
    toHub: (created - pushed) / 1000,
    toDeleting: (removed - removing) / 1000,
    allReady: allReady / 1000,
    firstReady: firstReady / 1000,
    installRequests: (installed.requests - before.requests) / spokeCount,
    idleRequestsPerMinute: perMinute(rested.requests - installed.requests),
    deleteToHubGone: deleteToHubGone / 1000,
    deleteToClean: deleteToClean / 1000,
    peakRssMiB,
    installCpu: installed.cpu - before.cpu,
    idleCpuPerMinute: perMinute(rested.cpu - installed.cpu),
  };
}

/** When the hub's Servings of the run first meet `done` (polled every 100 ms). */
async function observedAt(
  namespace: string,
  what: string,
  done: (crs: KubeObject[]) => boolean,
): Promise<number> {
  const deadline = performance.now() + TIME_LIMIT_MS;
  while (performance.now() < deadline) {
    if (done(await servings(namespace))) return performance.now();
    await sleep(100);
  }
  return fail(`timed out waiting for ${what}`);
}

async function servings(namespace: string) {
  return (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace })).items;
}

async function installDeployments(client: KubeClient): Promise<number> {
  let count = 0;
  for (const namespace of INSTALL_NAMESPACES)
    count += (await client.list("apps/v1", "Deployment", { namespace })).items.length;
  return count;
}

/** Both sides' hub CRs dropped (no controller runs between runs) and every spoke as a fresh sandbox has it. */
async function clear(): Promise<void> {
  for (const namespace of [FLEET_NAMESPACE, UPSTREAM_NAMESPACE])
    await forceDeleteCrs(hub, await servings(namespace));
  // A few spokes at a time, each tried again: twenty cleared at once time out the sandbox's shared etcd.
  await inParallel(spokeClients, 4, async (client) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await clearKnative(client, INSTALL_NAMESPACES);
      } catch (err) {
        if (attempt === 3) throw err;
        console.log(`   clearing a spoke failed (${(err as Error).message}); again in 5 s`);
        await sleep(5_000);
      }
    }
  });
}

function printTable(): void {
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const rows: [string, keyof Figures, number][] = [
    ["create (knative-fleet: push) → first CR on the hub (s)", "toHub", 1],
    ["delete (knative-fleet: push) → first CR deleting (s)", "toDeleting", 1],
    ["first CR on the hub → first Ready (s)", "firstReady", 1],
    ["first CR on the hub → all Ready (s)", "allReady", 1],
    ["spoke requests per install", "installRequests", 0],
    ["spoke requests per idle minute (all spokes)", "idleRequestsPerMinute", 0],
    ["first CR deleting → hub CRs gone (s)", "deleteToHubGone", 1],
    ["first CR deleting → clean (s)", "deleteToClean", 1],
    ["peak RSS (MiB)", "peakRssMiB", 0],
    ["CPU for the install (s)", "installCpu", 1],
    ["CPU per idle minute (s)", "idleCpuPerMinute", 2],
  ];
  console.log(
    `\n${spokeCount} spokes, Serving 1.22 + Kourier on each, ${rounds} rounds (medians; each run in brackets)\n`,
  );
  console.log("| | upstream operator | knative-fleet | knative-fleet / upstream |");
  console.log("|---|---|---|---|");
  console.log(
    `| runs that did not reach all Ready in ${readyLimitSeconds} s | ${unconverged.upstream} | ${unconverged["knative-fleet"]} | |`,
  );
  for (const [label, key, digits] of rows) {
    const of = (side: Side) => runs.filter((r) => r.side === side).map((r) => r.figures[key]);
    const cell = (side: Side) =>
      `${median(of(side)).toFixed(digits)} (${of(side)
        .map((x) => x.toFixed(digits))
        .join(", ")})`;
    const ratio = median(of("knative-fleet")) / median(of("upstream"));
    console.log(`| ${label} | ${cell("upstream")} | ${cell("knative-fleet")} | ${ratio.toFixed(2)} |`);
  }
}

function fail(message: string): never {
  console.error(`bench-versus: ${message}`);
  process.exit(1);
}
