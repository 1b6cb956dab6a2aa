import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/observability/log.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { podVoucher, ShardMembership } from "../../../src/service/sharding.ts";
import { FakeKube } from "../../support/fake-kube.ts";
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
    key: hub.key,
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

describe("the Pod check behind vouching (podVoucher)", () => {
  const NS = "knative-fleet";
  const UID_1 = "6f1c2a3e-0b4d-11f1-8a2b-0242ac120002"; // the API server's UIDs are version 1
  const UID_2 = "7a2d3b4f-0b4d-11f1-8a2b-0242ac120002";
  const pod = (
    name: string,
    uid: string,
    extra: { serviceAccountName?: string; deleting?: boolean } = {},
  ) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: NS,
      uid,
      ...(extra.deleting && { deletionTimestamp: "2026-11-28T00:00:00Z" }),
    },
    spec: { serviceAccountName: extra.serviceAccountName ?? "knative-fleet", containers: [] },
    status: { phase: "Running" },
  });
  function hub() {
    const kube = new FakeKube().serveKindsOf([pod("replica-1", UID_1)]);
    kube.put(pod("replica-1", UID_1));
    kube.put(pod("replica-2", UID_2));
    return kube;
  }

  it("vouches for a replica's identity only with its own Pod's UID: a copied pod name with any other UUID is no member", async () => {
    // Issue #43: `<running replica's pod>_<any uuid>`, renewed by anyone who may write Leases, stayed a member.
    const vouch = await podVoucher(hub().client, NS, processIdentity("replica-1", UID_1));
    expect(await vouch(processIdentity("replica-2", UID_2))).toBe(true);
    expect(await vouch(processIdentity("replica-2"))).toBe(false); // a random UUID
    expect(await vouch(processIdentity("replica-2", UID_1))).toBe(false); // another Pod's UID
    expect(await vouch(processIdentity("replica-1"))).toBe(false); // its own pod name, forged
    expect(await vouch(processIdentity("replica-3", UID_2))).toBe(false); // no such Pod
  });

  it("refuses a Pod of another ServiceAccount, one being deleted, or one that has finished", async () => {
    const kube = hub();
    kube.put(pod("other", UID_2, { serviceAccountName: "default" }));
    kube.put(pod("leaving", UID_2, { deleting: true }));
    for (const phase of ["Succeeded", "Failed"])
      kube.put({ ...pod(phase.toLowerCase(), UID_2), status: { phase } });
    const vouch = await podVoucher(kube.client, NS, processIdentity("replica-1", UID_1));
    expect(await vouch(processIdentity("other", UID_2))).toBe(false);
    expect(await vouch(processIdentity("leaving", UID_2))).toBe(false);
    expect(await vouch(processIdentity("succeeded", UID_2))).toBe(false);
    expect(await vouch(processIdentity("failed", UID_2))).toBe(false);
  });

  it("will not start sharding on an identity that does not carry its own Pod's UID (POD_UID unset)", async () => {
    await expect(podVoucher(hub().client, NS, processIdentity("replica-1"))).rejects.toThrow(
      `sharding binds members to their Pods' UIDs, but this replica's identity does not carry its Pod's (${UID_1}): POD_UID must be set from metadata.uid`,
    );
    // A Pod with no UID at all (not one the API server made): the message says so rather than "undefined".
    const kube = hub();
    const { uid: _, ...metadata } = pod("replica-1", UID_1).metadata;
    kube.put({ ...pod("replica-1", UID_1), metadata });
    await expect(podVoucher(kube.client, NS, processIdentity("replica-1", UID_1))).rejects.toThrow(
      "does not carry its Pod's (none)",
    );
  });

  it("will not start sharding when its own Pod cannot be read, and says which Pod and what names it", async () => {
    await expect(podVoucher(hub().client, NS, processIdentity("replica-9", UID_1))).rejects.toThrow(
      "sharding vouches for members by their Pods, but this replica's own Pod knative-fleet/replica-9 cannot be read: POD_NAME must name it (the chart sets it) and the ServiceAccount may get Pods there",
    );
  });

  it('counts a Pod that names no ServiceAccount as running as "default", its own as the others\'', async () => {
    const kube = hub();
    const withoutServiceAccount = (name: string, uid: string) => {
      const { serviceAccountName: _, ...spec } = pod(name, uid).spec;
      return { ...pod(name, uid), spec };
    };
    kube.put(withoutServiceAccount("replica-1", UID_1));
    kube.put(pod("named-default", UID_2, { serviceAccountName: "default" }));
    kube.put(withoutServiceAccount("unnamed", UID_2));
    const vouch = await podVoucher(kube.client, NS, processIdentity("replica-1", UID_1));
    expect(await vouch(processIdentity("named-default", UID_2))).toBe(true);
    expect(await vouch(processIdentity("unnamed", UID_2))).toBe(true);
    expect(await vouch(processIdentity("replica-2", UID_2))).toBe(false); // runs as knative-fleet
    // And the other way round: its own Pod named "default", another's naming none.
    kube.put(pod("replica-1", UID_1, { serviceAccountName: "default" }));
    const vouchAsDefault = await podVoucher(kube.client, NS, processIdentity("replica-1", UID_1));
    expect(await vouchAsDefault(processIdentity("unnamed", UID_2))).toBe(true);
  });
});
