import { createHmac, randomUUID } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient } from "../../src/kube/client.ts";
import { restartProcess, signalProcess } from "../sandbox/processes.ts";
import type { Sandbox } from "../sandbox/sandbox.ts";
import type { GitServer } from "../support/git-server.ts";
import { waitUntil } from "../support/wait.ts";
import type { SoakFleet } from "./fleet.ts";
import { servingPath } from "./model.ts";
import { withTimeout } from "./observer.ts";

// The faults the soak injects, each from its start to its end (the thing is back): a spoke's API server
// frozen (SIGSTOP) or restarted, the hub's restarted, the git server down or answering 500, a replica
// SIGKILLed, a flood of webhook deliveries, a slow credential plugin. Each holds a target (a spoke, the hub,
// the git server, a fleet), so two faults never fight over one thing.

export const FAULT_KINDS = [
  "spoke-freeze",
  "spoke-restart",
  "hub-freeze",
  "hub-restart",
  "replica-partition",
  "git-down",
  "git-500",
  "replica-kill",
  "webhook-flood",
  "slow-plugin",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRecord {
  kind: FaultKind;
  target: string;
  startedAt: number;
  endedAt?: number;
  detail: string;
}

export interface FaultContext {
  sandbox: Sandbox;
  git: GitServer;
  fleets: readonly SoakFleet[];
  /** An admin client per cluster (hub and spokes), to wait until a restarted API server answers. */
  clients: ReadonlyMap<string, KubeClient>;
  rng: () => number;
  /** The kinds of fault that may be started (all when unset). */
  kinds?: readonly FaultKind[];
  log: (line: string) => void;
}

const between = (rng: () => number, min: number, max: number) => Math.round(min + rng() * (max - min));

export class Faults {
  readonly history: FaultRecord[] = [];
  private readonly active = new Map<string, Promise<void>>();
  private readonly context: FaultContext;

  constructor(context: FaultContext) {
    this.context = context;
  }

  get running(): number {
    return this.active.size;
  }

  /** When the last fault ended (Date.now()), or undefined when none has. */
  get lastEnd(): number | undefined {
    const ends = this.history.flatMap((f) => (f.endedAt === undefined ? [] : [f.endedAt]));
    return ends.length > 0 ? Math.max(...ends) : undefined;
  }

  /** The faults in progress, for a violation's step. */
  describeActive(): string[] {
    return this.history
      .filter((f) => f.endedAt === undefined)
      .map((f) => `${f.kind} ${f.target} (${f.detail})`);
  }

  /** Starts a random fault whose target is free; returns false when none could start. */
  startRandom(): boolean {
    const { rng, fleets } = this.context;
    const spokes = fleets.flatMap((f) => f.layout.spokes);
    const candidates: { kind: FaultKind; target: string; run: (record: FaultRecord) => Promise<void> }[] = [];
    const spoke = spokes[Math.floor(rng() * spokes.length)]!;
    const fleet = fleets[Math.floor(rng() * fleets.length)]!;
    candidates.push(
      { kind: "spoke-freeze", target: spoke, run: (r) => this.freeze(r, spoke, between(rng, 10, 30)) },
      { kind: "spoke-restart", target: spoke, run: (r) => this.restart(r, spoke, between(rng, 1, 5)) },
      { kind: "hub-freeze", target: "hub", run: (r) => this.freeze(r, "hub", between(rng, 5, 20)) },
      { kind: "hub-restart", target: "hub", run: (r) => this.restart(r, "hub", between(rng, 0, 2)) },
      {
        kind: "replica-partition",
        target: fleet.repo,
        run: (r) => this.partition(r, fleet, between(rng, 10, 40)),
      },
      { kind: "git-down", target: "git", run: (r) => this.gitDown(r, between(rng, 10, 40)) },
      { kind: "git-500", target: "git", run: (r) => this.git500(r, between(rng, 10, 40)) },
      { kind: "replica-kill", target: fleet.repo, run: (r) => this.killReplica(r, fleet) },
      { kind: "webhook-flood", target: `${fleet.repo}-webhook`, run: (r) => this.flood(r, fleet, 400) },
      {
        kind: "slow-plugin",
        target: `${fleet.repo}-plugin`,
        run: (r) => this.slowPlugin(r, fleet, between(rng, 20, 50), between(rng, 3, 8)),
      },
    );
    const kinds = this.context.kinds ?? FAULT_KINDS;
    const free = candidates.filter((c) => kinds.includes(c.kind) && !this.active.has(c.target));
    if (free.length === 0) return false;
    const choice = free[Math.floor(rng() * free.length)]!;
    const record: FaultRecord = {
      kind: choice.kind,
      target: choice.target,
      startedAt: Date.now(),
      detail: "",
    };
    this.history.push(record);
    const done = choice
      .run(record)
      .catch((err: Error) => {
        record.detail += ` (the fault itself failed: ${err.message})`;
      })
      .finally(() => {
        record.endedAt = Date.now();
        this.active.delete(choice.target);
        this.context.log(`fault end: ${record.kind} ${record.target} ${record.detail}`);
      });
    this.active.set(choice.target, done);
    this.context.log(`fault: ${record.kind} ${record.target}`);
    return true;
  }

  /** Resolves when every fault in progress has ended. */
  async settle(): Promise<void> {
    await Promise.all(this.active.values());
  }

  private async freeze(record: FaultRecord, cluster: string, seconds: number): Promise<void> {
    record.detail = `frozen ${seconds} s`;
    const { stateDir } = this.context.sandbox;
    signalProcess(stateDir, `${cluster}-kube-apiserver`, "SIGSTOP");
    try {
      await sleep(seconds * 1_000);
    } finally {
      signalProcess(stateDir, `${cluster}-kube-apiserver`, "SIGCONT");
    }
  }

  /**
   * One replica cut off from the hub (its connections go silent) while the others reach it: a leader must
   * step down before another may take over, a shard member must drop its clusters before they move.
   */
  private async partition(record: FaultRecord, fleet: SoakFleet, seconds: number): Promise<void> {
    const candidates = fleet.replicas.filter((r) => !r.longRunner && r.process?.running && r.hubPath);
    const victim = candidates[Math.floor(this.context.rng() * candidates.length)];
    if (!victim) {
      record.detail = "no replica to partition";
      return;
    }
    const leading = (await victim.process!.metric("knative_fleet_leader")) === 1;
    record.detail = `${victim.name} (pid ${victim.process!.pid}${leading ? ", the leader" : ""}) cut off from the hub for ${seconds} s`;
    victim.hubPath!.freeze();
    try {
      await sleep(seconds * 1_000);
    } finally {
      victim.hubPath!.thaw();
    }
  }

  private async restart(record: FaultRecord, cluster: string, downSeconds: number): Promise<void> {
    const started = Date.now();
    await restartProcess(this.context.sandbox.stateDir, `${cluster}-kube-apiserver`, downSeconds * 1_000);
    const client = this.context.clients.get(cluster)!;
    await waitUntil(
      `${cluster} kube-apiserver back`,
      async () =>
        (await withTimeout(client.get("v1", "Namespace", undefined, "default"), 2_000)) ? true : undefined,
      120_000,
    );
    record.detail = `down ${downSeconds} s, answering again after ${((Date.now() - started) / 1000).toFixed(1)} s`;
  }

  private async gitDown(record: FaultRecord, seconds: number): Promise<void> {
    record.detail = `refusing connections ${seconds} s`;
    await this.context.git.stop();
    try {
      await sleep(seconds * 1_000);
    } finally {
      await this.context.git.start();
    }
  }

  private async git500(record: FaultRecord, seconds: number): Promise<void> {
    record.detail = `answering 500 for ${seconds} s`;
    this.context.git.failNext(Number.MAX_SAFE_INTEGER, 500);
    try {
      await sleep(seconds * 1_000);
    } finally {
      this.context.git.failNext(0);
    }
  }

  /**
   * SIGKILL: in leader mode the leader (the Git side and every reconcile move); with sharding a replica that
   * is not the long runner (its clusters move), the leader when that is one of them.
   */
  private async killReplica(record: FaultRecord, fleet: SoakFleet): Promise<void> {
    // Right after a hub restart nobody may lead yet: the kill waits for a leader (a minute at most).
    const leader = await waitUntil(`a leader in ${fleet.repo}`, () => fleet.leader(), 60_000).catch(
      () => undefined,
    );
    const candidates = fleet.replicas.filter((r) => !r.longRunner && r.process?.running);
    const victim =
      fleet.mode === "leader"
        ? leader
        : leader && !leader.longRunner
          ? leader
          : candidates[Math.floor(this.context.rng() * candidates.length)];
    if (!victim) {
      record.detail = "no replica to kill (none leads yet)";
      return;
    }
    const pid = fleet.kill(victim);
    record.detail = `${victim.name} (pid ${pid}${victim === leader ? ", the leader" : ""}) killed`;
    await waitUntil(
      `${victim.name} restarted`,
      async () =>
        victim.process && victim.process.pid !== pid && (await victim.process.get("/readyz")).status === 200
          ? true
          : undefined,
      120_000,
    );
  }

  /** Deliveries to every replica's webhook at once: half signed pushes of a fleet file, half forged. */
  private async flood(record: FaultRecord, fleet: SoakFleet, count: number): Promise<void> {
    const statuses = new Map<string, number>();
    const head = fleet.revisions.at(-1)!.commit;
    const body = JSON.stringify({
      ref: "refs/heads/main",
      after: head,
      commits: [{ added: [], removed: [], modified: [servingPath(fleet.layout.spokes[0]!)] }],
    });
    const signed = `sha256=${createHmac("sha256", fleet.webhookSecret).update(body).digest("hex")}`;
    const send = async (i: number) => {
      const replica = fleet.replicas[i % fleet.replicas.length]!;
      const status = await fetch(`http://127.0.0.1:${replica.webhookPort}/webhook`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": "push",
          "x-github-delivery": randomUUID(),
          "x-hub-signature-256": i % 2 === 0 ? signed : `sha256=${"0".repeat(64)}`,
        },
        body,
        signal: AbortSignal.timeout(10_000),
      })
        .then(async (res) => {
          await res.arrayBuffer();
          return String(res.status);
        })
        .catch((err: Error) => err.name);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    };
    for (let i = 0; i < count; i += 40) await Promise.all(Array.from({ length: 40 }, (_, j) => send(i + j)));
    record.detail = `${count} deliveries: ${[...statuses].map(([s, n]) => `${n}× ${s}`).join(", ")}`;
  }

  /**
   * Every credential plugin run of the fleet waits `delay` seconds, for `seconds`; one of its spokes'
   * ClusterProfiles is re-pointed meanwhile, so its client is built anew through the slow plugin.
   */
  private async slowPlugin(
    record: FaultRecord,
    fleet: SoakFleet,
    seconds: number,
    delay: number,
  ): Promise<void> {
    const spoke = fleet.layout.spokes[Math.floor(this.context.rng() * fleet.layout.spokes.length)]!;
    writeFileSync(fleet.slowPluginFile, String(delay));
    try {
      const server = await fleet.repointProfile(spoke);
      record.detail = `plugin runs wait ${delay} s, for ${seconds} s; ${spoke} re-pointed to ${server}`;
      await sleep(seconds * 1_000);
    } finally {
      rmSync(fleet.slowPluginFile, { force: true });
    }
  }
}
