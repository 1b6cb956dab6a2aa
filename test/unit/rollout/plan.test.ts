import { describe, expect, it } from "vitest";
import { planRollout, renderRolloutPlan } from "../../../src/rollout/plan.ts";
import { cluster, fleetModel } from "./support.ts";

const POLICY = {
  waves: [
    { name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] },
    { name: "ring-b", clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }] },
  ],
  soak: "90s",
};
const INVENTORY = [cluster("c1"), cluster("c2", { ring: "b" }), cluster("c3")];

describe("plan's rollout section", () => {
  it("shows each wave, its CRs and which the merge changes; deletions in reverse", () => {
    const base = fleetModel(["c1", "c2", "c3", "c4"], POLICY, () => "1.21");
    const head = fleetModel(["c1", "c2", "c3"], POLICY, (c) => (c === "c3" ? "1.21" : "1.22"));
    const plan = planRollout(base, head, INVENTORY)!;
    expect(
      plan.waves.map((w) => [w.name, w.resources.map((r) => `${r.cluster} ${r.change}`), w.deletions]),
    ).toEqual([
      ["canary", ["fleet-system/c1 update"], []],
      ["ring-b", ["fleet-system/c2 update"], []],
      ["remaining", ["fleet-system/c3 none"], ["KnativeServing knative-fleet/c4-serving"]],
    ]);
    const text = renderRolloutPlan(plan);
    expect(text).toContain("Policy `rollout.yaml:1`. The merge changes CRs in 2 of 3 waves");
    expect(text).toContain(
      "| canary | `KnativeServing knative-fleet/c1-serving` | fleet-system/c1 | update | 1 | 90s | 30m |",
    );
    expect(text).toContain(
      "Deletions go in reverse wave order: KnativeServing knative-fleet/c4-serving (wave remaining).",
    );
  });

  it("without the inventory, a wave by labels cannot be resolved and says so", () => {
    const model = fleetModel(["c1", "c2"], POLICY, () => "1.22");
    const plan = planRollout(
      fleetModel(["c1", "c2"], POLICY, () => "1.21"),
      model,
      undefined,
    )!;
    expect(plan.waves[2]!.resources.map((r) => r.cluster)).toEqual(["fleet-system/c2"]);
    expect(renderRolloutPlan(plan)).toContain(
      "Waves chosen by ClusterProfile labels or properties need the hub",
    );
  });

  it("a broken policy says every change would wait; no policy, no section", () => {
    const broken = fleetModel(["c1"], { waves: [] }, () => "1.22");
    expect(renderRolloutPlan(planRollout(broken, broken, INVENTORY)!)).toContain(
      "The rollout policy (`rollout.yaml`) fails validation",
    );
    const none = fleetModel(["c1"], undefined, () => "1.22");
    expect(planRollout(none, none, INVENTORY)).toBeUndefined();
  });
});
