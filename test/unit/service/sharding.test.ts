import { describe, expect, it } from "vitest";
import { ownerOf, ownsUnder, viewDigest } from "../../../src/service/sharding.ts";

const clusters = Array.from({ length: 600 }, (_, i) => `fleet-system/spoke-${i + 1}`);
const share = (members: string[]) => {
  const counts = new Map(members.map((m) => [m, 0]));
  for (const c of clusters) {
    const owner = ownerOf(members, c)!;
    counts.set(owner, counts.get(owner)! + 1);
  }
  return counts;
};

describe("shard assignment (rendezvous hashing)", () => {
  it("every member computes the same owner, whatever order it lists the members in", () => {
    for (const c of clusters.slice(0, 50)) {
      expect(ownerOf(["pod-a_1", "pod-b_2", "pod-c_3"], c)).toBe(
        ownerOf(["pod-c_3", "pod-a_1", "pod-b_2"], c),
      );
    }
    expect(viewDigest(["b", "a"])).toBe(viewDigest(["a", "b"]));
    expect(viewDigest(["a", "b"])).not.toBe(viewDigest(["a", "b", "c"]));
  });

  it("no members: no owner", () => {
    expect(ownerOf([], "fleet-system/spoke-1")).toBeUndefined();
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
      const was = ownerOf(before, c);
      const now = ownerOf(joined, c);
      if (was !== now) {
        moved++;
        expect(now).toBe("pod-d_4");
      }
    }
    expect(moved / clusters.length).toBeGreaterThan(0.15);
    expect(moved / clusters.length).toBeLessThan(0.35);
    const left = ["pod-a_1", "pod-c_3"];
    for (const c of clusters) {
      if (ownerOf(before, c) !== "pod-b_2") expect(ownerOf(left, c)).toBe(ownerOf(before, c));
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
        expect(ownerOf(next, c)).toBe("pod-d_4"); // only what moves waits for the hand-off
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
    for (const c of clusters) expect(owners(settled, c)).toEqual([ownerOf(next, c)]);
  });

  it("an empty view owns nothing (a member that lost its Lease)", () => {
    expect(clusters.some((c) => ownsUnder([[]], "pod-a_1", c))).toBe(false);
  });
});
