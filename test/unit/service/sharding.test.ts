import { describe, expect, it } from "vitest";
import { processIdentity } from "../../../src/service/leader-election.ts";
import {
  judgeLease,
  type MemberLease,
  memberLeaseName,
  ownsUnder,
  shardOwner,
  viewDigest,
} from "../../../src/service/sharding.ts";

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
  const expected = { group: GROUP, leaseDurationMs: 15_000 };
  const identity = processIdentity("knative-fleet-7d9f8-abcde");
  const lease = (overrides: { name?: string; holder?: string; seconds?: number; renewTime?: string } = {}) =>
    ({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: overrides.name ?? memberLeaseName(GROUP, overrides.holder ?? identity),
        namespace: "knative-fleet",
      },
      spec: {
        holderIdentity: overrides.holder ?? identity,
        leaseDurationSeconds: overrides.seconds ?? 15,
        renewTime: overrides.renewTime ?? "2026-01-01T00:00:00.000000Z",
      },
    }) satisfies MemberLease;

  it("counts a replica's own Lease while it renews, and as expired once it stops", () => {
    let seen = judgeLease(lease(), undefined, 0, expected);
    expect(seen.verdict).toEqual({ state: "live", holder: identity });
    for (let t = 2_000; t <= 60_000; t += 2_000) {
      const renewed = lease({ renewTime: `2026-01-01T00:00:${String(t / 1000).padStart(2, "0")}.000000Z` });
      seen = judgeLease(renewed, seen.renewal, t, expected);
      expect(seen.verdict.state).toBe("live");
    }
    const stopped = judgeLease(
      lease({ renewTime: "2026-01-01T00:00:60.000000Z" }),
      seen.renewal,
      75_001,
      expected,
    );
    expect(stopped.verdict.state).toBe("expired");
  });

  it("a holder that never renews expires one configured duration after it was first seen, whatever it declares", () => {
    const forged = lease({ seconds: 1_000_000_000 });
    const first = judgeLease(forged, undefined, 0, expected);
    expect(first.verdict.state).toBe("live");
    expect(judgeLease(forged, first.renewal, 14_999, expected).verdict.state).toBe("live");
    expect(judgeLease(forged, first.renewal, 15_000, expected).verdict.state).toBe("expired");
    // Writing the Lease without renewing it (an annotation, a label) buys nothing either.
    expect(
      judgeLease(
        { ...forged, metadata: { ...forged.metadata, resourceVersion: "99" } },
        first.renewal,
        20_000,
        expected,
      ).verdict.state,
    ).toBe("expired");
  });

  it("ignores a Lease whose holder is not an identity a replica writes, or that is not that identity's Lease", () => {
    for (const holder of ["intruder", "pod_not-a-uuid", "Pod_550e8400-e29b-41d4-a716-446655440000", ""]) {
      expect(
        judgeLease(lease({ holder, name: memberLeaseName(GROUP, holder) }), undefined, 0, expected).verdict,
      ).toEqual({
        state: "ignored",
        why: "its holder is not an identity a replica writes",
      });
    }
    // Another member's identity in a Lease of another name (it could acknowledge views on that member's behalf).
    expect(judgeLease(lease({ name: "knative-fleet" }), undefined, 0, expected).verdict).toEqual({
      state: "ignored",
      why: "its name is not the one its holder's identity gives",
    });
  });
});
