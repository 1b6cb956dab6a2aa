import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/observability/log.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { ShardMembership } from "../../../src/service/sharding.ts";
import { leaseHub } from "../../support/lease-hub.ts";

// Vouching at unit level: a member Lease that judgeLease counts live (named for its holder, renewed) is
// still not counted unless a replica vouches for its holder. The other unit tests vouch for everyone.

const LEASE_MS = 600;
const CLUSTERS = Array.from({ length: 24 }, (_, i) => `fleet-system/spoke-${i + 1}`);

const started: ShardMembership[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((m) => m.stop()));
});

/** A member over the shared in-memory hub; `vouch` is its answer about another member's identity. */
function member(hub: ReturnType<typeof leaseHub>, identity: string, vouch: (other: string) => boolean) {
  const asked: string[] = [];
  const membership = new ShardMembership({
    client: hub.link().client,
    namespace: "knative-fleet",
    group: "knative-fleet",
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: 400,
    retryPeriodMs: 100,
    log: silentLogger,
    onNarrowed: () => {},
    settle: async () => {},
    onWidened: () => {},
    vouch: async (other) => {
      asked.push(other);
      return vouch(other);
    },
  });
  membership.start();
  started.push(membership);
  return { membership, asked, owned: () => CLUSTERS.filter((c) => membership.owns(c)) };
}

async function until(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw new Error("timed out");
    await sleep(10);
  }
}

describe("sharding's vouching", () => {
  it("does not count a renewed member Lease whose holder no replica vouches for: the member keeps every cluster", async () => {
    const hub = leaseHub();
    const a = processIdentity("replica-a");
    const forged = processIdentity("not-a-replica");
    const replica = member(hub, a, (other) => other !== forged);
    // The forger runs the protocol faithfully: its Lease is named for it and renewed every retry period.
    const forger = member(hub, forged, () => true);
    await until(() => replica.owned().length === CLUSTERS.length, 5_000);
    await until(() => replica.asked.includes(forged), 5_000);
    // Several lease durations later, with the forged Lease live all along: still every cluster, none to it.
    const end = performance.now() + 4 * LEASE_MS;
    while (performance.now() < end) {
      expect(replica.owned()).toEqual(CLUSTERS);
      expect(forger.owned()).toEqual([]);
      await sleep(20);
    }
    // A refusal is asked again after a lease duration, not at every round (100 ms).
    const asks = replica.asked.filter((identity) => identity === forged).length;
    expect(asks).toBeGreaterThanOrEqual(2);
    expect(asks).toBeLessThanOrEqual(6);
  });

  it("counts a member a replica vouches for, asking once: the two split the clusters", async () => {
    const hub = leaseHub();
    const identityB = processIdentity("replica-b");
    const a = member(hub, processIdentity("replica-a"), () => true);
    const b = member(hub, identityB, () => true);
    await until(
      () =>
        a.owned().length > 0 &&
        b.owned().length > 0 &&
        a.owned().length + b.owned().length === CLUSTERS.length,
      5_000,
    );
    // A member vouched for stays so while its Lease lives: not asked again.
    await sleep(3 * LEASE_MS);
    expect(a.asked).toEqual([identityB]);
  });
});
