import { setTimeout as sleep } from "node:timers/promises";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  SHARD_EPOCH_ANNOTATION,
  SHARD_GROUP_LABEL,
  SHARD_SEEN_ANNOTATION,
  SHARD_VIEW_ANNOTATION,
} from "../../../src/api/labels.ts";
import { KubeApiError } from "../../../src/kube/rest.ts";
import { type Logger, silentLogger } from "../../../src/observability/log.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { LEASE_API_VERSION, microTime } from "../../../src/service/lease.ts";
import {
  type MemberLease,
  memberLeaseName,
  provenRecord,
  recordAnnotations,
} from "../../../src/service/shard-lease.ts";
import { ShardMembership, shardOwner, viewDigest } from "../../../src/service/sharding.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { type HubLink, leaseHub } from "../../support/lease-hub.ts";
import { waitUntil } from "../../support/wait.ts";

// ShardMembership's timing over a hub that keeps member Leases in memory (test/support/lease-hub.ts).
// Short timings: 600 ms lease, 400 ms renew deadline, 100 ms retry period. A member is cut off from the hub
// by making every request it sends hang, as a partition does.

const LEASE_MS = 600;
const DEADLINE_MS = 400;
const RETRY_MS = 100;
const CLUSTERS = Array.from({ length: 24 }, (_, i) => `fleet-system/spoke-${i + 1}`);

interface Member {
  identity: string;
  membership: ShardMembership;
  /** performance.now() of each onNarrowed call. */
  narrowed: number[];
  link: HubLink;
}

// Hashes counted (passed through): a cluster's owner is hashed once per view, not at every ask.
const hashes = vi.hoisted(() => ({ count: 0 }));
vi.mock("node:crypto", async (importOriginal) => {
  const crypto = await importOriginal<typeof import("node:crypto")>();
  return {
    ...crypto,
    createHash: (...args: Parameters<typeof crypto.createHash>) => {
      hashes.count++;
      return crypto.createHash(...args);
    },
  };
});

const started: ShardMembership[] = [];
const warnings: string[] = [];
const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
process.on("warning", onWarning);
afterEach(async () => {
  expect(warnings.splice(0), "process warnings (a negative timer: a late answer)").toEqual([]);
  await Promise.all(started.splice(0).map((m) => m.stop()));
});

function member(
  hub: ReturnType<typeof leaseHub>,
  pod: string,
  settle: () => Promise<void> = async () => {},
  log: Logger = silentLogger,
  onWidened: () => void = () => {},
  link: HubLink = hub.link(),
): Member {
  const self = { identity: processIdentity(pod), narrowed: [], link } as unknown as Member;
  self.membership = new ShardMembership({
    client: self.link.client,
    key: hub.key,
    namespace: "knative-fleet",
    group: "knative-fleet",
    identity: self.identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    log,
    onNarrowed: () => self.narrowed.push(performance.now()),
    settle,
    onWidened,
    vouch: async () => true,
  });
  self.membership.start();
  started.push(self.membership);
  return self;
}

/** replica-a over `link`, and when it widened (performance.now() of each onWidened). */
function widening(hub: ReturnType<typeof leaseHub>, link: HubLink, log: Logger = silentLogger) {
  const widened: number[] = [];
  const a = member(
    hub,
    "replica-a",
    async () => {},
    log,
    () => widened.push(performance.now()),
    link,
  );
  return { a, widened };
}

const owned = (m: Member) => CLUSTERS.filter((c) => m.membership.owns(c));

/** Samples every few ms until `until` says stop; fails at once on a cluster two members own. */
async function watchOwners(members: Member[], until: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    for (const c of CLUSTERS) {
      const owners = members.filter((m) => m.membership.owns(c)).map((m) => m.identity);
      expect(owners.length, `${c} owned by ${owners.join(" and ")}`).toBeLessThanOrEqual(1);
    }
    if (until()) return;
    if (performance.now() > deadline) throw new Error("timed out");
    await sleep(5);
  }
}

describe("ownership asked often", () => {
  it("is hashed once per cluster and view: 1,200 asks of a settled member hash nothing again", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    await watchOwners(
      [a, b],
      () => CLUSTERS.every((c) => [a, b].some((m) => m.membership.owns(c))) && owned(a).length > 0,
      10_000,
    );
    const before = owned(a);
    hashes.count = 0;
    for (let round = 0; round < 50; round++) expect(owned(a)).toEqual(before); // no timer runs in between
    expect(hashes.count).toBe(0);
  });
});

describe("a shard member cut off from the hub", () => {
  it("drops every cluster at its renew deadline though its requests hang, before the other takes them", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    const everyClusterOwned = () => CLUSTERS.every((c) => [a, b].some((m) => m.membership.owns(c)));
    await watchOwners(
      [a, b],
      () => everyClusterOwned() && owned(a).length > 0 && owned(b).length > 0,
      10_000,
    );

    const cutAt = performance.now();
    a.link.cut = true;
    const narrowedBefore = a.narrowed.length;
    // b takes every cluster once a's Lease expired (seen from b), and never while a still owns one.
    await watchOwners([a, b], () => owned(b).length === CLUSTERS.length, 10_000);
    const droppedAt = a.narrowed[narrowedBefore];
    expect(droppedAt, "a dropped its clusters (onNarrowed)").toBeDefined();
    // Within the renew deadline of its last renewal (sent at most a retry period before the cut), while its
    // requests were hanging: no round of its own got that far.
    expect(droppedAt! - cutAt).toBeLessThan(DEADLINE_MS + 50);
    expect(owned(a)).toEqual([]);

    // The partition heals: a's old requests are answered (late), it rejoins, and the two split the clusters
    // again, never sharing one.
    a.link.heal();
    await watchOwners([a, b], () => everyClusterOwned() && owned(a).length > 0, 10_000);
    expect(owned(a).length + owned(b).length).toBe(CLUSTERS.length);
  });

  it("a member whose hub answers slowly never widens on a renewal past its deadline", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    await watchOwners([a, b], () => owned(a).length > 0 && owned(b).length > 0, 10_000);
    // Each request of a's now takes 3/4 of the renew deadline: a round's renewal is answered in time, but
    // the lapse timer drops every cluster while the round still reads the others' acknowledgements (on
    // the old code the round then widened anyway, while b could count a gone between its late renewals).
    a.link.latencyMs = (DEADLINE_MS * 3) / 4;
    const until = performance.now() + 4 * LEASE_MS;
    await watchOwners([a, b], () => performance.now() > until, 5 * LEASE_MS);
    a.link.latencyMs = 2;
    await watchOwners(
      [a, b],
      () => owned(a).length > 0 && owned(a).length + owned(b).length === CLUSTERS.length,
      10_000,
    );
  });

  it("a member alone that cannot renew owns nothing after the deadline, and takes everything back once it can", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 5_000);
    const epoch = () =>
      hub.leases.get(memberLeaseName("knative-fleet", a.identity))?.metadata.annotations?.[
        SHARD_EPOCH_ANNOTATION
      ];
    const before = epoch();
    a.link.cut = true;
    await sleep(DEADLINE_MS + 60);
    expect(owned(a)).toEqual([]);
    a.link.heal();
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 5_000);
    // It dropped everything, so it acknowledges the view anew: a new epoch, which the others must see.
    expect(epoch()).not.toBe(before);
  });
});

describe("an adversary who may write Leases but cannot read the shard key", () => {
  /** Rewrites the member Lease of `m` every 5 ms with `change`, until the returned function is called. */
  const keepForging = (
    hub: ReturnType<typeof leaseHub>,
    m: Member,
    change: (lease: MemberLease) => MemberLease | undefined,
  ) => {
    const name = memberLeaseName("knative-fleet", m.identity);
    const timer = setInterval(() => hub.tamper(name, (lease) => (lease ? change(lease) : undefined)), 5);
    return () => clearInterval(timer);
  };

  it("cannot acknowledge a view for a member still settling: the newcomer takes nothing until that member itself has", async () => {
    const hub = leaseHub();
    // a's reconciles of the clusters it hands on end only when the test says (a slow spoke).
    let settled: Promise<void> = Promise.resolve();
    let release: () => void = () => {};
    const a = member(hub, "replica-a", () => settled);
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 5_000);
    settled = new Promise<void>((resolve) => (release = resolve));
    const b = member(hub, "replica-b");
    const view = viewDigest([a.identity, b.identity].sort());
    // While a settles, its Lease is made to say what b waits for: the new view, and b's epoch as seen.
    const stop = keepForging(hub, a, (lease) => {
      const epochB = hub.leases.get(memberLeaseName("knative-fleet", b.identity))?.metadata.annotations?.[
        SHARD_EPOCH_ANNOTATION
      ];
      return {
        ...lease,
        metadata: {
          ...lease.metadata,
          annotations: {
            ...lease.metadata.annotations,
            [SHARD_VIEW_ANNOTATION]: view,
            ...(epochB && { [SHARD_SEEN_ANNOTATION]: epochB }),
          },
        },
      };
    });
    const forgedUntil = performance.now() + 3 * LEASE_MS;
    try {
      await watchOwners([a, b], () => performance.now() > forgedUntil, 4 * LEASE_MS);
      // a still reconciles what it hands on: b must not own any of it (a owns only what it keeps).
      expect(owned(b)).toEqual([]);
    } finally {
      stop();
      release();
    }
    await watchOwners(
      [a, b],
      () => owned(a).length + owned(b).length === CLUSTERS.length && owned(b).length > 0,
      10_000,
    );
  });

  it("cannot give a cluster two owners by deleting a member's Lease or freezing its renewTime, again and again; once it stops, the two share again", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    const shared = () => owned(a).length > 0 && owned(a).length + owned(b).length === CLUSTERS.length;
    await watchOwners([a, b], shared, 10_000);
    for (const change of [
      () => undefined,
      (lease: MemberLease) => ({
        ...lease,
        spec: { ...lease.spec, renewTime: "2026-01-01T00:00:00.000000Z" },
      }),
    ]) {
      // a's writes never stand: it drops its clusters (it cannot tell whether b saw them); b takes them only
      // once a's Lease was seen gone a whole duration (deleted) or not at all (written by someone).
      const stop = keepForging(hub, a, change);
      const until = performance.now() + 3 * LEASE_MS;
      await watchOwners([a, b], () => performance.now() > until, 4 * LEASE_MS);
      expect(owned(a)).toEqual([]);
      stop();
      await watchOwners([a, b], shared, 10_000);
    }
  }, 20_000);

  it("counts a member whose Lease no list ever sees: written and deleted between two looks, the watch shows it", async () => {
    const hub = leaseHub();
    // A member's proven record, written and deleted again in the same turn: no list answer can hold it.
    const hidden = processIdentity("replica-hidden");
    const name = memberLeaseName("knative-fleet", hidden);
    const flash = () => {
      const record = { holder: hidden, renewTime: microTime(new Date()), view: "", epoch: "e1", seen: [] };
      hub.tamper(name, () => ({
        apiVersion: LEASE_API_VERSION,
        kind: "Lease",
        metadata: {
          name,
          namespace: "knative-fleet",
          labels: { [SHARD_GROUP_LABEL]: "knative-fleet" },
          annotations: recordAnnotations(hub.key, name, record),
        },
        spec: { holderIdentity: hidden, leaseDurationSeconds: 1, renewTime: record.renewTime },
      }));
      hub.tamper(name, () => undefined);
    };
    flash();
    const flasher = setInterval(flash, RETRY_MS);
    try {
      const a = member(hub, "replica-a");
      const hiddenShare = CLUSTERS.filter((c) => shardOwner([a.identity, hidden], c) === hidden);
      expect(hiddenShare.length).toBeGreaterThan(0);
      await waitUntil(
        "the member is seen",
        async () => (a.membership.members.includes(hidden) ? true : undefined),
        2 * LEASE_MS,
      );
      await sleep(2 * LEASE_MS);
      expect(a.membership.members).toContain(hidden);
      // It never acknowledges a's view, so a takes nothing; in particular nothing hashing gives the hidden one.
      expect(owned(a)).toEqual([]);
    } finally {
      clearInterval(flasher);
    }
  });

  it("takes nothing while its watch of the member Leases fails, says why, and takes its share once the watch runs", async () => {
    const hub = leaseHub();
    const link = hub.link();
    link.failWatch = true;
    const lines: { msg: string; err?: string }[] = [];
    const log = pino({ level: "debug" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const { a, widened } = widening(hub, link, log);
    await sleep(3 * LEASE_MS);
    expect(widened, "no share without a watch that shows every write").toEqual([]);
    expect(owned(a)).toEqual([]);
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: "sharding: the watch of the member Leases broke",
        err: expect.stringContaining("the hub serves no watch now"),
      }),
    );
    link.failWatch = false;
    await waitUntil("it widens", async () => (widened.length > 0 ? true : undefined), 10_000);
    expect(owned(a)).toEqual(CLUSTERS);
    await a.membership.stop();
    expect(hub.openWatches(), "its watch closed when it stopped").toBe(0);
  }, 20_000);

  it("widens though the watch shows each of its writes before the write's answer arrives", async () => {
    const hub = leaseHub();
    const link = hub.link();
    link.answerDelayMs = 20; // the watch's event comes first: a write heard before it is known as this member's
    const { a, widened } = widening(hub, link, silentLogger);
    await waitUntil("it widens", async () => (widened.length > 0 ? true : undefined), 8 * LEASE_MS);
    expect(owned(a)).toEqual(CLUSTERS);
  }, 20_000);

  it("takes nothing on a watch that has not shown its own write for longer than the margin, and widens once it catches up", async () => {
    const hub = leaseHub();
    const link = hub.link();
    // Stalled from the start: the list works, the watch stays open and says nothing.
    const release = link.stallWatch();
    const { a, widened } = widening(hub, link, silentLogger);
    await sleep(3 * LEASE_MS);
    expect(widened, "no share on a watch that lags its own writes").toEqual([]);
    expect(owned(a)).toEqual([]);
    const releasedAt = performance.now();
    release();
    await waitUntil("it widens", async () => (widened.length > 0 ? true : undefined), 4 * LEASE_MS);
    // The wait started over at the last look before the watch caught up: about a lease duration after it.
    expect(widened[0]! - releasedAt).toBeGreaterThanOrEqual(LEASE_MS - 2 * RETRY_MS);
    expect(owned(a)).toEqual(CLUSTERS);
  });

  it("cannot hide a live member from a replica that has just started by deleting its Lease before the newcomer looks", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 10_000);
    // Once, just before the newcomer's first list; then again and again while it joins. The newcomer sees
    // no other Lease in its first list either way; a's next write (a watch shows every one) tells it a lives.
    for (const forgeFor of [0, 3 * LEASE_MS]) {
      const name = memberLeaseName("knative-fleet", a.identity);
      hub.tamper(name, () => undefined);
      const stop = forgeFor > 0 ? keepForging(hub, a, () => undefined) : () => {};
      const b = member(hub, forgeFor > 0 ? "replica-c" : "replica-b");
      const until = performance.now() + forgeFor;
      try {
        await watchOwners([a, b], () => performance.now() > until, forgeFor + LEASE_MS);
      } finally {
        stop();
      }
      await watchOwners(
        [a, b],
        () =>
          owned(a).length > 0 && owned(b).length > 0 && owned(a).length + owned(b).length === CLUSTERS.length,
        10_000,
      );
      await b.membership.stop();
      await watchOwners([a], () => owned(a).length === CLUSTERS.length, 10_000);
    }
  }, 30_000);
});

describe("what a member writes in its Lease, and what it does with the others'", () => {
  const leaseOf = (hub: ReturnType<typeof leaseHub>, m: Member) =>
    hub.leases.get(memberLeaseName("knative-fleet", m.identity));
  const epochOf = (hub: ReturnType<typeof leaseHub>, m: Member) =>
    leaseOf(hub, m)?.metadata.annotations?.[SHARD_EPOCH_ANNOTATION];

  it("keeps its epoch while the view stays, and gives a new view a new one", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    const shared = (ms: Member[]) => () =>
      ms.every((m) => owned(m).length > 0) && ms.reduce((n, m) => n + owned(m).length, 0) === CLUSTERS.length;
    await watchOwners([a, b], shared([a, b]), 10_000);
    const settled = epochOf(hub, a);
    expect(provenRecord(leaseOf(hub, a), hub.key)?.epoch).toBe(settled);
    await sleep(6 * RETRY_MS);
    expect(epochOf(hub, a), "the same view, the same epoch").toBe(settled);
    const c = member(hub, "replica-c");
    await watchOwners([a, b, c], shared([a, b, c]), 10_000);
    expect(epochOf(hub, a), "a new view, a new epoch").not.toBe(settled);
  });

  it("alone, takes every cluster once it watched the member Leases for a lease duration, and not before", async () => {
    const hub = leaseHub();
    const startedAt = performance.now();
    const widenedAt: number[] = [];
    const a: Member = member(
      hub,
      "replica-a",
      async () => {},
      silentLogger,
      () => widenedAt.push(performance.now()),
    );
    await waitUntil("it widens", async () => (widenedAt.length > 0 ? true : undefined), 5_000);
    // A live member whose Lease was deleted just before this one's first list writes it again within a
    // renew deadline: a newcomer that took its share at once could have seen itself alone.
    expect(widenedAt[0]! - startedAt).toBeGreaterThanOrEqual(LEASE_MS);
    expect(widenedAt[0]! - startedAt).toBeLessThan(LEASE_MS + 4 * RETRY_MS);
    expect(owned(a)).toEqual(CLUSTERS);
    expect(hub.history.get(memberLeaseName("knative-fleet", a.identity))?.length).toBeGreaterThan(2);
  });

  it("once settled, narrows no more and keeps its record while the view stays", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    await watchOwners(
      [a, b],
      () => owned(a).length > 0 && owned(a).length + owned(b).length === CLUSTERS.length,
      10_000,
    );
    await sleep(2 * RETRY_MS);
    const narrowed = a.narrowed.length;
    await sleep(6 * RETRY_MS);
    expect(a.narrowed.length, "no narrowing (and no settle) while nothing changes").toBe(narrowed);
  });

  it("writes a proven left record when it stops, and the other takes its clusters at once", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    await watchOwners([a, b], () => owned(a).length > 0 && owned(b).length > 0, 10_000);
    await b.membership.stop();
    const stoppedAt = performance.now();
    expect(provenRecord(leaseOf(hub, b), hub.key)).toMatchObject({ holder: b.identity, view: "left" });
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 10_000);
    // Not a lease duration: it said it left.
    expect(performance.now() - stoppedAt).toBeLessThan(LEASE_MS / 2 + 2 * RETRY_MS);
  });

  it("writes its left record though a renewal it gave up on as it stopped lands first", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b", async () => {}, log.logger);
    await watchOwners([a, b], () => owned(a).length > 0 && owned(b).length > 0, 10_000);
    // Its writes land at once and their answers come late: stopped with one out, its left record is sent
    // on the Lease's version before that write (409).
    b.link.answerDelayMs = DEADLINE_MS / 4;
    const request = b.link.client.rest.request.bind(b.link.client.rest);
    let putOut: () => void = () => {};
    const out = new Promise<void>((resolve) => {
      putOut = resolve;
    });
    b.link.client.rest.request = ((options: { method: string }) => {
      if (options.method === "PUT") putOut();
      return request(options as Parameters<typeof request>[0]);
    }) as typeof request;
    await out;
    await b.membership.stop();
    expect(provenRecord(leaseOf(hub, b), hub.key)).toMatchObject({ holder: b.identity, view: "left" });
    expect(log.text()).not.toContain("could not record that this member left");
  });

  it("tries its left record three times when every write of it is refused, then says so", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const b = member(hub, "replica-b", async () => {}, log.logger);
    await waitUntil("replica-b owns its clusters", async () => (owned(b).length > 0 ? true : undefined));
    // Someone rewrites its Lease before each of its writes lands: every PUT is a conflict.
    const request = b.link.client.rest.request.bind(b.link.client.rest);
    let puts = 0;
    b.link.client.rest.request = ((options: { method: string; path: string }) => {
      if (options.method !== "PUT") return request(options as Parameters<typeof request>[0]);
      puts++;
      return Promise.reject(
        new KubeApiError("PUT", options.path, 409, "Conflict", "the object was modified"),
      );
    }) as typeof request;
    await b.membership.stop();
    expect(puts).toBe(3);
    expect(log.text()).toContain("could not record that this member left");
  });

  it("stops within its renew deadline when the hub does not answer, and says the others wait for its Lease", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const b = member(hub, "replica-b", async () => {}, log.logger);
    await waitUntil("replica-b owns its clusters", async () => (owned(b).length > 0 ? true : undefined));
    b.link.cut = true;
    const stoppingAt = performance.now();
    await b.membership.stop();
    // One renew deadline for the left record, and room for a loaded machine's timers, short of a second deadline.
    expect(performance.now() - stoppingAt).toBeLessThan(1.75 * DEADLINE_MS);
    expect(provenRecord(leaseOf(hub, b), hub.key)?.view).not.toBe("left");
    expect(log.text()).toContain("could not record that this member left");
  });

  it("removes a dead member's Lease once it stayed quiet twice the lease duration", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    await watchOwners([a, b], () => owned(a).length > 0 && owned(b).length > 0, 10_000);
    b.link.cut = true; // nothing it sends arrives any more: its Lease stands still
    const quietAt = performance.now();
    await watchOwners([a, b], () => owned(a).length === CLUSTERS.length, 10_000);
    expect(leaseOf(hub, b), "gone from the view, not yet removed").toBeDefined();
    while (leaseOf(hub, b) && performance.now() - quietAt < 4 * LEASE_MS) await sleep(20);
    expect(leaseOf(hub, b)).toBeUndefined();
    // Quiet since its last write, which came before the cut (a mutation run's dry run saw 1,173 ms).
    expect(performance.now() - quietAt).toBeGreaterThanOrEqual(2 * LEASE_MS - 2 * RETRY_MS);
  });

  it("gives each write a later renewTime than the last, even when the clock stands still", async () => {
    const hub = leaseHub();
    const now = vi.spyOn(Date, "now").mockReturnValue(Date.parse("2026-11-29T00:00:00Z"));
    try {
      const a = member(hub, "replica-a");
      await watchOwners([a], () => owned(a).length === CLUSTERS.length, 5_000);
      await sleep(4 * RETRY_MS);
      const times = (hub.history.get(memberLeaseName("knative-fleet", a.identity)) ?? []).map((l) =>
        Date.parse(l.spec!.renewTime!),
      );
      expect(times.length).toBeGreaterThan(3);
      expect(times[0], "from the clock, not from zero").toBeGreaterThanOrEqual(
        Date.parse("2026-11-29T00:00:00Z"),
      );
      for (let i = 1; i < times.length; i++) expect(times[i]!).toBeGreaterThan(times[i - 1]!);
    } finally {
      now.mockRestore();
    }
  });

  it("says once why it ignores a Lease, and what a Lease's declared duration does not buy", async () => {
    const hub = leaseHub();
    const lines: string[] = [];
    const log = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line).msg) });
    const a = member(hub, "replica-a", async () => {}, log);
    hub.tamper("knative-fleet-member-intruder", () => ({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: "knative-fleet-member-intruder",
        namespace: "knative-fleet",
        labels: { [SHARD_GROUP_LABEL]: "knative-fleet" },
      },
      spec: { holderIdentity: "intruder", renewTime: "2026-01-01T00:00:00.000000Z" },
    }));
    const b = member(hub, "replica-b");
    const bLease = memberLeaseName("knative-fleet", b.identity);
    await watchOwners([a, b], () => owned(a).length > 0 && owned(b).length > 0, 10_000);
    hub.tamper(bLease, (lease) => lease && { ...lease, spec: { ...lease.spec, leaseDurationSeconds: 3600 } });
    await sleep(6 * RETRY_MS);
    expect(
      lines.filter(
        (l) => l === "sharding: ignoring a member Lease: its holder is not an identity a replica writes",
      ),
    ).toHaveLength(1);
    expect(lines).toContain(
      "sharding: a member Lease declares 3600s; it counts for no more than the configured 0.6s",
    );
  });
});
