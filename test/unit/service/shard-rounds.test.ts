import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { SHARD_GROUP_LABEL } from "../../../src/api/labels.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { LEASE_API_VERSION } from "../../../src/service/lease.ts";
import { viewDigest } from "../../../src/service/sharding.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { leaseHub } from "../../support/lease-hub.ts";
import { CLUSTERS, membersStoppedAfterEach, until, writeRecord } from "../../support/shard-member.ts";

// A shard member's rounds over the in-memory hub: how often it looks, what it writes and when, what its
// constructor and start/stop refuse, and what it says. Short timings (600 ms lease, 400 ms renew deadline,
// 100 ms retry period) unless a test says otherwise; counts come from the writes the hub kept, not the clock.

const RETRY_MS = 100;

// Rounds in real time: a loaded machine's timers make a test of a few seconds take several times that.
vi.setConfig({ testTimeout: 20_000 });

const member = membersStoppedAfterEach();
const messages = (log: ReturnType<typeof capturingLogger>, msg: string) =>
  log.lines().filter((line) => line.msg === msg);

describe("a shard member's pace", () => {
  it("looks four times as often while a hand-off is under way as once it settled", async () => {
    const hub = leaseHub();
    // A retry period long next to a loaded machine's timer delays: the two paces stay well apart.
    const a = member(hub, "replica-a", {
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 400,
    });
    // A member that renews its Lease but never acknowledges a's view: a's hand-off stays under way.
    const stuck = processIdentity("replica-stuck");
    writeRecord(hub, stuck);
    const renewing = setInterval(() => writeRecord(hub, stuck), RETRY_MS);
    const writesOfA = () => hub.history.get(a.leaseName)?.length ?? 0;
    /** a's writes in two seconds: one renewal per round, in a hand-off as once settled. */
    const writesIn2s = async () => {
      const before = writesOfA();
      await sleep(2_000);
      return writesOfA() - before;
    };
    let handingOff: number;
    try {
      await until("a counts the stuck member", () => a.membership.members.includes(stuck));
      handingOff = await writesIn2s();
      expect(a.widened, "no share while the stuck member has not acknowledged").toEqual([]);
    } finally {
      clearInterval(renewing);
    }
    // The stuck member leaves (its proven left record): a is alone, acknowledged by all, and settles.
    writeRecord(hub, stuck, { view: "left" });
    await until("a widens", () => a.widened.length > 0);
    await sleep(500);
    const settled = await writesIn2s();
    // Settled: a round per retry period (a loaded machine only makes fewer). In a hand-off: every quarter.
    expect(settled).toBeLessThanOrEqual(2_000 / 400 + 2);
    expect(handingOff).toBeGreaterThanOrEqual(2 * settled);
  });

  it("stops at once in the middle of a pause, without waiting for the next round", async () => {
    const hub = leaseHub();
    // A retry period of 20 s: after its first round the member pauses 5 s (a hand-off's quarter).
    const a = member(hub, "replica-a", {
      leaseDurationMs: 60_000,
      renewDeadlineMs: 30_000,
      retryPeriodMs: 20_000,
    });
    await until("its first round acknowledged its view", () => a.records().length >= 2);
    const stoppingAt = performance.now();
    await a.membership.stop();
    expect(performance.now() - stoppingAt).toBeLessThan(1_000);
    expect(a.records().at(-1)?.view).toBe("left");
  });
});

describe("what a shard member refuses", () => {
  it("a lease duration not longer than the renew deadline: it could not stop before the others count it gone", () => {
    const hub = leaseHub();
    for (const [leaseDurationMs, renewDeadlineMs] of [
      [400, 400],
      [300, 400],
    ])
      expect(() => member(hub, "replica-a", { leaseDurationMs, renewDeadlineMs, start: false })).toThrow(
        "leaseDurationMs must be greater than renewDeadlineMs",
      );
    expect(() =>
      member(hub, "replica-a", { leaseDurationMs: 401, renewDeadlineMs: 400, start: false }),
    ).not.toThrow();
  });

  it("being started twice", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    expect(() => a.membership.start()).toThrow("the shard membership was already started");
  });
});

describe("what a shard member writes, and when", () => {
  it("its first write acknowledges no view and has seen no one; its second, in the same round, the view it saw", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const a = member(hub, "replica-a", { log: log.logger });
    await until("two writes", () => a.records().length >= 2);
    const [first, second] = a.records();
    expect(first).toMatchObject({ holder: a.identity, view: "", seen: [] });
    // The first write renewed: the round went on to read the members and acknowledge what it saw.
    expect(second).toMatchObject({ holder: a.identity, view: viewDigest([a.identity]) });
    expect(messages(log, "sharding: joining")).toEqual([expect.objectContaining({ lease: a.leaseName })]);
  });

  it("a Lease the API server takes: its kind, group label, holder and whole seconds of duration", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a", { leaseDurationMs: 2_500, renewDeadlineMs: 400 });
    await until("it wrote", () => hub.leases.has(a.leaseName));
    expect(hub.leases.get(a.leaseName)).toMatchObject({
      apiVersion: LEASE_API_VERSION,
      kind: "Lease",
      metadata: { name: a.leaseName, labels: { [SHARD_GROUP_LABEL]: "knative-fleet" } },
      spec: { holderIdentity: a.identity, leaseDurationSeconds: 3 },
    });
  });

  it("counts no one and owns nothing before its first round and once it stopped", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a", { start: false });
    expect(a.membership.members).toEqual([]);
    expect(a.owned()).toEqual([]);
    a.membership.start();
    await until("it owns every cluster", () => a.owned().length === CLUSTERS.length);
    expect(a.membership.members).toEqual([a.identity]);
    await a.membership.stop();
    expect(a.membership.members).toEqual([]);
    expect(a.owned()).toEqual([]);
  });

  it("never reaching the hub, it drops nothing and records no leaving: it never wrote a Lease", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const link = hub.link();
    link.cut = true;
    const a = member(hub, "replica-a", { link, log: log.logger });
    await sleep(400 + 2 * RETRY_MS); // past a renew deadline: its first round gave up on its write
    await a.membership.stop();
    expect(a.membership.members).toEqual([]);
    expect(hub.leases.has(a.leaseName)).toBe(false);
    expect(log.text()).not.toContain("the member Lease was not renewed in time");
    expect(log.text()).not.toContain("could not record that this member left");
  });

  it("once settled, takes its share once and says so once, however many rounds follow", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const a = member(hub, "replica-a", { log: log.logger });
    const b = member(hub, "replica-b");
    await until(
      "the two share the clusters",
      () => a.owned().length > 0 && a.owned().length + b.owned().length === CLUSTERS.length,
    );
    await sleep(2 * RETRY_MS);
    const widened = a.widened.length;
    const said = messages(log, "sharding: every member acknowledged; taking this replica's share");
    expect(said.at(-1)).toMatchObject({ level: 30, members: 2 });
    await sleep(8 * RETRY_MS);
    expect(a.widened.length, "no widening while the view stays").toBe(widened);
    expect(messages(log, "sharding: every member acknowledged; taking this replica's share")).toHaveLength(
      said.length,
    );
  });
});

describe("a shard member whose hub fails its reads", () => {
  it("says each round that failed and why, goes on with the next, and takes its share once the reads work", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const link = hub.link();
    const list = link.client.list.bind(link.client);
    let lists: "answer" | "refuse" | "hang" = "answer";
    link.client.list = ((...args: Parameters<typeof list>) => {
      if (lists === "refuse") return Promise.reject(new Error("the hub refuses lists"));
      if (lists === "hang") return new Promise(() => {});
      return list(...args);
    }) as typeof list;
    const a = member(hub, "replica-a", { link, log: log.logger });
    await until("its first round", () => a.records().length >= 2); // the watch listed long before
    const failed = () => messages(log, "sharding: membership round failed").map((line) => line.err);
    lists = "refuse";
    const writes = a.records().length;
    await until("two rounds failed", () => failed().length >= 2);
    expect(failed()[0]).toBe("Error: the hub refuses lists");
    expect(a.records().length, "each round still renews").toBeGreaterThan(writes);
    lists = "hang";
    await until("a read given up", () => failed().some((err) => String(err).includes("in time")), 5_000);
    expect(failed()).toContain("Error: the hub did not list the member Leases in time");
    lists = "answer";
    await until("it widens", () => a.owned().length === CLUSTERS.length);
  });
});
