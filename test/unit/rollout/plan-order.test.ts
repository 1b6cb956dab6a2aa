import { describe, expect, it } from "vitest";
import type { ClusterRef } from "../../../src/fleet/identity.ts";
import { buildFleetModel, type FleetRolloutPolicy } from "../../../src/fleet/model.ts";
import type { InventoryCluster } from "../../../src/placement/inventory.ts";
import { planRollout, type RolloutChange } from "../../../src/rollout/plan.ts";
import { waveIndexOf } from "../../../src/rollout/waves.ts";
import { clusterWindowClosed } from "../../../src/rollout/windows.ts";
import { cluster, rolloutText } from "../../support/fleet-files.ts";

// `plan`'s rollout section as planRollout builds it: a PR comment that must read the same on every push
// (clusters, CRs and deletions sorted, whatever order the changes come in), what it says when the head's
// policy is broken or removed, and which changed clusters it lists as outside their maintenance windows.

/** The rollout policy a fleet repository holding only `rollout.yaml` with this spec declares. */
const policyOf = (spec: Record<string, unknown>): FleetRolloutPolicy =>
  buildFleetModel([{ path: "rollout.yaml", text: rolloutText(spec) }], { defaultNamespace: "knative-fleet" })
    .rollout;
const NONE: FleetRolloutPolicy = { failedPaths: [] };

const ref = (name: string, namespace = "fleet-system"): ClusterRef => ({ namespace, name });
const c = (name: string) => ref(name);

// c1 is the canary; c2 and c3 take new content only 01:00-05:00 UTC.
const SPEC = {
  waves: [{ name: "canary", clusterProfiles: [c("c1")] }],
  clusterWindows: [
    { name: "nights", clusterProfiles: [c("c2"), c("c3")], windows: [{ start: "01:00", end: "05:00" }] },
  ],
};
const POLICY = policyOf(SPEC);
/** Monday 10:00 UTC: the nights window is closed. */
const NOON = new Date("2026-03-02T10:00:00Z");
const CLUSTERS = ["c1", "c2", "c3", "c4"].map((name) => cluster(name));

// Deliberately out of order: clusters, resources and deletions each come in descending order.
const CHANGES: RolloutChange[] = [
  { resource: "KnativeServing knative-fleet/c3-serving", cluster: c("c3"), change: "update" },
  { resource: "KnativeServing knative-fleet/old-b", cluster: c("c4"), change: "delete" },
  { resource: "KnativeServing knative-fleet/c2-serving", cluster: c("c2"), change: "reinstall" },
  { resource: "KnativeServing knative-fleet/c1-serving", cluster: c("c1"), change: "update" },
  { resource: "KnativeEventing knative-fleet/c3-eventing", cluster: c("c3"), change: "create" },
  { resource: "KnativeServing knative-fleet/old-a", cluster: c("c4"), change: "delete" },
];

const plan = (changes: readonly RolloutChange[], clusters = CLUSTERS) =>
  planRollout(NONE, POLICY, changes, clusters, NOON);

describe("plan's rollout section reads the same on every push", () => {
  it("sorts each wave's CRs and deletions, and the clusters outside their windows", () => {
    const rollout = plan(CHANGES)!;
    expect(rollout.waves.map((w) => w.name)).toEqual(["canary", "remaining"]);
    const remaining = rollout.waves[1]!;
    // By `Kind namespace/name`: KnativeEventing sorts before KnativeServing, c2 before c3.
    expect(remaining.resources).toEqual([
      { resource: "KnativeEventing knative-fleet/c3-eventing", cluster: "fleet-system/c3", change: "create" },
      {
        resource: "KnativeServing knative-fleet/c2-serving",
        cluster: "fleet-system/c2",
        change: "reinstall",
      },
      { resource: "KnativeServing knative-fleet/c3-serving", cluster: "fleet-system/c3", change: "update" },
    ]);
    expect(remaining.deletions).toEqual([
      "KnativeServing knative-fleet/old-a",
      "KnativeServing knative-fleet/old-b",
    ]);
    // c3's change came first, yet c2 is listed first; each once, whatever number of CRs it has.
    expect(rollout.outsideWindows).toEqual([
      { cluster: "fleet-system/c2", why: "outside its maintenance windows nights (daily 01:00-05:00 UTC)" },
      { cluster: "fleet-system/c3", why: "outside its maintenance windows nights (daily 01:00-05:00 UTC)" },
    ]);
  });

  it("gives the same plan for the same changes in any order", () => {
    const expected = plan(CHANGES);
    const reversed = [...CHANGES].reverse();
    const rotated = [...CHANGES.slice(3), ...CHANGES.slice(0, 3)];
    expect(plan(reversed)).toEqual(expected);
    expect(plan(rotated)).toEqual(expected);
    expect(JSON.stringify(plan(reversed))).toBe(JSON.stringify(expected));
  });

  it("lists no cluster as outside its windows for a CR the merge only deletes there", () => {
    // A deletion is no new content: the windows hold what a cluster takes, not what leaves it.
    const rollout = plan([
      { resource: "KnativeServing knative-fleet/c2-serving", cluster: c("c2"), change: "delete" },
      { resource: "KnativeServing knative-fleet/c1-serving", cluster: c("c1"), change: "update" },
    ])!;
    expect(rollout.outsideWindows).toEqual([]);
    expect(rollout.waves[1]!.deletions).toEqual(["KnativeServing knative-fleet/c2-serving"]);
    // The same cluster with a CR it takes is listed.
    const updated = plan([
      { resource: "KnativeServing knative-fleet/c2-serving", cluster: c("c2"), change: "update" },
    ]);
    expect(updated!.outsideWindows.map((o) => o.cluster)).toEqual(["fleet-system/c2"]);
  });

  it("says whether the inventory was read", () => {
    expect(plan(CHANGES)!.inventory).toBe("known");
    expect(plan(CHANGES, [])!.inventory).toBe("known");
    expect(planRollout(NONE, POLICY, CHANGES, undefined, NOON)!.inventory).toBe("unknown");
  });
});

describe("plan's rollout section without a valid head policy", () => {
  const BROKEN = buildFleetModel([{ path: "rollout.yaml", text: rolloutText({ waves: [] }) }], {
    defaultNamespace: "knative-fleet",
  }).rollout;

  it("has nothing to say when neither side has a policy", () => {
    expect(planRollout(NONE, NONE, CHANGES, CLUSTERS, NOON)).toBeUndefined();
  });

  it("a policy the head adds broken is reported (every change would wait), not left out", () => {
    expect(BROKEN).toEqual({ failedPaths: ["rollout.yaml"] });
    // Held, not sent at once, and not paused: the policy has to be fixed, not resumed.
    expect(planRollout(NONE, BROKEN, CHANGES, CLUSTERS, NOON)).toEqual({
      failedPaths: ["rollout.yaml"],
      allAtOnce: false,
      paused: false,
      inventory: "known",
      outsideWindows: [],
      waves: [],
    });
  });

  it("a policy the head removes is said with where it was; a paused allAtOnce one is no longer either", () => {
    const base = policyOf({ ...SPEC, allAtOnce: true, paused: true });
    expect(planRollout(base, NONE, CHANGES, undefined, NOON)).toEqual({
      failedPaths: [],
      allAtOnce: false,
      paused: false,
      inventory: "unknown",
      outsideWindows: [],
      waves: [],
      removed: "rollout.yaml:1",
    });
    // A base whose policy was broken: the removal names its file.
    expect(planRollout(BROKEN, NONE, CHANGES, undefined, NOON)?.removed).toBe("rollout.yaml");
    // A head that breaks it removes nothing: the failure is what is said.
    expect(planRollout(base, BROKEN, CHANGES, undefined, NOON)).not.toHaveProperty("removed");
  });
});

describe("a wave or a window names a cluster by namespace and name", () => {
  const inventory = new Map<string, InventoryCluster>();

  it("a ClusterProfile of the same name in another namespace is not the canary", () => {
    const spec = POLICY.policy!.rollout.spec;
    expect(waveIndexOf(spec, ref("c1"), inventory)).toBe(0);
    expect(waveIndexOf(spec, ref("c1", "team-b"), inventory)).toBe(1);
    const rollout = plan([
      {
        resource: "KnativeServing knative-fleet/b-c1-serving",
        cluster: ref("c1", "team-b"),
        change: "update",
      },
    ])!;
    expect(rollout.waves.map((w) => w.resources.map((r) => r.cluster))).toEqual([[], ["team-b/c1"]]);
  });

  it("nor does a window for fleet-system/c2 hold team-b/c2", () => {
    const spec = POLICY.policy!.rollout.spec;
    expect(clusterWindowClosed(spec, ref("c2"), undefined, NOON)).toMatch(/^outside its maintenance windows/);
    expect(clusterWindowClosed(spec, ref("c2", "team-b"), undefined, NOON)).toBeUndefined();
  });
});
