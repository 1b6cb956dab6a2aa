import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { KubeApiError } from "../../../src/kube/rest.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { type HubLink, leaseHub } from "../../support/lease-hub.ts";
import { CLUSTERS, membersStoppedAfterEach, until } from "../../support/shard-member.ts";

// A shard member that cannot renew in time, over the in-memory hub: when it drops every cluster, what it
// says, what it writes once it can again, and that it widens only on a renewal within its renew deadline
// and on a watch that keeps up. 600 ms lease, 400 ms renew deadline, 100 ms retry period unless told.

const DEADLINE_MS = 400;
const LAPSED = "sharding: the member Lease was not renewed in time; dropping every cluster";

// Rounds in real time: a loaded machine's timers make a test of a few seconds take several times that.
vi.setConfig({ testTimeout: 20_000 });

const member = membersStoppedAfterEach();
const messages = (log: ReturnType<typeof capturingLogger>, msg: string) =>
  log.lines().filter((line) => line.msg === msg);

/** Runs `change` on each write request (PUT) the link sends, before the hub sees it. */
function onWrites(link: HubLink, change: (send: () => Promise<unknown>) => Promise<unknown>): void {
  const request = link.client.rest.request.bind(link.client.rest);
  link.client.rest.request = ((options: Parameters<typeof request>[0]) =>
    options.method === "PUT" ? change(() => request(options)) : request(options)) as typeof request;
}

/** The link's watch delivers each event `lagMs()` after the hub sent it, never before an earlier one. */
function laggingWatch(link: HubLink, lagMs: () => number): void {
  const stream = link.client.rest.stream.bind(link.client.rest);
  let lastAtMs = 0;
  link.client.rest.stream = ((path, query, onLine, signal) =>
    stream(
      path,
      query,
      (line) => {
        lastAtMs = Math.max(lastAtMs, performance.now() + lagMs());
        setTimeout(() => onLine(line), lastAtMs - performance.now());
      },
      signal,
    )) as typeof stream;
}

describe("a shard member whose writes fail", () => {
  it("says why, drops every cluster once at its renew deadline, and acknowledges no view in its first write after", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const link = hub.link();
    let failing = false;
    onWrites(link, (send) =>
      failing
        ? Promise.reject(new KubeApiError("PUT", "lease", 500, "InternalError", "etcd is unavailable"))
        : send(),
    );
    const a = member(hub, "replica-a", { link, log: log.logger });
    await until("it owns every cluster", () => a.owned().length === CLUSTERS.length);
    const narrowed = a.narrowed.length;
    const writes = a.records().length;
    const said = log.lines().length; // what it says from now on
    failing = true;
    await until("it dropped every cluster", () => a.owned().length === 0, 2 * DEADLINE_MS);
    await sleep(3 * DEADLINE_MS); // a dozen rounds more that cannot renew
    const since = log.lines().slice(said);
    expect(since.find((line) => line.msg === "sharding: could not renew the member Lease")?.err).toContain(
      "etcd is unavailable",
    );
    // Said and done once: the rounds that follow find nothing left to drop, and narrow to no view.
    expect(since.filter((line) => line.msg === LAPSED)).toHaveLength(1);
    expect(a.narrowed.length - narrowed).toBe(1);
    expect(a.membership.members).toEqual([]);
    failing = false;
    await until("it owns every cluster again", () => a.owned().length === CLUSTERS.length);
    // Its first write after: no view acknowledged, until the round narrowed to one again.
    expect(a.records()[writes]?.view).toBe("");
  });

  it("says so when dropping its clusters at the renew deadline fails, while its round still hangs", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    let settling: "works" | "fails" = "works";
    const a = member(hub, "replica-a", {
      log: log.logger,
      settle: async () => {
        if (settling === "fails") throw new Error("a reconcile would not stop");
      },
    });
    await until("it owns every cluster", () => a.owned().length === CLUSTERS.length);
    settling = "fails";
    a.link.cut = true;
    const failed = () => messages(log, "sharding: dropping the clusters failed");
    await until("the drop failed", () => failed().length > 0, 2 * DEADLINE_MS);
    expect(failed()[0]?.err).toBe("Error: a reconcile would not stop");
    expect(a.owned(), "onNarrowed was called: it owns nothing").toEqual([]);
    settling = "works";
    a.link.heal();
    await until("it owns every cluster again", () => a.owned().length === CLUSTERS.length);
  });

  it("drops its clusters once when a write it gave up on is answered after a later one", async () => {
    const hub = leaseHub();
    const log = capturingLogger();
    const link = hub.link();
    // A long lease: the rounds after the late answer (a conflict, a write that renews nothing) stay well
    // within the renew deadline.
    let delayNext = false;
    onWrites(link, async (send) => {
      if (!delayNext) return send();
      delayNext = false;
      const answer = await send(); // stored at once, answered after the renew deadline and the next renewals
      await sleep(3_500);
      return answer;
    });
    const a = member(hub, "replica-a", {
      link,
      log: log.logger,
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
    });
    await until("its first round", () => a.records().length >= 2);
    delayNext = true;
    await until("the write to be answered late was sent", () => !delayNext, 1_000);
    await sleep(4_000);
    // Dropped at the deadline of the renewal before that write; the late answer renews nothing older.
    expect(messages(log, LAPSED)).toHaveLength(1);
    expect(a.membership.members).toEqual([a.identity]);
  });
});

describe("a shard member widens only", () => {
  it("on a renewal within its renew deadline: each read taking 5/8 of it, the member never takes a share", async () => {
    const hub = leaseHub();
    const link = hub.link();
    // Its writes and reads are slow (the watch is not): a renewal is stored in time, but the read after it
    // ends past the deadline.
    const slow = 250;
    const request = link.client.rest.request.bind(link.client.rest);
    link.client.rest.request = ((options: Parameters<typeof request>[0]) =>
      sleep(slow).then(() => request(options))) as typeof request;
    const list = link.client.list.bind(link.client);
    link.client.list = ((...args: Parameters<typeof list>) =>
      sleep(slow).then(() => list(...args))) as typeof list;
    const a = member(hub, "replica-a", { link });
    // Owning nothing from the start until 3 s after it saw itself and acknowledged that view (a round gets
    // that far; how soon depends on the machine's load, so the 3 s start there).
    let end = performance.now() + 15_000;
    let sawItself = false;
    while (performance.now() < end) {
      expect(a.owned()).toEqual([]);
      if (!sawItself && a.membership.members.length === 1) {
        sawItself = true;
        end = performance.now() + 3_000;
      }
      await sleep(10);
    }
    // Seen once is what matters: on a loaded machine a renewal may also miss its deadline and drop the view.
    expect(sawItself, "it saw itself and acknowledged that view").toBe(true);
    expect(a.widened).toEqual([]);
  });

  it("on a watch that keeps up: one that shows its writes 50 ms late, well within the margin, is trusted", async () => {
    const hub = leaseHub();
    const link = hub.link();
    laggingWatch(link, () => 50);
    const a = member(hub, "replica-a", { link });
    await until("it widens", () => a.widened.length > 0, 5_000);
    expect(a.owned()).toEqual(CLUSTERS);
  });

  it("not on a watch 600 ms behind its own writes (three times the margin), though the other's writes keep showing", async () => {
    const hub = leaseHub();
    const link = hub.link();
    // The margin is lease - renew deadline = 200 ms; three times it leaves room for a loaded machine's timers.
    let lagMs = 600;
    laggingWatch(link, () => lagMs);
    const a = member(hub, "replica-a", { link });
    const b = member(hub, "replica-b");
    // b's writes (older than a's latest) arrive all the time; only a's own tell how far behind it is.
    await until("b takes its share", () => b.widened.length > 0);
    const end = performance.now() + 3 * 600;
    while (performance.now() < end) {
      expect(a.owned()).toEqual([]);
      await sleep(10);
    }
    lagMs = 0;
    await until(
      "a takes its share",
      () => a.owned().length > 0 && a.owned().length + b.owned().length === CLUSTERS.length,
    );
  });
});
