import { describe, expect, it } from "vitest";
import { cluster, FakeHub, fleetModel } from "./support.ts";

// What the stage learns from the spokes before the gate decides: a cluster that fails the preflight for a
// change waits without holding its wave; a CR that a verification gate fails is not healthy, so its wave
// does not complete and, past the time limit, the rollout halts with the gate's reason.

const CLUSTERS = ["c1", "c2", "c3", "c4"];
const INVENTORY = CLUSTERS.map((name) => cluster(name));
const POLICY = {
  waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
  maxUnavailable: 3,
  soak: "1m",
  timeLimit: "5m",
};
const T0 = Date.parse("2026-03-02T10:00:00Z");
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const key = (c: string) => `KnativeServing knative-fleet/${c}-serving`;

/** Syncs every 30 s from `from`, the controller making each applied CR healthy, until the rollout settles. */
function run(hub: FakeHub, version: string, commit: string, from: number): number {
  let t = from;
  for (; t < from + 3600; t += 30) {
    hub.applied = [];
    const outcome = hub.sync(
      fleetModel(CLUSTERS, POLICY, () => version),
      commit,
      at(t),
      INVENTORY,
    );
    for (const applied of hub.applied) hub.report(applied.split("/")[1]!, true);
    if (outcome.state.phase !== "Progressing") break;
  }
  return t;
}

function installed(): { hub: FakeHub; end: number } {
  const hub = new FakeHub();
  const end = run(hub, "1.21", "commit-a", 0);
  expect(hub.state?.phase).toBe("Complete");
  return { hub, end };
}

describe("the gate with the spokes' checks", () => {
  it("a cluster that fails the preflight waits with why; its wave and the rollout go on without it", () => {
    const { hub, end } = installed();
    hub.checks = { blocked: new Map([[key("c3"), "Gateway API CRDs missing (GatewayAPIMissing)"]]) };
    const outcome = hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(end),
      INVENTORY,
    );
    expect(outcome.waiting.get(key("c3"))).toBe("rollout of commit-b waits for its wave, remaining");
    hub.report("c1-serving", true);
    const done = run(hub, "1.22", "commit-b", end + 30);
    expect(hub.state?.phase).toBe("Complete");
    expect(CLUSTERS.map((c) => hub.version(`${c}-serving`))).toEqual(["1.22", "1.22", "1.21", "1.22"]);
    const last = hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(done + 30),
      INVENTORY,
    );
    expect(last.waiting.get(key("c3"))).toBe(
      "rollout of commit-b: its cluster is not ready for it: Gateway API CRDs missing (GatewayAPIMissing)",
    );
    // Fixed on the spoke: its change goes out at the next sync, as a rollout of its own.
    hub.checks = {};
    hub.applied = [];
    hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(done + 60),
      INVENTORY,
    );
    expect(hub.applied).toEqual([key("c3")]);
  });

  it("with onPreflightFailure HoldWave, the wave waits for the cluster: later waves do not open", () => {
    const hub = new FakeHub();
    const policy = { ...POLICY, onPreflightFailure: "HoldWave" };
    const model = (v: string) => fleetModel(CLUSTERS, policy, () => v);
    let t = 0;
    for (; t < 600; t += 30) {
      hub.applied = [];
      hub.sync(model("1.21"), "commit-a", at(t), INVENTORY);
      for (const applied of hub.applied) hub.report(applied.split("/")[1]!, true);
      if (hub.state?.phase === "Complete") break;
    }
    hub.checks = { blocked: new Map([[key("c1"), "IstioMissing: no Istio"]]) };
    for (t += 30; t < 1200; t += 30) {
      const outcome = hub.sync(model("1.22"), "commit-b", at(t), INVENTORY);
      expect(outcome.state.phase).toBe("Progressing");
      expect(outcome.openWave).toBe("canary");
    }
    expect(CLUSTERS.map((c) => hub.version(`${c}-serving`))).toEqual(["1.21", "1.21", "1.21", "1.21"]);
  });

  it("a verification gate failing on the Ready canary keeps the next wave shut, then halts with the gate's reason", () => {
    const { hub, end } = installed();
    const failing = "gate error-rate: sum(rate(errors[1m])) = 0.31, wanted < 0.05";
    hub.checks = { failing: new Map([[key("c1"), failing]]) };
    let t = end;
    for (; t < end + 600; t += 30) {
      hub.applied = [];
      hub.sync(
        fleetModel(CLUSTERS, POLICY, () => "1.22"),
        "commit-b",
        at(t),
        INVENTORY,
      );
      for (const applied of hub.applied) hub.report(applied.split("/")[1]!, true);
      if (hub.state?.phase === "Halted") break;
    }
    expect(hub.state?.phase).toBe("Halted");
    expect(hub.state?.halt).toMatchObject({ wave: "canary", resource: key("c1"), reason: failing });
    expect(["c2", "c3", "c4"].map((c) => hub.version(`${c}-serving`))).toEqual(["1.21", "1.21", "1.21"]);
  });

  it("a gate passing again within the time limit lets the rollout go on", () => {
    const { hub, end } = installed();
    hub.checks = { failing: new Map([[key("c1"), "gate http: 503"]]) };
    hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(end),
      INVENTORY,
    );
    hub.report("c1-serving", true);
    hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(end + 60),
      INVENTORY,
    );
    hub.checks = {};
    run(hub, "1.22", "commit-b", end + 120);
    expect(hub.state?.phase).toBe("Complete");
    expect(CLUSTERS.map((c) => hub.version(`${c}-serving`))).toEqual(["1.22", "1.22", "1.22", "1.22"]);
  });
});
