import { describe, expect, it } from "vitest";
import { formatIdentity } from "../../../src/fleet/identity.ts";
import { gatePrunes } from "../../../src/rollout/gate.ts";
import { historyOf } from "../../../src/rollout/state.ts";
import { healthOf } from "../../../src/rollout/weigh.ts";
import { at, candidate, INVENTORY, live, POLICY } from "./gate-fleet.ts";
import { cluster, FakeHub, fleetModel } from "./support.ts";

const CLUSTERS = ["c1", "c2", "c3", "c4"];

/** Syncs every 30 s, the controller making each applied CR healthy (or not), until the rollout settles. */
function run(
  hub: FakeHub,
  model: ReturnType<typeof fleetModel>,
  commit: string,
  from: number,
  healthy: (cr: string) => boolean = () => true,
): { applied: [string, number][]; end: number } {
  const applied: [string, number][] = [];
  let t = from;
  for (; t < from + 3600; t += 30) {
    hub.applied = [];
    const outcome = hub.sync(model, commit, at(t), INVENTORY);
    for (const key of hub.applied) {
      const cr = key.split("/")[1]!;
      applied.push([cr, t - from]);
      hub.report(cr, healthy(cr));
    }
    if (outcome.state.phase !== "Progressing") break;
  }
  return { applied, end: t };
}

/** Installed at 1.21, then a 1.22 the canary never runs: halted in the canary. */
function haltedInCanary(): { hub: FakeHub; halted: { end: number } } {
  const { hub, end } = installed("1.21");
  const halted = run(
    hub,
    fleetModel(CLUSTERS, POLICY, () => "1.22"),
    "commit-bad",
    end,
    (cr) => cr !== "c1-serving",
  );
  expect(hub.state?.phase).toBe("Halted");
  return { hub, halted };
}

function installed(version: string): { hub: FakeHub; end: number } {
  const hub = new FakeHub();
  const { end } = run(
    hub,
    fleetModel(CLUSTERS, POLICY, () => version),
    "commit-a",
    0,
  );
  expect(hub.state?.phase).toBe("Complete");
  return { hub, end };
}

describe("the rollout gate", () => {
  it("takes a version bump through canary, then the labelled wave one cluster at a time, then the rest", () => {
    const { hub, end } = installed("1.21");
    const { applied } = run(
      hub,
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      end,
    );
    // canary at once, seen healthy by the next sync (30 s); ring-b after the canary's 1 m soak, one at a
    // time (maxUnavailable 1); the remaining wave after ring-b's soak.
    expect(applied).toEqual([
      ["c1-serving", 0],
      ["c2-serving", 90],
      ["c3-serving", 120],
      ["c4-serving", 210],
    ]);
    expect(hub.state?.phase).toBe("Complete");
    expect(historyOf(hub.state!).map((h) => h.wave)).toEqual(["canary", "ring-b", "remaining"]);
    expect(CLUSTERS.map((c) => hub.version(`${c}-serving`))).toEqual(["1.22", "1.22", "1.22", "1.22"]);
  });

  it("says on each held CR which revision it waits for and why", () => {
    const { hub, end } = installed("1.21");
    const outcome = hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(end),
      INVENTORY,
    );
    expect(outcome.steps.map((s) => [s.name, s.action])).toEqual([
      ["c1-serving", "update"],
      ["c2-serving", "waiting"],
      ["c3-serving", "waiting"],
      ["c4-serving", "waiting"],
    ]);
    expect(outcome.waiting.get("KnativeServing knative-fleet/c2-serving")).toBe(
      "rollout of commit-b waits for its wave, ring-b",
    );
    expect(outcome.openWave).toBe("canary");
  });

  it("halts in the canary when it is not healthy within the time limit, leaving later waves untouched", () => {
    const { hub, end } = installed("1.21");
    const bad = fleetModel(CLUSTERS, POLICY, () => "1.22");
    const { applied } = run(hub, bad, "commit-bad", end, (cr) => cr !== "c1-serving");
    expect(applied).toEqual([["c1-serving", 0]]);
    expect(hub.state?.phase).toBe("Halted");
    expect(hub.state?.halt).toMatchObject({
      wave: "canary",
      resource: "KnativeServing knative-fleet/c1-serving",
      cluster: "fleet-system/c1",
      reason: "DeploymentsAvailable=False (NotReady: waiting for deployments: controller)",
    });
    expect(["c2", "c3", "c4"].map((c) => hub.version(`${c}-serving`))).toEqual(["1.21", "1.21", "1.21"]);
    // Halted stays halted: nothing more goes out for this revision, and the hub CRs say why.
    hub.applied = [];
    const later = hub.sync(bad, "commit-bad-status-writeback", at(end + 7200), INVENTORY);
    expect(hub.applied).toEqual([]);
    expect(later.waiting.get("KnativeServing knative-fleet/c4-serving")).toMatch(
      /^rollout of commit-bad halted in wave canary: KnativeServing knative-fleet\/c1-serving on fleet-system\/c1: DeploymentsAvailable=False/,
    );
  });

  it("halt-and-revert puts the failed wave back on the last revision that was healthy there", () => {
    const policy = { ...POLICY, onFailure: "HaltAndRevert" };
    const hub = new FakeHub();
    const { end } = run(
      hub,
      fleetModel(CLUSTERS, policy, () => "1.21"),
      "commit-a",
      0,
    );
    const bad = fleetModel(CLUSTERS, policy, () => "1.22");
    const halted = run(hub, bad, "commit-bad", end, (cr) => cr !== "c1-serving");
    expect(hub.state?.phase).toBe("Halted");
    // The sync that halts reverts at once, with the old commit on the CR.
    expect(halted.applied).toEqual([
      ["c1-serving", 0],
      ["c1-serving", 330],
    ]);
    const c1 = hub.objects.get("KnativeServing knative-fleet/c1-serving")!;
    expect(hub.version("c1-serving")).toBe("1.21");
    expect(c1.metadata.annotations?.["fleet.knative.dev/source-commit"]).toBe("commit-a");
    // Reverted once: the next sync leaves it alone.
    hub.report("c1-serving", true);
    hub.applied = [];
    hub.sync(bad, "commit-bad", at(halted.end + 600), INVENTORY);
    expect(hub.applied).toEqual([]);
  });

  it("a newer commit supersedes a halted rollout and starts again from the first wave", () => {
    const { hub, halted } = haltedInCanary();
    const fixed = run(
      hub,
      fleetModel(CLUSTERS, POLICY, () => "1.23"),
      "commit-fix",
      halted.end + 30,
    );
    expect(fixed.applied.map(([cr]) => cr)).toEqual(["c1-serving", "c2-serving", "c3-serving", "c4-serving"]);
    expect(hub.state).toMatchObject({ phase: "Complete", commit: "commit-fix" });
    expect(hub.state?.halt).toBeUndefined();
  });

  it("holds while paused, in the file or on the hub, and goes on when resumed", () => {
    const { hub, end } = installed("1.21");
    const paused = fleetModel(CLUSTERS, { ...POLICY, paused: true }, () => "1.22");
    const outcome = hub.sync(paused, "commit-b", at(end), INVENTORY);
    expect(outcome.steps.filter((s) => s.action === "update")).toEqual([]);
    expect(outcome.waiting.get("KnativeServing knative-fleet/c1-serving")).toBe(
      "rollout of commit-b is paused",
    );
    hub.hubPaused = true;
    const resumedInFile = fleetModel(CLUSTERS, POLICY, () => "1.22");
    expect(hub.sync(resumedInFile, "commit-c", at(end + 30), INVENTORY).steps.map((s) => s.action)).toEqual([
      "waiting",
      "waiting",
      "waiting",
      "waiting",
    ]);
    hub.hubPaused = false;
    const { applied } = run(hub, resumedInFile, "commit-c", end + 60);
    expect(applied.map(([cr]) => cr)).toEqual(["c1-serving", "c2-serving", "c3-serving", "c4-serving"]);
  });

  it("opens no wave outside its windows; a wave already open finishes", () => {
    const { hub, end } = installed("1.21");
    // 10:00 UTC on a Monday is 11:00 in Berlin (winter time); the window opens at 11:08 Berlin time.
    expect(end).toBeLessThan(480);
    const windowed = {
      ...POLICY,
      windows: [{ days: ["Mon"], start: "11:08", end: "11:10", timeZone: "Europe/Berlin" }],
    };
    const model = fleetModel(CLUSTERS, windowed, () => "1.22");
    const before = hub.sync(model, "commit-b", at(end), INVENTORY);
    expect(before.waiting.get("KnativeServing knative-fleet/c1-serving")).toBe(
      "rollout of commit-b in progress: wave canary waits to open: outside the rollout windows",
    );
    const { applied } = run(hub, model, "commit-b", 480);
    // canary opens at 11:08; ring-b opens at 11:09:30 after the soak; c3 goes out in the open wave at
    // 11:10, when the window has closed; the remaining wave waits for next Monday.
    expect(applied).toEqual([
      ["c1-serving", 0],
      ["c2-serving", 90],
      ["c3-serving", 120],
    ]);
    expect(hub.state?.phase).toBe("Progressing");
    expect(hub.version("c4-serving")).toBe("1.21");
  });

  it("allAtOnce sends every change now: the documented emergency path", () => {
    const { hub, end } = installed("1.21");
    const outcome = hub.sync(
      fleetModel(CLUSTERS, { ...POLICY, allAtOnce: true }, () => "1.22"),
      "fix",
      at(end),
      INVENTORY,
    );
    expect(outcome.steps.map((s) => s.action)).toEqual(["update", "update", "update", "update"]);
    expect(outcome.waiting.size).toBe(0);
    // Done when every CR is healthy on it: no soak, no waves.
    for (const c of CLUSTERS) hub.report(`${c}-serving`, true);
    expect(
      hub.sync(
        fleetModel(CLUSTERS, { ...POLICY, allAtOnce: true }, () => "1.22"),
        "fix",
        at(end + 1),
        INVENTORY,
      ).state.phase,
    ).toBe("Complete");
  });

  it("percent maxUnavailable lets that share of a wave change at once", () => {
    const { hub, end } = installed("1.21");
    const policy = {
      waves: [{ name: "all", clusterSelectorTerms: [{ labelSelector: {} }], maxUnavailable: "50%" }],
    };
    const outcome = hub.sync(
      fleetModel(CLUSTERS, policy, () => "1.22"),
      "b",
      at(end),
      INVENTORY,
    );
    expect(outcome.steps.map((s) => s.action)).toEqual(["update", "update", "waiting", "waiting"]);
  });

  it("a new leader reads the stored state and goes on without re-applying finished waves", () => {
    const { hub, end } = installed("1.21");
    const model = fleetModel(CLUSTERS, POLICY, () => "1.22");
    run(hub, model, "commit-b", end).applied;
    const first = new FakeHub();
    // Mid-rollout: canary done and soaking when the leader dies.
    const mid = installed("1.21").hub;
    mid.sync(model, "commit-b", at(end), INVENTORY);
    mid.report("c1-serving", true);
    mid.sync(model, "commit-b", at(end + 30), INVENTORY);
    first.objects.clear();
    for (const [key, object] of mid.objects) first.objects.set(key, object);
    first.state = mid.state;
    first.applied = [];
    const { applied } = run(first, model, "commit-b", end + 60);
    expect(applied.map(([cr]) => cr)).toEqual(["c2-serving", "c3-serving", "c4-serving"]);
  });

  it("a relabel during a bad canary neither skips the canary nor lets the change past it", () => {
    const { hub, end } = installed("1.21");
    const bad = fleetModel(CLUSTERS, POLICY, () => "1.22");
    hub.sync(bad, "commit-bad", at(end), INVENTORY); // the canary gets it, and never turns healthy
    hub.report("c1-serving", false);
    // c4 joins ring-b: an inventory change, no commit. Nothing is released beyond the canary, at once or later.
    const relabelled = [...INVENTORY.slice(0, 3), cluster("c4", { ring: "b" })];
    for (let t = end + 5; t < end + 400; t += 30) hub.sync(bad, "commit-bad", at(t), relabelled);
    expect(["c2", "c3", "c4"].map((c) => hub.version(`${c}-serving`))).toEqual(["1.21", "1.21", "1.21"]);
    expect(hub.state?.halt).toMatchObject({
      wave: "canary",
      resource: "KnativeServing knative-fleet/c1-serving",
    });
  });

  it("a relabel during a good rollout keeps the canary's soak", () => {
    const { hub, end } = installed("1.21");
    const good = fleetModel(CLUSTERS, POLICY, () => "1.22");
    hub.sync(good, "commit-b", at(end), INVENTORY);
    hub.report("c1-serving", true);
    hub.sync(good, "commit-b", at(end + 10), INVENTORY); // healthy from here: the soak (1m) starts
    const relabelled = [...INVENTORY.slice(0, 3), cluster("c4", { ring: "b" })];
    hub.applied = [];
    hub.sync(good, "commit-b", at(end + 20), relabelled);
    hub.sync(good, "commit-b", at(end + 65), relabelled);
    expect(hub.applied).toEqual([]);
    hub.sync(good, "commit-b", at(end + 71), relabelled);
    expect(hub.applied).toEqual(["KnativeServing knative-fleet/c2-serving"]);
  });

  it("halt-and-revert puts back every CR that got the change, in every wave, not only the halted one", () => {
    const policy = { ...POLICY, onFailure: "HaltAndRevert" };
    const hub = new FakeHub();
    const { end } = run(
      hub,
      fleetModel(CLUSTERS, policy, () => "1.21"),
      "commit-a",
      0,
    );
    // Healthy in the canary, failing in ring-b: the halt is in ring-b.
    run(
      hub,
      fleetModel(CLUSTERS, policy, () => "1.22"),
      "commit-bad",
      end,
      (cr) => cr !== "c2-serving",
    );
    expect(hub.state?.halt?.wave).toBe("ring-b");
    expect(CLUSTERS.map((c) => hub.version(`${c}-serving`))).toEqual(["1.21", "1.21", "1.21", "1.21"]);
  });

  it("a commit with a broken file keeps the revert target: the next bad change is still reverted", () => {
    const policy = { ...POLICY, onFailure: "HaltAndRevert" };
    const hub = new FakeHub();
    const { end } = run(
      hub,
      fleetModel(CLUSTERS, policy, () => "1.21"),
      "commit-a",
      0,
    );
    // c1's file fails validation for a while: its CR keeps its state, and what it last ran healthy is kept.
    const broken = fleetModel(CLUSTERS, policy, (c) => (c === "c1" ? null : "1.21"));
    expect(broken.files.find((f) => f.path.includes("c1"))?.status).toBe("failed");
    run(hub, broken, "commit-broken", end);
    expect(hub.state?.crs["KnativeServing knative-fleet/c1-serving"]?.baseline?.commit).toBe("commit-a");
    // The fix comes with a bad change: it halts in the canary and goes back to commit-a.
    run(
      hub,
      fleetModel(CLUSTERS, policy, () => "1.22"),
      "commit-bad",
      end + 600,
      (cr) => cr !== "c1-serving",
    );
    expect(hub.state?.phase).toBe("Halted");
    expect(hub.version("c1-serving")).toBe("1.21");
    expect(
      hub.objects.get("KnativeServing knative-fleet/c1-serving")?.metadata.annotations?.[
        "fleet.knative.dev/source-commit"
      ],
    ).toBe("commit-a");
  });

  it("a broken file of a CR in flight does not open the next wave", () => {
    const { hub, end } = installed("1.21");
    hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.22"),
      "commit-b",
      at(end),
      INVENTORY,
    );
    // The canary has the change (not healthy yet) when its file breaks: the next wave waits for it.
    const brokenCanary = fleetModel(CLUSTERS, POLICY, (c) => (c === "c1" ? null : "1.22"));
    hub.applied = [];
    for (let t = end + 30; t < end + 600; t += 30) hub.sync(brokenCanary, "commit-c", at(t), INVENTORY);
    expect(hub.applied).toEqual([]);
  });

  it("Git going back to the last completed content goes out at once, in every wave", () => {
    const { hub, halted } = haltedInCanary();
    // `git revert`: the canary goes back now (no wave, no soak), and the halt is lifted.
    const outcome = hub.sync(
      fleetModel(CLUSTERS, POLICY, () => "1.21"),
      "commit-revert",
      at(halted.end + 30),
      INVENTORY,
    );
    expect(outcome.steps.map((s) => [s.name, s.action])).toEqual([
      ["c1-serving", "update"],
      ["c2-serving", "unchanged"],
      ["c3-serving", "unchanged"],
      ["c4-serving", "unchanged"],
    ]);
    expect(outcome.state.halt).toBeUndefined();
  });

  it("reads health as Ready=True on the current generation with DeploymentsAvailable=True", () => {
    const cr = (status: unknown) => ({
      apiVersion: "operator.knative.dev/v1beta1",
      kind: "KnativeServing",
      metadata: { name: "x", namespace: "n", generation: 3 },
      status,
    });
    const ready = { type: "Ready", status: "True", lastTransitionTime: "" };
    const deployments = { type: "DeploymentsAvailable", status: "True", lastTransitionTime: "" };
    expect(healthOf(cr({ observedGeneration: 3, conditions: [ready, deployments] })).healthy).toBe(true);
    expect(healthOf(cr({ observedGeneration: 2, conditions: [ready, deployments] }))).toEqual({
      healthy: false,
      reason: "the hub controller has not reported on the current spec yet",
    });
    expect(healthOf(cr({ observedGeneration: 3, conditions: [ready] })).healthy).toBe(false);
    expect(healthOf(cr(undefined)).healthy).toBe(false);
  });
});

describe("prunes follow the waves in reverse", () => {
  const spec = fleetModel([], POLICY, () => "1.21").rollout.policy!.rollout.spec;

  it("deletes the last wave's CRs first and the canary's last", () => {
    const hubCrs = [live("a", "c1"), live("b", "c2"), live("d", "c4")];
    const decided = gatePrunes(
      spec,
      INVENTORY,
      false,
      [candidate("a"), candidate("b"), candidate("d")],
      hubCrs,
    );
    expect(decided.map((c) => [c.name, c.waiting ?? "now"])).toEqual([
      ["a", "deletions go in reverse wave order: wave remaining first"],
      ["b", "deletions go in reverse wave order: wave remaining first"],
      ["d", "now"],
    ]);
    // While d is still being deleted, ring-b waits; once it is gone, ring-b goes.
    const deleting = [live("a", "c1"), live("b", "c2"), live("d", "c4", true)];
    expect(
      gatePrunes(spec, INVENTORY, false, [candidate("a"), candidate("b")], deleting)[1]!.waiting,
    ).toBeDefined();
    const gone = [live("a", "c1"), live("b", "c2")];
    expect(
      gatePrunes(spec, INVENTORY, false, [candidate("a"), candidate("b")], gone).map((c) => c.waiting),
    ).toEqual(["deletions go in reverse wave order: wave ring-b first", undefined]);
  });

  it("deletes nothing while paused", () => {
    const decided = gatePrunes(spec, INVENTORY, true, [candidate("d")], [live("d", "c4")]);
    expect(decided[0]!.waiting).toBe("the rollout is paused");
    expect(formatIdentity(decided[0]!)).toBe("KnativeServing knative-fleet/d");
  });
});
