import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { SHARD_GROUP_LABEL, SHARD_VIEW_ANNOTATION } from "../../../src/api/labels.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { memberLeaseName, provenRecord } from "../../../src/service/shard-lease.ts";
import { viewDigest } from "../../../src/service/sharding.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { leaseHub } from "../../support/lease-hub.ts";
import { CLUSTERS, GROUP, membersStoppedAfterEach, until, writeRecord } from "../../support/shard-member.ts";

// What a shard member makes of the member Leases it lists and watches, over the in-memory hub: which it
// counts, which it ignores and says so (once per Lease), whom it asks a replica to vouch for and when again,
// and a dead member's Lease removed. 600 ms lease, 400 ms renew deadline, 100 ms retry period unless told.

const LEASE_MS = 600;
const RETRY_MS = 100;

// Rounds in real time: a loaded machine's timers make a test of a few seconds take several times that.
vi.setConfig({ testTimeout: 20_000 });

const member = membersStoppedAfterEach();
const warnings = (log: ReturnType<typeof capturingLogger>) => log.lines().filter((line) => line.level === 40);
const messages = (log: ReturnType<typeof capturingLogger>, msg: string) =>
  log.lines().filter((line) => line.msg === msg);

/** Writes `identity`'s proven record every retry period, as a live member would, until the result is called. */
function keepRenewing(hub: ReturnType<typeof leaseHub>, identity: string): () => void {
  writeRecord(hub, identity);
  const timer = setInterval(() => writeRecord(hub, identity), RETRY_MS);
  return () => clearInterval(timer);
}

describe("what a shard member says about the member Leases", () => {
  it("that a Lease declares more than the configured duration, naming it; not of one declaring as much, nor of one it ignores", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    // A whole second: a member's own Lease declares just that.
    const a = member(hub, "replica-a", { log: log.logger, leaseDurationMs: 1_000 });
    hub.tamper("knative-fleet-member-intruder", () => ({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: "knative-fleet-member-intruder",
        namespace: "knative-fleet",
        labels: { [SHARD_GROUP_LABEL]: GROUP },
      },
      spec: { holderIdentity: "intruder", leaseDurationSeconds: 3_600 },
    }));
    const claiming = processIdentity("replica-claiming");
    writeRecord(hub, claiming, {}, { leaseDurationSeconds: 3_600 });
    const modest = processIdentity("replica-modest");
    writeRecord(hub, modest, {}, { leaseDurationSeconds: 1 });
    await until("a counts both", () => a.membership.members.length === 3);
    await sleep(3 * RETRY_MS);
    const declares = warnings(log).filter((line) => String(line.msg).includes("declares"));
    expect(declares).toEqual([
      expect.objectContaining({
        msg: "sharding: a member Lease declares 3600s; it counts for no more than the configured 1s",
        lease: memberLeaseName(GROUP, claiming),
        holder: claiming,
      }),
    ]);
  });

  it("that no replica vouches for a member, once, naming its Lease and holder, though it asks again", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const refused = processIdentity("replica-refused");
    const asked: string[] = [];
    const a = member(hub, "replica-a", {
      log: log.logger,
      vouch: async (identity) => {
        asked.push(identity);
        return identity !== refused;
      },
    });
    const stop = keepRenewing(hub, refused);
    try {
      await until("asked twice", () => asked.filter((i) => i === refused).length >= 2, 5 * LEASE_MS);
    } finally {
      stop();
    }
    expect(messages(log, "sharding: ignoring a member Lease: no replica can vouch for its holder")).toEqual([
      expect.objectContaining({ level: 40, lease: memberLeaseName(GROUP, refused), holder: refused }),
    ]);
    expect(a.membership.members).toEqual([a.identity]);
  });

  it("that a member could not be checked, counting it no member", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const unknown = processIdentity("replica-unknown");
    const a = member(hub, "replica-a", {
      log: log.logger,
      vouch: async () => {
        throw new Error("pods is forbidden");
      },
    });
    const stop = keepRenewing(hub, unknown);
    try {
      await until("a check failed", () => messages(log, "sharding: could not check a member").length > 0);
      await until("a owns every cluster", () => a.owned().length === CLUSTERS.length);
    } finally {
      stop();
    }
    expect(messages(log, "sharding: could not check a member")[0]).toMatchObject({
      level: 40,
      member: unknown,
      err: "Error: pods is forbidden",
    });
    expect(a.membership.members).toEqual([a.identity]);
  });

  it("why it ignores a Lease, again once that Lease was gone and came back", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    member(hub, "replica-a", { log: log.logger });
    const intruder = () =>
      hub.tamper("knative-fleet-member-intruder", () => ({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: {
          name: "knative-fleet-member-intruder",
          namespace: "knative-fleet",
          labels: { [SHARD_GROUP_LABEL]: GROUP },
        },
        spec: { holderIdentity: "intruder" },
      }));
    const ignored = () =>
      messages(log, "sharding: ignoring a member Lease: its holder is not an identity a replica writes");
    intruder();
    await until("it said so", () => ignored().length === 1);
    await sleep(3 * RETRY_MS);
    hub.tamper("knative-fleet-member-intruder", () => undefined);
    await sleep(3 * RETRY_MS);
    intruder();
    await until("it said so again", () => ignored().length === 2);
    expect(ignored()[1]).toMatchObject({ lease: "knative-fleet-member-intruder", holder: "intruder" });
  });

  it("nothing of another group's members in the same namespace: it does not list or watch them", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const link = hub.link();
    const selectors: unknown[] = [];
    const stream = link.client.rest.stream.bind(link.client.rest);
    link.client.rest.stream = ((path, query, ...rest) => {
      selectors.push(query?.labelSelector);
      return stream(path, query, ...rest);
    }) as typeof stream;
    const other = processIdentity("other-replica");
    writeRecord(hub, other, {}, { group: "other-fleet" });
    // A whole second's lease: its own Lease declares no more, so any warning would be about the other group.
    const a = member(hub, "replica-a", { link, log: log.logger, leaseDurationMs: 1_000 });
    await until("a owns every cluster", () => a.owned().length === CLUSTERS.length);
    expect(a.membership.members).toEqual([a.identity]);
    expect(warnings(log)).toEqual([]);
    expect(selectors).toEqual([`${SHARD_GROUP_LABEL}=${GROUP}`]);
  });
});

describe("a dead member's Lease", () => {
  it("is removed once quiet twice the lease duration, and said so; its holder is no member after, and is vouched for anew when it comes back", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const dead = processIdentity("replica-dead");
    const asked: string[] = [];
    const a = member(hub, "replica-a", {
      log: log.logger,
      vouch: async (identity) => {
        asked.push(identity);
        return true;
      },
    });
    const stop = keepRenewing(hub, dead);
    await until("a counts it", () => a.membership.members.includes(dead));
    stop();
    const name = memberLeaseName(GROUP, dead);
    await until("its Lease is removed", () => !hub.leases.has(name));
    expect(messages(log, "sharding: removed a dead member's Lease")).toEqual([
      expect.objectContaining({ level: 30, member: dead }),
    ]);
    // Gone for good: the watch's news of the removal brings it back to no view.
    const end = performance.now() + 2 * LEASE_MS;
    while (performance.now() < end) {
      expect(a.membership.members).toEqual([a.identity]);
      await sleep(10);
    }
    expect(asked).toEqual([dead]);
    writeRecord(hub, dead);
    await until("it counts again", () => a.membership.members.includes(dead));
    expect(asked, "forgotten with its Lease: asked again").toEqual([dead, dead]);
  });

  it("is removed only as it was listed: one written again in between stays", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const back = processIdentity("replica-back");
    const a = member(hub, "replica-a", { log: log.logger });
    const request = a.link.client.rest.request.bind(a.link.client.rest);
    let deletes = 0;
    a.link.client.rest.request = ((options: Parameters<typeof request>[0]) => {
      if (options.method !== "DELETE") return request(options);
      deletes++;
      writeRecord(hub, back); // the member comes back just before the removal lands
      return request(options);
    }) as typeof request;
    const stop = keepRenewing(hub, back);
    await until("a counts it", () => a.membership.members.includes(back));
    stop();
    await until("a tried to remove it", () => deletes > 0);
    await sleep(RETRY_MS);
    expect(hub.leases.has(memberLeaseName(GROUP, back))).toBe(true);
    expect(messages(log, "sharding: removed a dead member's Lease")).toEqual([]);
  });
});

describe("its own Lease overwritten once", () => {
  it("writes its acknowledgement back with the same epoch, and hands nothing off", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    // Room for a loaded machine: the conflict and the write after it (no renewal) must not outlast the
    // renew deadline, or the lapse would give a new epoch for a reason of its own.
    const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000 };
    const a = member(hub, "replica-a", { ...timings, log: log.logger });
    const b = member(hub, "replica-b", timings);
    await until("a took its share of the two", () =>
      log
        .lines()
        .some(
          (line) =>
            line.msg === "sharding: every member acknowledged; taking this replica's share" &&
            line.members === 2,
        ),
    );
    await sleep(2 * RETRY_MS);
    const digest = viewDigest([a.identity, b.identity]);
    const before = provenRecord(hub.leases.get(a.leaseName), hub.key);
    expect(before?.view).toBe(digest);
    const widened = a.widened.length;
    hub.tamper(a.leaseName, (lease) => {
      lease!.metadata.annotations![SHARD_VIEW_ANNOTATION] = "0000000000000000";
      return lease;
    });
    const writes = a.records().length;
    await until("a wrote again", () => a.records().length >= writes + 2);
    await sleep(4 * RETRY_MS);
    expect(provenRecord(hub.leases.get(a.leaseName), hub.key)).toMatchObject({
      view: digest,
      epoch: before?.epoch,
    });
    expect(a.widened.length, "the same view: no hand-off").toBe(widened);
    expect(a.owned().length + b.owned().length).toBe(CLUSTERS.length);
  });
});
