import { describe, expect, it } from "vitest";
import {
  SHARD_EPOCH_ANNOTATION,
  SHARD_PROOF_ANNOTATION,
  SHARD_SEEN_ANNOTATION,
  SHARD_VIEW_ANNOTATION,
} from "../../../src/api/labels.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import {
  acknowledges,
  judgeLease,
  type MemberLease,
  type MemberRecord,
  memberLeaseName,
  provenRecord,
  proveRecord,
  type Sighting,
} from "../../../src/service/shard-lease.ts";
import { ownsUnder, shardOwner, viewDigest } from "../../../src/service/sharding.ts";

const clusters = Array.from({ length: 600 }, (_, i) => `fleet-system/spoke-${i + 1}`);
const share = (members: string[]) => {
  const counts = new Map(members.map((m) => [m, 0]));
  for (const c of clusters) {
    const owner = shardOwner(members, c)!;
    counts.set(owner, counts.get(owner)! + 1);
  }
  return counts;
};

describe("shard assignment (rendezvous hashing)", () => {
  it("every member computes the same owner, whatever order it lists the members in", () => {
    for (const c of clusters.slice(0, 50)) {
      expect(shardOwner(["pod-a_1", "pod-b_2", "pod-c_3"], c)).toBe(
        shardOwner(["pod-c_3", "pod-a_1", "pod-b_2"], c),
      );
    }
    expect(viewDigest(["b", "a"])).toBe(viewDigest(["a", "b"]));
    expect(viewDigest(["a", "b"])).not.toBe(viewDigest(["a", "b", "c"]));
  });

  it("names a view as every version of a replica does: SHA-256 of the members sorted, one a line, 16 hex digits", () => {
    // Written into member Leases and compared by the other replicas, of this version or another in a rollout.
    expect(viewDigest(["pod-c_3", "pod-a_1", "pod-b_2"])).toBe("e0e017e3c0930231");
    // The line break keeps members apart: two members are not one whose name joins theirs.
    expect(viewDigest(["pod-a_1", "pod-b_2"])).not.toBe(viewDigest(["pod-a_1pod-b_2"]));
  });

  it("no members: no owner", () => {
    expect(shardOwner([], "fleet-system/spoke-1")).toBeUndefined();
  });

  it("spreads clusters evenly: each of 3 members gets a third, within 20%", () => {
    for (const count of share(["pod-a_1", "pod-b_2", "pod-c_3"]).values()) {
      expect(count).toBeGreaterThan(160);
      expect(count).toBeLessThan(240);
    }
  });

  it("a member joining takes clusters only for itself; a member leaving hands on only its own", () => {
    const before = ["pod-a_1", "pod-b_2", "pod-c_3"];
    const joined = [...before, "pod-d_4"];
    let moved = 0;
    for (const c of clusters) {
      const was = shardOwner(before, c);
      const now = shardOwner(joined, c);
      if (was !== now) {
        moved++;
        expect(now).toBe("pod-d_4");
      }
    }
    expect(moved / clusters.length).toBeGreaterThan(0.15);
    expect(moved / clusters.length).toBeLessThan(0.35);
    const left = ["pod-a_1", "pod-c_3"];
    for (const c of clusters) {
      if (shardOwner(before, c) !== "pod-b_2") expect(shardOwner(left, c)).toBe(shardOwner(before, c));
    }
  });
});

describe("shard hand-off (ownsUnder)", () => {
  const old = ["pod-a_1", "pod-b_2", "pod-c_3"];
  const next = ["pod-a_1", "pod-b_2", "pod-c_3", "pod-d_4"];
  const owners = (views: Record<string, string[][]>, cluster: string) =>
    Object.entries(views)
      .filter(([member, v]) => ownsUnder(v, member, cluster))
      .map(([member]) => member);

  it("while a join is being acknowledged, old members own only what they keep and the newcomer nothing", () => {
    const narrowed = {
      "pod-a_1": [old, next],
      "pod-b_2": [old, next],
      "pod-c_3": [old, next],
      "pod-d_4": [[], next],
    };
    let unowned = 0;
    for (const c of clusters) {
      const who = owners(narrowed, c);
      expect(who.length).toBeLessThanOrEqual(1);
      if (who.length === 0) {
        unowned++;
        expect(shardOwner(next, c)).toBe("pod-d_4"); // only what moves waits for the hand-off
      }
    }
    expect(unowned).toBeGreaterThan(0);
  });

  it("why a member widens only after all acknowledged: one still on the old view and one widened would share clusters", () => {
    const widenedTooEarly = { "pod-a_1": [old], "pod-b_2": [old], "pod-c_3": [old], "pod-d_4": [next] };
    expect(clusters.some((c) => owners(widenedTooEarly, c).length > 1)).toBe(true);
    // A leave: pod-c_3 is gone; the survivors narrow by the new view, then widen once both acknowledged.
    const left = ["pod-a_1", "pod-b_2"];
    const narrowed = { "pod-a_1": [old, left], "pod-b_2": [old, left] };
    for (const c of clusters) expect(owners(narrowed, c).length).toBeLessThanOrEqual(1);
    const halfWidened = { "pod-a_1": [left], "pod-b_2": [old, left] };
    for (const c of clusters) expect(owners(halfWidened, c).length).toBeLessThanOrEqual(1);
  });

  it("once every member acknowledged, every cluster has exactly one owner", () => {
    const settled = Object.fromEntries(next.map((m) => [m, [next]]));
    for (const c of clusters) expect(owners(settled, c)).toEqual([shardOwner(next, c)]);
  });

  it("an empty view owns nothing (a member that lost its Lease)", () => {
    expect(clusters.some((c) => ownsUnder([[]], "pod-a_1", c))).toBe(false);
  });
});

describe("member Leases (judgeLease): what a Lease must be to count", () => {
  const GROUP = "knative-fleet";
  const key = Buffer.alloc(32, 1);
  const expected = { group: GROUP, leaseDurationMs: 15_000, key };
  const identity = processIdentity("knative-fleet-7d9f8-abcde");
  const NAME = memberLeaseName(GROUP, identity);
  let version = 0;
  /** A Lease as a member writes it at `second` (proven), or as anyone else does (`proof: false`). */
  const lease = (
    overrides: {
      name?: string;
      holder?: string;
      seconds?: number;
      second?: number;
      view?: string;
      epoch?: string;
      seen?: string[];
      proof?: boolean;
    } = {},
  ): MemberLease => {
    const holder = overrides.holder ?? identity;
    const name = overrides.name ?? memberLeaseName(GROUP, holder);
    const record = {
      holder,
      renewTime: `2026-01-01T00:${String(Math.floor((overrides.second ?? 0) / 60)).padStart(2, "0")}:${String((overrides.second ?? 0) % 60).padStart(2, "0")}.000000Z`,
      view: overrides.view ?? "",
      epoch: overrides.epoch ?? "e1",
      seen: overrides.seen ?? [],
    };
    return {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name,
        namespace: "knative-fleet",
        resourceVersion: String(++version),
        annotations: {
          [SHARD_VIEW_ANNOTATION]: record.view,
          [SHARD_EPOCH_ANNOTATION]: record.epoch,
          [SHARD_SEEN_ANNOTATION]: record.seen.join(","),
          [SHARD_PROOF_ANNOTATION]: overrides.proof === false ? "00" : proveRecord(key, name, record),
        },
      },
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: overrides.seconds ?? 15,
        renewTime: record.renewTime,
      },
    };
  };
  const judge = (l: MemberLease | undefined, previous: Sighting | undefined, at: number) =>
    judgeLease(NAME, l, previous, at, expected);

  it("counts a replica's own Lease while it renews, and as expired once it stops", () => {
    let current = lease();
    let seen = judge(current, undefined, 0);
    expect(seen.verdict).toEqual({ state: "live", holder: identity });
    for (let t = 2_000; t <= 60_000; t += 2_000) {
      current = lease({ second: t / 1000 });
      seen = judge(current, seen.sighting, t);
      expect(seen.verdict.state).toBe("live");
    }
    // It stops: the same Lease, read again and again.
    const still = judge(current, seen.sighting, 61_000);
    expect(judge(current, still.sighting, 74_999).verdict.state).toBe("live");
    expect(judge(current, still.sighting, 75_000).verdict.state).toBe("expired");
  });

  it("a holder that never renews expires one configured duration after it was first seen, whatever it declares; only its own newer record brings it back", () => {
    const forged = lease({ seconds: 1_000_000_000 });
    const first = judge(forged, undefined, 0);
    expect(first.verdict.state).toBe("live");
    expect(judge(forged, first.sighting, 14_999).verdict.state).toBe("live");
    const expired = judge(forged, first.sighting, 15_000);
    expect(expired.verdict.state).toBe("expired");
    // Once gone, a write by anyone (an annotation, a label, a copy of an old record) brings nothing back.
    const written = judge(lease({ proof: false, second: 99 }), expired.sighting, 20_000);
    expect(written.verdict.state).toBe("expired");
    expect(judge(lease({ second: 0 }), written.sighting, 21_000).verdict.state).toBe("expired");
    // Its member's own newer record does: the replica is back.
    expect(judge(lease({ second: 30 }), written.sighting, 22_000).verdict.state).toBe("live");
  });

  it("an attacker cannot make a live member look gone: a frozen renewTime, an overwritten record or a deleted Lease still count as changes until a whole duration passes without any", () => {
    let seen = judge(lease({ second: 0 }), undefined, 0);
    // The member writes every 2 s; after each write someone puts back the renewTime of second 0, unproven.
    for (let t = 2_000; t <= 40_000; t += 2_000) {
      seen = judge(lease({ second: 0, proof: false }), seen.sighting, t);
      expect(seen.verdict.state, `at ${t} ms`).toBe("live");
    }
    // The Lease deleted: gone only once a whole duration passed since it was last seen to change.
    const deleted = judge(undefined, seen.sighting, 41_000);
    expect(deleted.verdict.state).toBe("live");
    expect(judge(undefined, deleted.sighting, 55_999).verdict.state).toBe("live");
    expect(judge(undefined, deleted.sighting, 56_000).verdict.state).toBe("expired");
  });

  it("a member that stopped (its proven left record) is gone at once; a copy of an older left record is no news, and a left record at first sight counts only as a Lease", () => {
    const live = judge(lease({ second: 10 }), undefined, 0);
    expect(judge(lease({ second: 11, view: "left" }), live.sighting, 1_000).verdict.state).toBe("expired");
    // A copy of a left record older than what was seen: the member came back since.
    expect(judge(lease({ second: 9, view: "left" }), live.sighting, 1_000).verdict.state).toBe("live");
    // Unproven: anyone can write "left".
    expect(judge(lease({ second: 11, view: "left", proof: false }), live.sighting, 1_000).verdict.state).toBe(
      "live",
    );
    // Never seen before: it may be a copy put back for a replica that just started; it expires as any Lease.
    expect(judge(lease({ second: 11, view: "left" }), undefined, 0).verdict.state).toBe("live");
  });

  it("names each member's Lease within a Kubernetes name's 63 characters, and takes every identity a replica can have", () => {
    expect(NAME).toMatch(/^knative-fleet-member-[0-9a-f]{10}$/);
    for (const pod of ["a", "k.f", "knative-fleet-7d9f8-abcde", "x".repeat(253)]) {
      const holder = processIdentity(pod);
      const name = memberLeaseName(GROUP, holder);
      expect(name.length).toBeLessThanOrEqual(63);
      expect(judgeLease(name, lease({ holder, name }), undefined, 0, expected).verdict).toEqual({
        state: "live",
        holder,
      });
    }
    expect(judgeLease(NAME, undefined, undefined, 0, expected).verdict).toEqual({
      state: "ignored",
      why: "it is gone",
    });
  });

  it("a left record counts as news only after a proven record was seen: first seen unproven, it is just a write", () => {
    const forgedFirst = judge(lease({ second: 5, proof: false }), undefined, 0);
    expect(judge(lease({ second: 6, view: "left" }), forgedFirst.sighting, 1_000).verdict.state).toBe("live");
  });

  it("ignores a Lease whose holder is not an identity a replica writes, or that is not that identity's Lease", () => {
    for (const holder of ["intruder", "pod_not-a-uuid", "Pod_550e8400-e29b-41d4-a716-446655440000", ""]) {
      const name = memberLeaseName(GROUP, holder);
      expect(judgeLease(name, lease({ holder, name }), undefined, 0, expected).verdict).toEqual({
        state: "ignored",
        why: "its holder is not an identity a replica writes",
      });
    }
    // Another member's identity in a Lease of another name (it could acknowledge views on that member's behalf).
    expect(
      judgeLease("knative-fleet", lease({ name: "knative-fleet" }), undefined, 0, expected).verdict,
    ).toEqual({
      state: "ignored",
      why: "its name is not the one its holder's identity gives",
    });
  });
});

describe("acknowledgements (acknowledges): bound to their holder and to the reader's epoch", () => {
  const GROUP = "knative-fleet";
  const key = Buffer.alloc(32, 2);
  const holder = processIdentity("knative-fleet-7d9f8-aaaaa");
  const other = processIdentity("knative-fleet-7d9f8-bbbbb");
  const withRecord = (name: string, record: MemberRecord, proofKey: Uint8Array = key): MemberLease => ({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name,
      namespace: "knative-fleet",
      annotations: {
        [SHARD_VIEW_ANNOTATION]: record.view,
        [SHARD_EPOCH_ANNOTATION]: record.epoch,
        [SHARD_SEEN_ANNOTATION]: record.seen.join(","),
        [SHARD_PROOF_ANNOTATION]: proveRecord(proofKey, name, record),
      },
    },
    spec: { holderIdentity: record.holder, renewTime: record.renewTime },
  });
  const name = memberLeaseName(GROUP, holder);
  const record: MemberRecord = {
    holder,
    renewTime: "2026-01-01T00:00:05.000000Z",
    view: "d1",
    epoch: "h1",
    seen: ["r2", "x9"],
  };

  it("counts a proven record of its holder that names the view and the reader's epoch", () => {
    expect(acknowledges(withRecord(name, record), holder, "d1", "r2", key)).toBe(true);
  });

  it("reads a missing annotation as empty, as its writer proved it", () => {
    const bare = { ...record, view: "", epoch: "", seen: [] };
    const lease = withRecord(name, bare);
    lease.metadata.annotations = { [SHARD_PROOF_ANNOTATION]: proveRecord(key, name, bare) };
    expect(provenRecord(lease, key)).toEqual(bare);
    expect(provenRecord({ ...lease, spec: {} }, key)).toBeUndefined();
  });

  it("refuses an acknowledgement written without the key, edited, copied from another member, or from before the reader's epoch", () => {
    // Written by one who may write Leases but cannot read the shard key.
    expect(acknowledges(withRecord(name, record, Buffer.alloc(32, 3)), holder, "d1", "r2", key)).toBe(false);
    // A proven record whose view annotation was then edited to the digest the reader waits for.
    const edited = withRecord(name, { ...record, view: "d0" });
    edited.metadata.annotations![SHARD_VIEW_ANNOTATION] = "d1";
    expect(acknowledges(edited, holder, "d1", "r2", key)).toBe(false);
    // Another member's proven record put in this member's Lease.
    const copied = withRecord(memberLeaseName(GROUP, other), { ...record, holder: other });
    expect(acknowledges({ ...copied, metadata: { ...copied.metadata, name } }, holder, "d1", "r2", key)).toBe(
      false,
    );
    expect(acknowledges(copied, holder, "d1", "r2", key)).toBe(false);
    // The same view acknowledged before the reader's current epoch (a copy put back): it names an old epoch.
    expect(acknowledges(withRecord(name, { ...record, seen: ["r1"] }), holder, "d1", "r2", key)).toBe(false);
    // Another view.
    expect(acknowledges(withRecord(name, record), holder, "d2", "r2", key)).toBe(false);
  });
});
