import { setTimeout as sleep } from "node:timers/promises";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/observability/log.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { memberLeaseName } from "../../../src/service/shard-lease.ts";
import { ShardMembership, shardOwner } from "../../../src/service/sharding.ts";
import { FORGERIES, type Forgery, forgedLease } from "../../support/lease-forgery.ts";
import { type HubLink, leaseHub } from "../../support/lease-hub.ts";
import { seededRandom } from "../../support/seeded-random.ts";

// The sharding promise, checked over random interleavings: a cluster is never worked on by two replicas at
// once, whatever happens to them, and once the faults stop every cluster has one owner again. Up to four
// real ShardMemberships run over a hub that keeps member Leases in memory (test/support/lease-hub.ts), in
// real time with short timings (600 ms lease, 400 ms renew deadline, 100 ms retry period). A random
// schedule cuts members off the hub and heals them, slows their link past the renew deadline, kills them
// (nothing more leaves the process), stops them, and adds new ones; and an adversary who may write Leases
// (not read the shard key) rewrites a member's Lease every few ms until the next step: another member's
// acknowledgement copied in, an older version of it put back, its renewTime frozen, the Lease deleted, a
// "left" or random annotations written. Each member meanwhile reconciles
// clusters it owns, each reconcile taking up to 100 ms; `settle` waits for those of clusters no longer
// owned, as the service's does. Every 5 ms the test checks that no cluster is owned by, or being reconciled
// on, two live members.
//
// KNATIVE_FLEET_SHARDING_MODEL_RUNS sets the number of schedules (each takes a few seconds);
// KNATIVE_FLEET_MODEL_SEED replays one.

const RUNS = Number(process.env.KNATIVE_FLEET_SHARDING_MODEL_RUNS ?? 10);
const LEASE_MS = 600;
const DEADLINE_MS = 400;
const RETRY_MS = 100;
const RECONCILE_MAX_MS = 100;
const CLUSTERS = Array.from({ length: 12 }, (_, i) => `fleet-system/spoke-${i + 1}`);
const SLOTS = 4;

type Action =
  | { kind: "cut" | "heal" | "crash" | "stop"; slot: number }
  | { kind: "slow"; slot: number; latencyMs: number }
  | { kind: "forge"; slot: number; how: Forgery }
  /** `hiding`: an adversary deletes every other replica's Lease, again and again, as the newcomer starts. */
  | { kind: "join"; hiding?: boolean };
interface Step {
  action: Action;
  waitMs: number;
}

interface Replica {
  name: string;
  identity: string;
  membership: ShardMembership;
  link: HubLink;
  /** Dead: a crashed process does nothing, so it works on nothing. */
  alive: boolean;
  /** Stopped or crashed: it takes no part in the final share. */
  leaving: boolean;
  /** Clusters being reconciled here, and what to call when the last one of a cluster not owned ends. */
  busy: Set<string>;
  idle: (() => void)[];
  worker: NodeJS.Timeout;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

function replica(hub: ReturnType<typeof leaseHub>, name: string, random: () => number): Replica {
  const link = hub.link();
  const self = {
    name,
    identity: processIdentity(name),
    link,
    alive: true,
    leaving: false,
    busy: new Set<string>(),
    idle: [],
  } as unknown as Replica;
  const unownedBusy = () => [...self.busy].some((c) => !self.membership.owns(c));
  self.membership = new ShardMembership({
    client: link.client,
    key: hub.key,
    namespace: "knative-fleet",
    group: "knative-fleet",
    identity: self.identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    log: silentLogger,
    onNarrowed: () => {},
    settle: () =>
      unownedBusy() ? new Promise<void>((resolve) => self.idle.push(resolve)) : Promise.resolve(),
    onWidened: () => {},
    vouch: async () => true,
  });
  // The reconciler: now and then one cluster it owns, for up to RECONCILE_MAX_MS (a cut hub link does not
  // stop it: the spokes are reachable).
  self.worker = setInterval(() => {
    if (!self.alive) return;
    const owned = CLUSTERS.filter((c) => self.membership.owns(c) && !self.busy.has(c));
    const cluster = owned[Math.floor(random() * owned.length)];
    if (cluster === undefined) return;
    self.busy.add(cluster);
    setTimeout(
      () => {
        self.busy.delete(cluster);
        if (!unownedBusy()) for (const resolve of self.idle.splice(0)) resolve();
      },
      10 + random() * (RECONCILE_MAX_MS - 10),
    );
  }, 15);
  self.membership.start();
  cleanups.push(() => {
    clearInterval(self.worker);
    self.link.cut = true; // nothing more reaches the hub of this run
    void self.membership.stop();
  });
  return self;
}

/** The situations that test the Leases' proofs; the test counts the runs each occurs in (at least 5%). */
const TRIGGERS = [
  "an acknowledgement forged (ack, copy, replay) while a replica hands clusters on",
  "a live replica's Lease deleted or its renewTime frozen",
  "a replica joins while every other live replica's Lease is being deleted",
] as const;
type Trigger = (typeof TRIGGERS)[number];
const triggerRuns = new Map<Trigger, number>(TRIGGERS.map((t) => [t, 0]));
let triggered = new Set<Trigger>();

/** A live replica that owns less than its share of its newest view: narrowed, not yet widened. */
const handingOff = (replicas: readonly (Replica | undefined)[]) =>
  replicas.some(
    (r) =>
      r?.alive &&
      CLUSTERS.some((c) => shardOwner(r.membership.members, c) === r.identity && !r.membership.owns(c)),
  );

/** One forgery of the member Lease of `target`, by one who may write any Lease field but cannot read the key. */
function forge(
  hub: ReturnType<typeof leaseHub>,
  target: Replica,
  how: Forgery,
  random: () => number,
  replicas: readonly (Replica | undefined)[],
): void {
  const name = memberLeaseName("knative-fleet", target.identity);
  const others = [...hub.leases.values()].filter((l) => l.metadata.name !== name);
  if (hub.leases.has(name)) {
    if ((how === "ack" || how === "copy" || how === "replay") && handingOff(replicas))
      triggered.add(TRIGGERS[0]);
    if ((how === "delete" || how === "freeze") && target.alive && !target.leaving) triggered.add(TRIGGERS[1]);
  }
  hub.tamper(name, (lease) =>
    forgedLease(how, lease, { others, history: hub.history.get(name) ?? [], random }),
  );
}

/** Runs one schedule; returns what went wrong: a cluster held by two, or no single owner once the faults stopped. */
async function run(steps: readonly Step[], seed: number): Promise<string[]> {
  const hub = leaseHub();
  const random = seededRandom(seed);
  const slots: (Replica | undefined)[] = [];
  let joined = 0;
  const join = () => {
    if (slots.length < SLOTS) slots.push(replica(hub, `replica-${joined++}`, random));
  };
  join();
  join();
  const violations: string[] = [];
  let step = -1;
  const check = () => {
    for (const cluster of CLUSTERS) {
      const holders = slots.filter(
        (r): r is Replica => !!r?.alive && (r.membership.owns(cluster) || r.busy.has(cluster)),
      );
      if (holders.length > 1 && violations.length < 5)
        violations.push(
          `step ${step}: ${cluster} held by ${holders
            .map((r) => `${r.name} (${r.membership.owns(cluster) ? "owns" : "still reconciling"})`)
            .join(" and ")}`,
        );
    }
  };
  const checker = setInterval(check, 5);
  cleanups.push(() => clearInterval(checker));

  const forgers: NodeJS.Timeout[] = [];
  const stopForging = () => {
    for (const forger of forgers.splice(0)) clearInterval(forger);
  };
  cleanups.push(stopForging);
  for (const [index, { action, waitMs }] of steps.entries()) {
    step = index;
    stopForging(); // an adversary keeps at it until the next step
    const target = action.kind === "join" ? undefined : slots[action.slot];
    switch (action.kind) {
      case "join":
        if (action.hiding && slots.length < SLOTS) {
          const others = slots.filter((r): r is Replica => !!r?.alive && !r.leaving);
          if (others.length > 0) triggered.add(TRIGGERS[2]);
          for (const other of others) {
            const name = memberLeaseName("knative-fleet", other.identity);
            hub.tamper(name, () => undefined);
            forgers.push(setInterval(() => hub.tamper(name, () => undefined), 10 + random() * 30));
          }
        }
        join();
        break;
      case "cut":
        if (target) target.link.cut = true;
        break;
      case "heal":
        if (target?.alive) target.link.heal();
        break;
      case "slow":
        if (target) target.link.latencyMs = action.latencyMs;
        break;
      case "crash":
        if (target?.alive) {
          target.alive = false;
          target.leaving = true;
          target.link.cut = true; // what it sent last never arrives
          clearInterval(target.worker);
          void target.membership.stop();
        }
        break;
      case "forge":
        if (target) {
          const forger = setInterval(() => forge(hub, target, action.how, random, slots), 10 + random() * 30);
          forgers.push(forger);
        }
        break;
      case "stop":
        if (target?.alive && !target.leaving) {
          target.leaving = true;
          void target.membership.stop();
        }
        break;
    }
    await sleep(waitMs);
  }

  // The faults stop: every live member that stays owns its share, one owner per cluster.
  step = steps.length;
  stopForging();
  const staying = slots.filter((r): r is Replica => !!r?.alive && !r.leaving);
  for (const r of staying) {
    r.link.latencyMs = 2;
    r.link.heal();
  }
  const deadline = performance.now() + 8 * LEASE_MS;
  const settled = () => CLUSTERS.every((c) => staying.filter((r) => r.membership.owns(c)).length === 1);
  while (staying.length > 0 && !settled() && performance.now() < deadline) await sleep(20);
  check();
  clearInterval(checker);
  if (staying.length > 0 && !settled())
    violations.push(
      `after the faults stopped, ${8 * LEASE_MS} ms were not enough for one owner per cluster: ${CLUSTERS.map(
        (c) =>
          `${c}: ${
            staying
              .filter((r) => r.membership.owns(c))
              .map((r) => r.name)
              .join("+") || "none"
          }`,
      ).join(", ")}`,
    );
  return violations;
}

const slot = fc.nat(SLOTS - 1);
const action: fc.Arbitrary<Action> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant("cut" as const), slot }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant("heal" as const), slot }), weight: 3 },
  {
    arbitrary: fc.record({
      kind: fc.constant("slow" as const),
      slot,
      latencyMs: fc.integer({ min: 0, max: 2 * DEADLINE_MS }),
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ kind: fc.constant("crash" as const), slot }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant("stop" as const), slot }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant("join" as const) }), weight: 2 },
  {
    arbitrary: fc.record({ kind: fc.constant("forge" as const), slot, how: fc.constantFrom(...FORGERIES) }),
    weight: 4,
  },
);
const randomSteps = fc.array(fc.record({ action, waitMs: fc.integer({ min: 0, max: LEASE_MS + 200 }) }), {
  minLength: 3,
  maxLength: 10,
});
// Aimed: somewhere in each schedule a replica joins and, while the others hand it clusters, an adversary
// forges acknowledgements; and somewhere one of the first two replicas' Lease is deleted or frozen again and
// again (the situations the proofs exist for; random steps alone meet them in few runs); and in half the
// runs the newcomer starts while every other replica's Lease is being deleted (it must not see itself alone).
const forging = (slots: fc.Arbitrary<number>, hows: readonly Forgery[]) =>
  fc.record({
    action: fc.record({ kind: fc.constant("forge" as const), slot: slots, how: fc.constantFrom(...hows) }),
    waitMs: fc.integer({ min: 100, max: LEASE_MS + 200 }),
  });
const aimed = fc.tuple(
  fc.integer({ min: 0, max: 60 }),
  forging(slot, ["ack", "copy", "replay"]),
  forging(fc.nat(1), ["delete", "freeze"]),
  fc.boolean(),
);
const schedule = fc
  .tuple(randomSteps, aimed, fc.nat(), fc.nat())
  .map(([steps, [joinWaitMs, acks, gone, hiding], at, at2]): Step[] => {
    const withJoin = [
      ...steps.slice(0, at % (steps.length + 1)),
      { action: { kind: "join", hiding }, waitMs: joinWaitMs },
      acks,
      ...steps.slice(at % (steps.length + 1)),
    ] as Step[];
    const position = at2 % (withJoin.length + 1);
    return [...withJoin.slice(0, position), gone, ...withJoin.slice(position)];
  });

describe("sharding over random interleavings", () => {
  it(
    "never lets two live replicas hold a cluster, and gives every cluster one owner once the faults stop",
    async () => {
      const warnings: string[] = [];
      const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
      process.on("warning", onWarning);
      try {
        await fc.assert(
          fc.asyncProperty(schedule, fc.integer(), async (steps, seed) => {
            triggered = new Set();
            const violations = await run(steps, seed);
            for (const trigger of triggered) triggerRuns.set(trigger, triggerRuns.get(trigger)! + 1);
            for (const cleanup of cleanups.splice(0)) cleanup();
            expect(violations, JSON.stringify(steps)).toEqual([]);
          }),
          {
            numRuns: RUNS,
            endOnFailure: true, // shrinking replays schedules in real time: report the first one instead
            ...(process.env.KNATIVE_FLEET_MODEL_SEED
              ? { seed: Number(process.env.KNATIVE_FLEET_MODEL_SEED) }
              : {}),
          },
        );
      } finally {
        process.off("warning", onWarning);
      }
      expect(warnings, "process warnings (a negative timer: a late answer)").toEqual([]);
      // A guarantee whose situation never occurs is checked by nothing: printed, and held at 5% of the runs.
      for (const [trigger, runs] of triggerRuns)
        console.log(`trigger ${trigger}: ${runs} of ${RUNS} runs (${((100 * runs) / RUNS).toFixed(1)}%)`);
      for (const [trigger, runs] of triggerRuns) expect(runs, trigger).toBeGreaterThanOrEqual(RUNS * 0.05);
    },
    RUNS * 20_000,
  );
});
