import { describe, expect, it } from "vitest";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { cluster, fleetFiles } from "../rollout/support.ts";
import { planOfFiles, snapshotInventory } from "./support.ts";

// The plan's Rollout section: the waves a merge goes through with every CR it changes (placements' CRs
// are CRs like any other here), deletions in reverse, and what removing or breaking the policy does.

const POLICY = {
  waves: [
    { name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] },
    { name: "ring-b", clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }] },
  ],
  soak: "90s",
};
const inventory = snapshotInventory({
  clusters: [cluster("c1"), cluster("c2", { ring: "b" }), cluster("c3")],
  decisions: [],
});
const files = (list: FleetFile[]) => Object.fromEntries(list.map((f) => [f.path, f.text]));
const SLOW = { timeout: 60_000 };
/** `HH:MM` in UTC, `hours` from now. */
const utcIn = (hours: number): string => new Date(Date.now() + hours * 3_600_000).toISOString().slice(11, 16);

describe("plan's rollout section", SLOW, () => {
  it("shows each wave and every CR the merge changes in it; deletions in reverse", async () => {
    const base = files(fleetFiles(["c1", "c2", "c3", "c4"], POLICY, () => "1.21"));
    const head = files(fleetFiles(["c1", "c2", "c3"], POLICY, (c) => (c === "c3" ? "1.21" : "1.22")));
    const plan = await planOfFiles(base, head, { inventory });
    expect(
      plan.rollout!.waves.map((w) => [
        w.name,
        w.resources.map((r) => `${r.cluster} ${r.change}`),
        w.deletions,
      ]),
    ).toEqual([
      ["canary", ["fleet-system/c1 update"], []],
      ["ring-b", ["fleet-system/c2 update"], []],
      ["remaining", [], ["KnativeServing knative-fleet/c4-serving"]],
    ]);
    const text = renderMarkdown(plan);
    expect(text).toContain("Policy `rollout.yaml:1`. The merge changes CRs in 3 of 3 waves");
    expect(text).toContain(
      "| canary | `KnativeServing knative-fleet/c1-serving` | fleet-system/c1 | update | 1 | 90s | 30m |",
    );
    expect(text).toContain(
      "Deletions go in reverse wave order: KnativeServing knative-fleet/c4-serving (wave remaining).",
    );
  });

  it("says which waves the merge needs an approval for, and which changed clusters are outside their windows", async () => {
    // Read once: the expected text below must name the same minutes, whenever the clock turns one.
    const [start, end] = [utcIn(3), utcIn(4)];
    const gated = {
      ...POLICY,
      waves: [POLICY.waves[0], { ...POLICY.waves[1], approval: "Required" }],
      // c3's window opens in three hours.
      clusterWindows: [
        {
          name: "later",
          clusterProfiles: [{ namespace: "fleet-system", name: "c3" }],
          windows: [{ start, end }],
        },
      ],
    };
    const plan = await planOfFiles(
      files(fleetFiles(["c1", "c2", "c3"], gated, () => "1.21")),
      files(fleetFiles(["c1", "c2", "c3"], gated, () => "1.22")),
      { inventory },
    );
    expect(plan.rollout!.waves.map((w) => [w.name, w.approval])).toEqual([
      ["canary", false],
      ["ring-b", true],
      ["remaining", false],
    ]);
    const text = renderMarkdown(plan);
    expect(text).toContain(
      "✋ Wave ring-b opens only once approved in Git for the merge commit: `knative-fleet approve --wave <wave> --commit <merge commit>`",
    );
    expect(text).toContain(
      `🕑 Outside their maintenance windows now (they wait until one opens): fleet-system/c3 (outside its maintenance windows later (daily ${start}-${end} UTC)).`,
    );
  });

  it("without the inventory, a wave by labels cannot be resolved and says so", async () => {
    const plan = await planOfFiles(
      files(fleetFiles(["c1", "c2"], POLICY, () => "1.21")),
      files(fleetFiles(["c1", "c2"], POLICY, () => "1.22")),
    );
    expect(plan.rollout!.waves[2]!.resources.map((r) => r.cluster)).toEqual(["fleet-system/c2"]);
    expect(renderMarkdown(plan)).toContain(
      "Waves chosen by ClusterProfile labels or properties need the ClusterProfiles, which this plan has not read",
    );
  });

  it("removing the policy is a warning that the next change goes everywhere at once", async () => {
    const plan = await planOfFiles(
      files(fleetFiles(["c1"], POLICY, () => "1.21")),
      files(fleetFiles(["c1"], undefined, () => "1.21")),
    );
    expect(plan.findings).toEqual([
      expect.objectContaining({ subject: "rollout.yaml:1", severity: "warning", code: "rollout-removed" }),
    ]);
    expect(plan.warnings).toBe(1);
    const text = renderMarkdown(plan);
    expect(text).toContain("⚠️ 1 warning");
    expect(text).toContain("The merge removes the rollout policy (`rollout.yaml:1`)");
  });

  it("a broken policy says every change would wait, an error and a warning; no policy, no section", async () => {
    const broken = files(fleetFiles(["c1"], { waves: [] }, () => "1.22"));
    const plan = await planOfFiles(broken, broken);
    expect(plan.findings.map((f) => f.code)).toEqual(["rollout-invalid"]);
    expect(plan.errors).toBeGreaterThan(0);
    expect(renderMarkdown(plan)).toContain("The rollout policy (`rollout.yaml`) fails validation");
    const none = files(fleetFiles(["c1"], undefined, () => "1.22"));
    expect((await planOfFiles(none, none)).rollout).toBeUndefined();
  });
});
