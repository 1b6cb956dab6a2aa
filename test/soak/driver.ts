import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { createCa, serverExtensions, signedCert } from "../sandbox/pki.ts";
import type { Sandbox } from "../sandbox/sandbox.ts";
import { startGitServer } from "../support/git-server.ts";
import { adminClient, installFleetCrds } from "../support/hub.ts";
import { startClusterProxy } from "../support/loopback-proxies.ts";
import { seededRandom } from "../support/seeded-random.ts";
import { cleanSpokes } from "../support/spokes.ts";
import {
  type GitCommit,
  gitHistoryViolations,
  INVARIANTS,
  type Invariant,
  judgeLogLine,
  parseRefUpdate,
} from "./checks.ts";
import { DEFAULT_FAULT_KINDS, type FaultKind, type FaultRecord, Faults } from "./faults.ts";
import { BOT_AUTHOR, minorOf, type ProcessRuntime, SoakFleet } from "./fleet.ts";
import { type ExpectedCr, nextPush, warmUpPushes } from "./model.ts";
import { anchorsOn, notReady, Observer, type ResourceSample, withTimeout } from "./observer.ts";

const execFileAsync = promisify(execFile);

// The soak: two fleets side by side on one sandbox, one per configuration (two replicas with leader
// election; three with sharding), each with its own repository, namespaces and spokes. For the given time
// it runs rounds: an active phase of random pushes, ClusterProfile churn and faults (all from one seed),
// then the faults stop and every cluster must converge within the bound. At the end every CR is deleted and
// must be finalized, the spokes must be left clean, and the logs, the Git history and the resources are
// judged. Every invariant is a counter (checks.ts); the report says where each violation happened.

export interface SoakOptions {
  sandbox: Sandbox;
  /** How long rounds are started for (setup, the last convergence and the cleanup come on top). */
  durationMs: number;
  seed: number;
  /** Spokes per fleet: the sandbox needs that many for each fleet. */
  spokesPerFleet: number;
  /** Which fleets run (default both): leader election, sharding. */
  modes?: readonly ("leader" | "sharding")[];
  runtime: ProcessRuntime;
  workDir: string;
  /** How long the fleet may take to converge once faults stopped (and for the first install, twice that). */
  convergeBoundMs: number;
  /** The active phase of a round, and the pace inside it (seconds between a fleet's pushes, between faults). */
  roundMs: number;
  pushEverySeconds: [number, number];
  faultEverySeconds: [number, number];
  churnEverySeconds: [number, number];
  /** Faults in progress at once, at most. */
  maxFaults: number;
  /** The kinds of fault injected (default all). */
  faultKinds?: readonly FaultKind[];
  /** Before the rounds, walk every release of the window (model.ts warmUpPushes): the long pace does. */
  warmUp: boolean;
  /** Ends the run early (an interrupt): the round in progress winds down and converges, then the end as usual. */
  stop?: AbortSignal;
  log: (line: string) => void;
}

export interface PushRecord {
  fleet: string;
  kind: string;
  message: string;
  at: number;
  /** Seconds from the push until the fleet was converged on it; undefined when a newer push came first. */
  readySeconds?: number;
}

export interface SoakResult {
  options: Omit<SoakOptions, "sandbox" | "log" | "runtime" | "faultKinds" | "stop"> & {
    runtime: string;
    spokes: number;
    faultKinds: readonly FaultKind[];
  };
  startedAt: number;
  endedAt: number;
  /** When the warm-up's last push had converged (Date.now()), when there was one. */
  warmUpEndedAt?: number;
  /** The round after which an interrupt ended the run, when one did. */
  endedEarlyAfterRound?: number;
  fleets: { repo: string; mode: string; replicas: string[]; spokes: readonly string[] }[];
  counters: Record<Invariant, number>;
  violations: { invariant: Invariant; at: number; step: string; evidence: string }[];
  pushes: PushRecord[];
  faults: FaultRecord[];
  churn: { kind: string; target: string; at: number }[];
  initialInstallSeconds: number | undefined;
  convergence: { round: number; afterSeconds: number | undefined; differences: string[] }[];
  finalized: { key: string; seconds: number; withoutCleanup: boolean }[];
  resources: Map<string, ResourceSample[]>;
  spokeWatches: { at: number; open: number }[];
  replicaExits: { replica: string; pid: number; exit: string; killedByFault: boolean }[];
  logSummary: { level: number; summary: string; count: number }[];
  checks: Observer["counts"];
  pluginRuns: { total: number; delayed: number };
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const { sandbox, log } = options;
  const rng = seededRandom(options.seed);
  const between = ([min, max]: [number, number]) => (min + rng() * (max - min)) * 1_000;
  const startedAt = Date.now();
  const spokeNames = sandbox.spokes.map((s) => s.name);
  const modes = options.modes ?? ["leader", "sharding"];
  const spokesNeeded = modes.length * options.spokesPerFleet;
  if (spokeNames.length < spokesNeeded)
    throw new Error(`the soak needs ${spokesNeeded} spokes, the sandbox has ${spokeNames.length}`);
  const used = spokeNames.slice(0, spokesNeeded);
  const hub = adminClient(sandbox.hub);
  const clients = new Map<string, KubeClient>([
    ["hub", adminClient(sandbox.hub)],
    ...sandbox.spokes.map((s) => [s.name, adminClient(s)] as const),
  ]);
  await installFleetCrds(hub);
  await cleanSpokes(sandbox, used);

  // One proxy in front of every spoke (its certificate from a CA of the soak's own): it counts what reaches
  // the spokes and which requests (watches) stay open.
  const pki = join(options.workDir, "proxy-pki");
  mkdirSync(pki, { recursive: true });
  createCa(pki, "knative-fleet-soak-proxy");
  const server = signedCert(pki, "server", "/CN=soak-proxy", serverExtensions(["IP:127.0.0.1"]));
  const proxy = await startClusterProxy({
    key: readFileSync(server.key, "utf8"),
    cert: readFileSync(server.cert, "utf8"),
    // Two routes to each spoke: re-pointing a ClusterProfile from one to the other changes its server.
    routes: Object.fromEntries(
      sandbox.spokes.flatMap((s) => [
        [s.name, s.server],
        [`${s.name}-alt`, s.server],
      ]),
    ),
    upstreamCa: sandbox.spokes.map((s) => Buffer.from(s.caData, "base64").toString("utf8")).join("\n"),
  });
  const git = await startGitServer();
  const context = {
    sandbox,
    hub,
    git,
    proxy: { url: proxy.url, caData: readFileSync(join(pki, "ca.crt")).toString("base64") },
    runtime: options.runtime,
    workDir: options.workDir,
    log,
  };
  const layouts = { leader: { id: "leader", replicas: 2 }, sharding: { id: "shards", replicas: 3 } } as const;
  const fleets = modes.map(
    (mode, i) =>
      new SoakFleet(context, {
        ...layouts[mode],
        mode,
        spokes: used.slice(i * options.spokesPerFleet, (i + 1) * options.spokesPerFleet),
      }),
  );
  let step = "setting up";
  const faults = new Faults({
    sandbox,
    git,
    fleets,
    clients,
    rng,
    kinds: options.faultKinds,
    log,
    violate: (invariant, evidence) => observer.violate(invariant, evidence),
  });
  const observer = new Observer({
    hub: adminClient(sandbox.hub),
    fleets,
    spokes: clients,
    hubPort: Number(new URL(sandbox.hub.server).port),
    openSpokeRequests: () => proxy.inFlight(),
    step: () => [step, ...faults.describeActive()].join("; "),
  });
  const pushes: PushRecord[] = [];
  const churn: SoakResult["churn"] = [];
  const convergence: SoakResult["convergence"] = [];
  let initialInstallSeconds: number | undefined;
  let endedEarlyAfterRound: number | undefined;
  let warmUpEndedAt: number | undefined;

  const result = (): SoakResult => {
    const counters = Object.fromEntries(Object.keys(INVARIANTS).map((k) => [k, 0])) as Record<
      Invariant,
      number
    >;
    for (const v of observer.violations) counters[v.invariant]++;
    return {
      options: {
        durationMs: options.durationMs,
        seed: options.seed,
        spokesPerFleet: options.spokesPerFleet,
        workDir: options.workDir,
        convergeBoundMs: options.convergeBoundMs,
        warmUp: options.warmUp,
        roundMs: options.roundMs,
        pushEverySeconds: options.pushEverySeconds,
        faultEverySeconds: options.faultEverySeconds,
        churnEverySeconds: options.churnEverySeconds,
        maxFaults: options.maxFaults,
        faultKinds: options.faultKinds ?? DEFAULT_FAULT_KINDS,
        runtime: `node ${[...options.runtime.nodeArgs, options.runtime.entry.replace(/^.*\/(src|dist)\//, "$1/")].join(" ")}`,
        spokes: used.length,
      },
      startedAt,
      endedAt: Date.now(),
      ...(endedEarlyAfterRound !== undefined && { endedEarlyAfterRound }),
      ...(warmUpEndedAt !== undefined && { warmUpEndedAt }),
      fleets: fleets.map((f) => ({
        repo: f.repo,
        mode: f.mode,
        replicas: f.replicas.map((r) => r.name),
        spokes: f.layout.spokes,
      })),
      counters,
      violations: observer.violations,
      pushes,
      faults: faults.history,
      churn,
      initialInstallSeconds,
      convergence,
      finalized: observer.finalized,
      resources: observer.resources,
      spokeWatches: observer.spokeWatches,
      replicaExits: fleets.flatMap((f) =>
        f.replicas.flatMap((r) =>
          r.instances
            .filter((i) => i.exit !== undefined && !i.stoppedAtEnd)
            .map((i) => ({
              replica: r.name,
              pid: i.pid,
              exit: i.exit!,
              killedByFault: i.killedByFault ?? false,
            })),
        ),
      ),
      logSummary,
      checks: observer.counts,
      pluginRuns,
    };
  };
  let logSummary: SoakResult["logSummary"] = [];
  let pluginRuns = { total: 0, delayed: 0 };

  // Push -> converged: each fleet is checked every few seconds; its last push is measured when it first
  // converges on it. The rounds' convergence waits on the same checks.
  const converged = new Map<SoakFleet, { at: number; revisions: number; differences: string[] }>();
  let watching = true;
  const watchConvergence = async (fleet: SoakFleet) => {
    while (watching) {
      const revisions = fleet.revisions.length;
      await observer
        .answerHeldPrune(fleet)
        .catch((err: Error) => log(`answering ${fleet.repo}'s held prune failed: ${err.message}`));
      const differences = await observer
        .differences(fleet)
        .catch((err: Error) => [`cannot check: ${err.message}`]);
      if (differences.length === 0 && fleet.revisions.length === revisions) {
        const record = pushes.findLast((p) => p.fleet === fleet.repo);
        if (record && record.readySeconds === undefined && pushes.indexOf(record) === lastPushIndex(fleet))
          record.readySeconds = (Date.now() - record.at) / 1000;
      }
      converged.set(fleet, { at: Date.now(), revisions, differences });
      await sleep(3_000);
    }
  };
  const lastPushIndex = (fleet: SoakFleet) => pushes.findLastIndex((p) => p.fleet === fleet.repo);
  /** Waits until every fleet is converged on its current revision (checked after `since`), or the bound. */
  const allConverged = async (since: number, boundMs: number): Promise<string[]> => {
    const deadline = Date.now() + boundMs;
    for (;;) {
      const states = fleets.map((f) => converged.get(f));
      const fresh = states.every((s, i) => s && s.at > since && s.revisions === fleets[i]!.revisions.length);
      if (fresh && states.every((s) => s!.differences.length === 0)) return [];
      if (Date.now() > deadline)
        return fleets.flatMap((f, i) =>
          (states[i]?.differences ?? ["never checked"]).map((d) => `${f.repo}: ${d}`),
        );
      await sleep(1_000);
    }
  };

  try {
    log(
      `soak: seed ${options.seed}; fleets ${fleets.map((f) => `${f.repo} (${f.mode}) on ${f.layout.spokes.join(", ")}`).join("; ")}`,
    );
    await Promise.all(fleets.map((f) => f.setUp()));
    await observer.start();
    for (const fleet of fleets) void watchConvergence(fleet);
    step = "first install";
    const installStart = Date.now();
    const left = await allConverged(installStart, 2 * options.convergeBoundMs);
    if (left.length === 0) initialInstallSeconds = (Date.now() - installStart) / 1000;
    else
      observer.violate(
        "converged",
        `the first install did not converge within ${(2 * options.convergeBoundMs) / 1000} s: ${left.join("; ")}`,
      );
    log(
      `soak: first install ${left.length === 0 ? `converged in ${initialInstallSeconds} s` : "did not converge"}`,
    );

    const stopped = () => options.stop?.aborted === true;
    if (options.warmUp) {
      step = "warm-up";
      const warmUps = fleets.map((f) => warmUpPushes(f.layout, f.files, () => f.marker()));
      for (let i = 0; i < Math.max(...warmUps.map((w) => w.length)) && !stopped(); i++) {
        const since = Date.now();
        for (const [index, fleet] of fleets.entries()) {
          const push = warmUps[index]![i];
          if (!push) continue;
          await fleet.push(push);
          pushes.push({ fleet: fleet.repo, kind: push.kind, message: push.message, at: Date.now() });
          log(`push ${fleet.repo}: ${push.message}`);
        }
        const differences = await allConverged(since, options.convergeBoundMs);
        if (differences.length > 0)
          observer.violate("converged", `warm-up: not converged: ${differences.join("; ")}`);
      }
      warmUpEndedAt = Date.now();
      log(
        `soak: warm-up done ${((warmUpEndedAt - installStart) / 1000).toFixed(0)} s after the first install began`,
      );
    }

    const churnTasks = new Set<Promise<void>>();
    for (let round = 1; Date.now() - installStart < options.durationMs || round === 1; round++) {
      if (stopped()) break;
      const roundEnd = Date.now() + options.roundMs;
      const nextPushAt = new Map(fleets.map((f) => [f, Date.now() + between(options.pushEverySeconds)]));
      const nextChurnAt = new Map(fleets.map((f) => [f, Date.now() + between(options.churnEverySeconds)]));
      let nextFaultAt = Date.now() + between(options.faultEverySeconds) / 2;
      step = `round ${round}`;
      while (Date.now() < roundEnd && !stopped()) {
        for (const fleet of fleets) {
          if (Date.now() >= nextPushAt.get(fleet)!) {
            nextPushAt.set(fleet, Date.now() + between(options.pushEverySeconds));
            await pushOnce(fleet, true);
          }
          if (Date.now() >= nextChurnAt.get(fleet)!) {
            nextChurnAt.set(fleet, Date.now() + between(options.churnEverySeconds));
            const task = churnOnce(fleet)
              .catch((err: Error) => log(`churn ${fleet.repo} failed: ${err.message}`))
              .finally(() => churnTasks.delete(task));
            churnTasks.add(task);
          }
        }
        if (Date.now() >= nextFaultAt && faults.running < options.maxFaults) {
          faults.startRandom();
          nextFaultAt = Date.now() + between(options.faultEverySeconds);
        }
        await sleep(500);
      }
      step = `round ${round}: faults stopping`;
      await faults.settle();
      await Promise.all(churnTasks);
      for (const fleet of fleets) if (fleet.files.broken.size > 0) await pushOnce(fleet, false);
      const quiet = Math.max(faults.lastEnd ?? 0, ...pushes.map((p) => p.at), ...churn.map((c) => c.at));
      step = `round ${round}: converging`;
      const differences = await allConverged(quiet, options.convergeBoundMs);
      const afterSeconds = differences.length === 0 ? (Date.now() - quiet) / 1000 : undefined;
      convergence.push({ round, afterSeconds, differences });
      if (differences.length > 0)
        observer.violate(
          "converged",
          `round ${round}: not converged ${options.convergeBoundMs / 1000} s after the faults stopped: ${differences.join("; ")}`,
        );
      log(
        `soak: round ${round} ${afterSeconds === undefined ? "did NOT converge" : `converged ${afterSeconds.toFixed(1)} s after the faults stopped`}; ${pushes.length} pushes, ${faults.history.length} faults so far`,
      );
      if (stopped()) endedEarlyAfterRound = round;
    }

    // The end: every CR deleted, as a person removes a fleet (the files first: an empty fleet prunes
    // nothing, so the hub CRs are deleted by hand); each must be finalized and leave its spoke clean.
    step = "removing the fleets";
    watching = false;
    observer.stopChecking();
    await Promise.all(
      fleets.map(async (fleet) => {
        await git.pushChange(fleet.repo, {
          message: "remove the fleet",
          files: Object.fromEntries([...(await fleetPaths(git.repoPath(fleet.repo)))].map((p) => [p, null])),
        });
      }),
    );
    // Deleted again while a sync of a commit before the removal may still bring one back.
    const deadline = Date.now() + options.convergeBoundMs;
    let remaining = await Promise.all(fleets.map((f) => f.hubCrs()));
    while (remaining.some((r) => r.length > 0) && Date.now() < deadline) {
      for (const cr of remaining.flat().filter((c) => !c.metadata.deletionTimestamp))
        await hub.delete(OPERATOR_API_VERSION, cr.kind, cr.metadata.namespace, cr.metadata.name!);
      await sleep(2_000);
      remaining = await Promise.all(fleets.map((f) => f.hubCrs()));
    }
    for (const cr of remaining.flat())
      observer.violate(
        "finalizers-complete",
        `${cr.kind} ${cr.metadata.namespace}/${cr.metadata.name} still there ${options.convergeBoundMs / 1000} s after its deletion: ${notReady(cr)}`,
      );
    step = "checking the spokes";
    for (const fleet of fleets)
      for (const spoke of fleet.layout.spokes) {
        const client = clients.get(spoke)!;
        const leftovers = await waitForClean(
          client,
          (a) => observer.releasedWithoutCleanup.has(`${a.kind} ${fleet.layout.namespace}/${a.name}`),
          options.convergeBoundMs,
        );
        for (const leftover of leftovers) observer.violate("no-spoke-leftovers", `${spoke}: ${leftover}`);
      }
    step = "judging";
    observer.stop();
    await Promise.all(fleets.map((f) => f.stopReplicas()));
    logSummary = judgeLogs(fleets, observer);
    for (const fleet of fleets) {
      for (const problem of await gitHistory(git.repoPath(fleet.repo), fleet))
        observer.violate("git-history", `${fleet.repo}: ${problem}`);
      if (existsSync(fleet.pluginRunsFile)) {
        const runs = readFileSync(fleet.pluginRunsFile, "utf8").trim().split("\n");
        pluginRuns = {
          total: pluginRuns.total + runs.length,
          delayed: pluginRuns.delayed + runs.filter((r) => !r.endsWith("delay=0")).length,
        };
      }
    }
    return result();
  } finally {
    watching = false;
    observer.stop();
    await faults.settle().catch(() => {});
    await Promise.all(fleets.map((f) => f.stopReplicas()));
    for (const fleet of fleets) await fleet.removeFromHub();
    await cleanSpokes(sandbox, used).catch((err: Error) =>
      log(`soak: cleaning the spokes failed: ${err.message}`),
    );
    await proxy.close();
    await git.close();
  }

  async function pushOnce(fleet: SoakFleet, mayBreak: boolean): Promise<void> {
    const settled = await versionsSettled(fleet);
    const push = nextPush(fleet.layout, fleet.files, {
      rng,
      marker: () => fleet.marker(),
      versionSettled: (kind) => settled.has(kind),
      mayBreak,
    });
    step = `${step.replace(/: push .*$/, "")}: push to ${fleet.repo} "${push.message}"`;
    await fleet.push(push);
    pushes.push({ fleet: fleet.repo, kind: push.kind, message: push.message, at: Date.now() });
    log(`push ${fleet.repo}: ${push.message}`);
  }

  /** The kinds whose CRs all run the version their files name: a minor may move on for them. */
  async function versionsSettled(fleet: SoakFleet): Promise<Set<ExpectedCr["kind"]>> {
    const crs = await fleet.hubCrs().catch(() => undefined);
    const settled = new Set<ExpectedCr["kind"]>();
    if (!crs || fleet.files.broken.size > 0) return settled;
    for (const kind of ["KnativeServing", "KnativeEventing"] as const) {
      const want =
        kind === "KnativeServing"
          ? [...fleet.files.serving.values()][0]?.version
          : fleet.files.placement?.version;
      const ofKind = crs.filter((c) => c.kind === kind);
      if (
        ofKind.every(
          (c) =>
            (c.spec as { version?: string }).version === want &&
            minorOf((c.status as { version?: string } | undefined)?.version) === want,
        )
      )
        settled.add(kind);
    }
    return settled;
  }

  /** One ClusterProfile change: a relabel (kept), a health flip or a delete and re-create (undone later). */
  async function churnOnce(fleet: SoakFleet): Promise<void> {
    const spoke = fleet.layout.spokes[Math.floor(rng() * fleet.layout.spokes.length)]!;
    const profile = fleet.inventory.get(spoke)!;
    if (!profile.exists || !profile.healthy) return; // a change of this profile is in progress
    const roll = rng();
    const seconds = 10 + rng() * 30;
    const record = (kind: string) => {
      churn.push({ kind, target: `${fleet.layout.profileNamespace}/${spoke}`, at: Date.now() });
      log(`churn ${fleet.repo}: ${kind} ${spoke}`);
    };
    if (roll < 0.5) {
      record("relabel");
      await fleet.relabel(spoke);
    } else if (roll < 0.75) {
      record("health-flip");
      await fleet.setHealthy(spoke, false);
      await sleep(seconds * 1_000);
      await fleet.setHealthy(spoke, true);
    } else {
      record("delete-and-recreate");
      await fleet.deleteProfile(spoke);
      await sleep(seconds * 1_000);
      await fleet.recreateProfile(spoke);
    }
  }
}

/** The fleet files of a repository's main branch. */
async function fleetPaths(repoPath: string): Promise<string[]> {
  const { stdout } = await execFileAsync(
    "git",
    ["ls-tree", "-r", "--name-only", "refs/heads/main", "clusters"],
    {
      cwd: repoPath,
    },
  );
  return stdout
    .trim()
    .split("\n")
    .filter((p) => p !== "");
}

/** The branch's history and its updates, judged (checks.ts gitHistoryViolations). */
async function gitHistory(repoPath: string, fleet: SoakFleet): Promise<string[]> {
  const { stdout } = await execFileAsync(
    "git",
    ["log", "--format=%H%x00%P%x00%T%x00%an", "refs/heads/main"],
    {
      cwd: repoPath,
      maxBuffer: 64 << 20,
    },
  );
  const commits: GitCommit[] = stdout
    .trim()
    .split("\n")
    .map((line) => {
      const [id, parents, tree, author] = line.split("\0") as [string, string, string, string];
      return { id, parents: parents.split(" ").filter((p) => p !== ""), tree, author };
    });
  const updates = readFileSync(fleet.hookLog, "utf8")
    .split("\n")
    .flatMap((line) => parseRefUpdate(line) ?? []);
  return gitHistoryViolations({
    commits,
    updates,
    personPushes: fleet.revisions.map((r) => ({ commit: r.commit, message: r.message })),
    botAuthor: BOT_AUTHOR,
  });
}

/**
 * Waits until the spoke holds no install of the fleet's CRs (but those `excused`: released without cleanup)
 * and the release namespaces of the others run no Deployment; what is left after `timeoutMs`, as evidence.
 */
async function waitForClean(
  spoke: KubeClient,
  excused: (anchor: { kind: string; name: string }) => boolean,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left: string[] = [];
    const anchors = await anchorsOn(spoke);
    for (const anchor of anchors.filter((a) => !excused(a)))
      left.push(`the anchor ${anchor.namespace}/${anchor.configMap} of ${anchor.kind} ${anchor.name}`);
    const kept = new Set(anchors.filter(excused).map((a) => a.namespace));
    if (kept.has("knative-serving")) kept.add("kourier-system");
    if (left.length === 0)
      for (const namespace of ["knative-serving", "knative-eventing", "kourier-system"].filter(
        (n) => !kept.has(n),
      )) {
        const deployments = await withTimeout(spoke.list("apps/v1", "Deployment", { namespace }));
        for (const d of deployments?.items ?? []) left.push(`Deployment ${namespace}/${d.metadata.name}`);
      }
    if (left.length === 0 || Date.now() > deadline) return left;
    await sleep(2_000);
  }
}

/** Every replica log line at warn or above: uncaught errors and unactionable error lines are violations. */
function judgeLogs(fleets: readonly SoakFleet[], observer: Observer): SoakResult["logSummary"] {
  const summary = new Map<string, { level: number; summary: string; count: number }>();
  for (const file of fleets.flatMap((f) => f.logFiles)) {
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").split("\n")) {
      const judgement = judgeLogLine(line);
      if (!judgement) continue;
      const key = `${judgement.level} ${judgement.summary}`;
      const entry = summary.get(key) ?? { level: judgement.level, summary: judgement.summary, count: 0 };
      entry.count++;
      summary.set(key, entry);
      if (judgement.uncaught)
        observer.violate("no-uncaught-errors", `${file.split("/").pop()}: ${judgement.uncaught}`);
      if (judgement.unactionable)
        observer.violate("actionable-error-lines", `${file.split("/").pop()}: ${judgement.unactionable}`);
    }
  }
  return [...summary.values()].sort((a, b) => b.level - a.level || b.count - a.count);
}

/** The two paces: `long` for the hour the report in docs/reliability.md comes from, `short` for CI. */
export const SOAK_PACES = {
  long: {
    durationMs: 60 * 60_000,
    spokesPerFleet: 3,
    convergeBoundMs: 300_000,
    roundMs: 150_000,
    pushEverySeconds: [12, 30],
    faultEverySeconds: [15, 35],
    churnEverySeconds: [25, 60],
    maxFaults: 2,
    warmUp: true,
  },
  short: {
    durationMs: 60_000,
    spokesPerFleet: 2,
    convergeBoundMs: 240_000,
    roundMs: 75_000,
    pushEverySeconds: [10, 18],
    faultEverySeconds: [8, 14],
    churnEverySeconds: [15, 30],
    maxFaults: 2,
    warmUp: false,
  },
} satisfies Record<string, Omit<SoakOptions, "sandbox" | "seed" | "runtime" | "workDir" | "log">>;
