import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RestRequest } from "../../../src/kube/rest.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { LeaderElector } from "../../../src/service/leader-election.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { adminClient, ensureNamespace } from "../../support/hub.ts";
import { waitUntil } from "../../support/wait.ts";

// Two replicas electing on one Lease of the sandbox's real hub, with the production timings (15 s lease,
// 10 s renew deadline, 2 s retry period), so the takeover times printed are the ones a fleet would see.

const NAMESPACE = "leader-test";
const RETRY_PERIOD_MS = 2_000;
const RENEW_DEADLINE_MS = 10_000;
const LEASE_DURATION_MS = 15_000;
/** The acquire loop's longest pause: the retry period plus client-go's jitter of up to 1.2 periods. */
const LONGEST_POLL_MS = 2.2 * RETRY_PERIOD_MS;

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const electors: LeaderElector[] = [];

beforeAll(async () => {
  await ensureNamespace(hub, NAMESPACE);
});

afterAll(async () => {
  await Promise.all(electors.map((elector) => elector.stop()));
  await hub.delete("v1", "Namespace", undefined, NAMESPACE);
});

/**
 * A replica with a client of its own. `crash()` cuts that client off (every request fails, as for a
 * process that died or lost the network): no renewal and no release reach the hub any more.
 */
function replica(lease: string, identity: string) {
  const client = adminClient(sandbox.hub);
  const request = client.rest.request.bind(client.rest);
  let crashed = false;
  client.rest.request = <T>(req: RestRequest) =>
    crashed ? Promise.reject(new Error("connection refused (crashed)")) : request<T>(req);
  const events: { event: "started" | "stopped"; atMs: number }[] = [];
  const elector = new LeaderElector({
    client,
    namespace: NAMESPACE,
    name: lease,
    identity,
    log: silentLogger,
    onStartedLeading: () => void events.push({ event: "started", atMs: performance.now() }),
    onStoppedLeading: () => void events.push({ event: "stopped", atMs: performance.now() }),
  });
  electors.push(elector);
  elector.start();
  return { identity, elector, events, crash: () => (crashed = true) };
}

async function holder(lease: string): Promise<string | undefined> {
  const live = await hub.get("coordination.k8s.io/v1", "Lease", NAMESPACE, lease);
  return (live?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
}

/** Waits for one of the two to lead; checks for a few retry periods that exactly one leads, per the Lease. */
async function oneLeader(a: ReturnType<typeof replica>, b: ReturnType<typeof replica>, lease: string) {
  const leader = await waitUntil("a leader", async () =>
    a.elector.isLeader ? a : b.elector.isLeader ? b : undefined,
  );
  for (let i = 0; i < 12; i++) {
    expect([a.elector.isLeader, b.elector.isLeader].filter(Boolean)).toHaveLength(1);
    expect(leader.elector.isLeader).toBe(true);
    await new Promise((r) => setTimeout(r, RETRY_PERIOD_MS / 4));
  }
  expect(await holder(lease)).toBe(leader.identity);
  return { leader, standby: leader === a ? b : a };
}

/** Polls every 50 ms until `standby` leads, checking that the two never lead at once; the time taken. */
async function takeover(leader: ReturnType<typeof replica>, standby: ReturnType<typeof replica>) {
  const since = performance.now();
  await waitUntil(
    `${standby.identity} leads`,
    async () => {
      expect(leader.elector.isLeader && standby.elector.isLeader).toBe(false);
      return standby.elector.isLeader ? true : undefined;
    },
    LEASE_DURATION_MS + 3 * LONGEST_POLL_MS,
  );
  return performance.now() - since;
}

describe("leader election on the hub", () => {
  it("two replicas: exactly one leads; a stopped leader releases, and the standby leads at its next poll", async () => {
    const a = replica("fleet-release", "replica-a");
    const b = replica("fleet-release", "replica-b");
    const { leader, standby } = await oneLeader(a, b, "fleet-release");

    const [tookMs] = await Promise.all([takeover(leader, standby), leader.elector.stop()]);
    console.log(`leader election: after a release the standby led in ${(tookMs / 1000).toFixed(2)} s`);
    expect(tookMs).toBeLessThan(LONGEST_POLL_MS + 1_000);
    expect(leader.events.map((e) => e.event)).toEqual(["started", "stopped"]);
    const lease = await hub.get("coordination.k8s.io/v1", "Lease", NAMESPACE, "fleet-release");
    expect(lease?.spec).toMatchObject({
      holderIdentity: standby.identity,
      leaseDurationSeconds: LEASE_DURATION_MS / 1000,
      leaseTransitions: 1,
    });
  });

  it("a crashed leader (no renewal, no release): it stops leading after the renew deadline, the standby leads after the lease duration", async () => {
    const a = replica("fleet-crash", "replica-a");
    const b = replica("fleet-crash", "replica-b");
    const { leader, standby } = await oneLeader(a, b, "fleet-crash");

    const crashedAt = performance.now();
    leader.crash();
    const tookMs = await takeover(leader, standby);
    const stoppedAfterMs = leader.events.find((e) => e.event === "stopped")!.atMs - crashedAt;
    const startedAfterMs = standby.events.find((e) => e.event === "started")!.atMs - crashedAt;
    console.log(
      `leader election: after a crash the standby led in ${(tookMs / 1000).toFixed(2)} s ` +
        `(lease duration ${LEASE_DURATION_MS / 1000} s); the cut-off leader stopped leading after ` +
        `${(stoppedAfterMs / 1000).toFixed(2)} s (renew deadline ${RENEW_DEADLINE_MS / 1000} s)`,
    );
    // The old leader gives up before anyone else may take over: never two leaders, even for a moment.
    expect(stoppedAfterMs).toBeLessThanOrEqual(RENEW_DEADLINE_MS + 500);
    expect(startedAfterMs).toBeGreaterThan(stoppedAfterMs);
    // The standby waits out the lease from its last sight of a renewal (at most one retry period before
    // the crash), and takes over at the first poll after that.
    expect(tookMs).toBeGreaterThanOrEqual(LEASE_DURATION_MS - RETRY_PERIOD_MS);
    expect(tookMs).toBeLessThanOrEqual(LEASE_DURATION_MS + 2 * LONGEST_POLL_MS + 1_000);
    expect(await holder("fleet-crash")).toBe(standby.identity);
  });
});
