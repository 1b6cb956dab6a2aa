import { createHmac, randomUUID } from "node:crypto";
import { rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { SHARD_GROUP_LABEL } from "../../src/api/labels.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { leasePath, listLeases } from "../../src/service/lease.ts";
import type { MemberLease } from "../../src/service/shard-lease.ts";
import { restartProcess, signalProcess } from "../sandbox/processes.ts";
import type { Sandbox } from "../sandbox/sandbox.ts";
import type { GitServer } from "../support/git-server.ts";
import { FORGERIES, forgedLease } from "../support/lease-forgery.ts";
import { waitUntil } from "../support/wait.ts";
import type { Invariant } from "./checks.ts";
import type { SoakFleet } from "./fleet.ts";
import { servingPath } from "./model.ts";
import { withTimeout } from "./observer.ts";

// The faults the soak injects, each from its start to its end (the thing is back): a spoke's API server
// frozen (SIGSTOP) or restarted, the hub's restarted, the git server down or answering 500, a replica
// SIGKILLed, a flood of webhook deliveries, a slow credential plugin. Each holds a target (a spoke, the hub,
// the git server, a fleet), so two faults never fight over one thing. A sharded fleet's member Leases are
// also rewritten by an adversary who may write Leases but cannot read the shard key (lease-forge), and the
// webhook flood comes as a burst of deliveries or as slow senders holding connections (a genuine delivery
// from another address must still be served: the webhook-served invariant).

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
  "lease-forge",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];
/** The faults a run starts unless --faults says otherwise: every kind. */
export const DEFAULT_FAULT_KINDS: readonly FaultKind[] = FAULT_KINDS;

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
  /** A violation a fault itself witnessed (the observer's counter). */
  violate: (invariant: Invariant, evidence: string) => void;
  /** The kinds of fault that may be started (all when unset). */
  kinds?: readonly FaultKind[];
  log: (line: string) => void;
}

/** A genuine push delivery of the fleet's head (a fleet file changed), and its signature. */
function pushDelivery(fleet: SoakFleet): { body: string; signed: string } {
  const body = JSON.stringify({
    ref: "refs/heads/main",
    after: fleet.revisions.at(-1)!.commit,
    commits: [{ added: [], removed: [], modified: [servingPath(fleet.layout.spokes[0]!)] }],
  });
  return { body, signed: `sha256=${createHmac("sha256", fleet.webhookSecret).update(body).digest("hex")}` };
}

/** Posts one push delivery to a replica's webhook: its HTTP status, or the error's name when none came. */
function deliver(port: number, body: string, signature: string, timeoutMs: number): Promise<string> {
  return fetch(`http://127.0.0.1:${port}/webhook`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-github-event": "push",
      "x-github-delivery": randomUUID(),
      "x-hub-signature-256": signature,
    },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  })
    .then(async (res) => {
      await res.arrayBuffer();
      return String(res.status);
    })
    .catch((err: Error) => err.name);
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
      {
        kind: "webhook-flood",
        target: `${fleet.repo}-webhook`,
        run: (r) =>
          rng() < 0.5 ? this.flood(r, fleet, 400) : this.slowFlood(r, fleet, between(rng, 10, 30)),
      },
      {
        kind: "slow-plugin",
        target: `${fleet.repo}-plugin`,
        run: (r) => this.slowPlugin(r, fleet, between(rng, 20, 50), between(rng, 3, 8)),
      },
    );
    if (fleet.mode === "sharding")
      candidates.push({
        kind: "lease-forge",
        target: `${fleet.repo}-leases`,
        run: (r) => this.forgeLeases(r, fleet, between(rng, 10, 40)),
      });
    const kinds = this.context.kinds ?? DEFAULT_FAULT_KINDS;
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
    const { body, signed } = pushDelivery(fleet);
    const send = async (i: number) => {
      const replica = fleet.replicas[i % fleet.replicas.length]!;
      const forged = `sha256=${"0".repeat(64)}`;
      const status = await deliver(replica.webhookPort, body, i % 2 === 0 ? signed : forged, 10_000);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    };
    for (let i = 0; i < count; i += 40) await Promise.all(Array.from({ length: 40 }, (_, j) => send(i + j)));
    record.detail = `${count} deliveries: ${[...statuses].map(([s, n]) => `${n}× ${s}`).join(", ")}`;
  }

  /**
   * Slow senders: 20 connections from 127.0.0.2, each with a made-up signature, sending its body a byte a
   * second, for `seconds`; meanwhile a genuine signed delivery from 127.0.0.1 each second must be served.
   */
  private async slowFlood(record: FaultRecord, fleet: SoakFleet, seconds: number): Promise<void> {
    const replica = fleet.replicas[Math.floor(this.context.rng() * fleet.replicas.length)]!;
    const port = replica.webhookPort;
    const { body, signed } = pushDelivery(fleet);
    const sockets: Socket[] = [];
    const stopAt = Date.now() + seconds * 1_000;
    const drip = (socket: Socket) => {
      const timer = setInterval(() => {
        if (Date.now() > stopAt || socket.destroyed) return clearInterval(timer);
        socket.write("{");
      }, 1_000);
    };
    for (let i = 0; i < 20; i++) {
      const socket = connect({ host: "127.0.0.1", port, localAddress: "127.0.0.2" });
      socket.on("error", () => {});
      socket.write(
        `POST /webhook HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n` +
          `x-github-event: push\r\nx-github-delivery: ${randomUUID()}\r\n` +
          `x-hub-signature-256: sha256=${"0".repeat(64)}\r\ncontent-length: 100000\r\n\r\n`,
      );
      drip(socket);
      sockets.push(socket);
    }
    const statuses = new Map<string, number>();
    try {
      while (Date.now() < stopAt) {
        const status = await deliver(port, body, signed, 5_000);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        // A replica restarting (another fault) answers nothing for a while: only an answer other than
        // accepted, from a replica that is up, is the webhook failing a genuine sender.
        if (!/^2\d\d$/.test(status) && replica.process !== undefined && /^\d+$/.test(status))
          this.context.violate(
            "webhook-served",
            `${fleet.repo} ${replica.name}: a genuine delivery from 127.0.0.1 got ${status} while 20 slow senders from 127.0.0.2 held connections`,
          );
        await sleep(1_000);
      }
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    record.detail = `20 slow senders for ${seconds} s on ${replica.name}; genuine deliveries: ${[...statuses].map(([s, n]) => `${n}× ${s}`).join(", ")}`;
  }

  /**
   * For `seconds`, every 20-100 ms one member Lease of the sharded fleet is rewritten as one who may write
   * Leases (not read the shard key) would: the forgeries of test/support/lease-forgery.ts. The soak's
   * one-owner-per-cluster and waves counters must stay 0 meanwhile.
   */
  private async forgeLeases(record: FaultRecord, fleet: SoakFleet, seconds: number): Promise<void> {
    const hub = this.context.clients.get("hub")!;
    const { namespace } = fleet.layout;
    const history = new Map<string, MemberLease[]>();
    const done = new Map<string, number>();
    const stopAt = Date.now() + seconds * 1_000;
    const { rng } = this.context;
    while (Date.now() < stopAt) {
      const leases = await listLeases(hub, namespace, `${SHARD_GROUP_LABEL}=knative-fleet`).catch(
        () => [] as MemberLease[],
      );
      for (const lease of leases)
        history.set(lease.metadata.name, [...(history.get(lease.metadata.name) ?? []), lease].slice(-50));
      const target = leases[Math.floor(rng() * leases.length)];
      if (target) {
        const how = FORGERIES[Math.floor(rng() * FORGERIES.length)]!;
        const name = target.metadata.name;
        const forged = forgedLease(how, target, {
          others: leases.filter((l) => l.metadata.name !== name),
          history: history.get(name) ?? [],
          random: rng,
        });
        const path = await leasePath(hub, namespace, name);
        const write =
          forged === undefined
            ? { method: "DELETE" as const, path }
            : {
                method: "PUT" as const,
                path,
                body: {
                  ...forged,
                  metadata: { ...forged.metadata, resourceVersion: target.metadata.resourceVersion },
                },
              };
        const ok = await hub.rest.request(write).then(
          () => true,
          () => false,
        );
        if (ok) done.set(how, (done.get(how) ?? 0) + 1);
      }
      await sleep(between(rng, 20, 100));
    }
    record.detail = `${seconds} s of forged member Leases: ${[...done].map(([how, n]) => `${n}× ${how}`).join(", ")}`;
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
