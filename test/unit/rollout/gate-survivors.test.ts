import { describe, expect, it } from "vitest";
import { type GateOutcome, gatePrunes, type RolloutEvent } from "../../../src/rollout/gate.ts";
import { approvalVerdict } from "../../../src/rollout/state.ts";
import { at, candidate, INVENTORY, live, POLICY } from "./gate-fleet.ts";
import { FakeHub, fleetModel } from "./support.ts";

// What the rollout gate promises users, in the corners the main tests (gate.test.ts) pass by: the words of
// a halt and of its lifting, what lifts a halt and what does not, which CRs a held wave names, the budget
// of a wave, the Events of a wave that opens, the waves a rollout records, and deletions with allAtOnce.

const CLUSTERS = ["c1", "c2", "c3", "c4"];
const key = (c: string) => `KnativeServing knative-fleet/${c}-serving`;
const C1 = { kind: "KnativeServing" as const, namespace: "knative-fleet", name: "c1-serving" };
const OTHER = { kind: "KnativeServing" as const, namespace: "knative-fleet", name: "gone-serving" };
type Version = (cluster: string) => string | null;

/** One sync; every CR it writes reported healthy or not as `healthy` says. */
function step(
  hub: FakeHub,
  policy: Record<string, unknown>,
  version: Version,
  commit: string,
  t: number,
  healthy: (cr: string) => boolean = () => true,
  clusters = INVENTORY,
  held: Parameters<FakeHub["sync"]>[4] = [],
): GateOutcome {
  hub.applied = [];
  const outcome = hub.sync(fleetModel(CLUSTERS, policy, version), commit, at(t), clusters, held);
  for (const applied of hub.applied) {
    const cr = applied.split("/")[1]!;
    hub.report(cr, healthy(cr));
  }
  return outcome;
}

/** Syncs every 30 s until the rollout settles; every outcome. */
function run(
  hub: FakeHub,
  policy: Record<string, unknown>,
  version: Version,
  commit: string,
  from: number,
  healthy: (cr: string) => boolean = () => true,
): { outcomes: GateOutcome[]; end: number } {
  const outcomes: GateOutcome[] = [];
  let t = from;
  for (; t < from + 3600; t += 30) {
    const outcome = step(hub, policy, version, commit, t, healthy);
    outcomes.push(outcome);
    if (outcome.state.phase !== "Progressing") break;
  }
  return { outcomes, end: t };
}

function installed(policy = POLICY): { hub: FakeHub; end: number } {
  const hub = new FakeHub();
  const { end } = run(hub, policy, () => "1.21", "commit-a", 0);
  expect(hub.state?.phase).toBe("Complete");
  return { hub, end };
}

/** Installed at 1.21, then 1.22 that `bad` never runs healthy: halted in that CR's wave. */
function halted(bad = "c1-serving", policy = POLICY) {
  const { hub, end } = installed(policy);
  const { outcomes, end: haltedAt } = run(
    hub,
    policy,
    () => "1.22",
    "commit-bad",
    end,
    (cr) => cr !== bad,
  );
  expect(hub.state?.phase).toBe("Halted");
  return { hub, outcomes, end: haltedAt };
}

const reasons = (events: RolloutEvent[]) => events.map((e) => e.reason);
const liftedFor = (resource: string, why: string) => ({
  type: "Normal",
  reason: "RolloutHaltLifted",
  message: `the halt in wave canary (${resource}) is lifted: ${why}`,
});

describe("a halt", () => {
  it("says where, on which cluster, after how long and why, once", () => {
    const { hub, outcomes, end } = halted();
    const last = outcomes.at(-1)!;
    expect(last.events).toEqual([
      {
        resource: C1,
        type: "Warning",
        reason: "RolloutHalted",
        message:
          "rollout of commit-bad halted in wave canary: KnativeServing knative-fleet/c1-serving on fleet-system/c1 " +
          "not healthy within 300s: DeploymentsAvailable=False (NotReady: waiting for deployments: controller)",
      },
    ]);
    // Neither the halted rollout's wave nor a wave name is reported as open.
    expect(last.openWave).toBeUndefined();
    expect(last.state.waveName).toBeUndefined();
    expect(last.state.upgrades).toBeUndefined();
    // The next syncs halt nothing again: no second Event, the halt keeps its time.
    const haltAt = hub.state?.halt?.at;
    const again = step(hub, POLICY, () => "1.22", "commit-bad", end + 30);
    expect(again.events).toEqual([]);
    expect(hub.state?.halt?.at).toBe(haltAt);
    // Only the CRs that wait for new content are held; c1, on the content Git wants, is not named.
    expect([...again.waiting.keys()].sort()).toEqual([key("c2"), key("c3"), key("c4")]);
  });

  it("holds at the same commit, even once the failed CR is no longer wanted nor held", () => {
    const { hub, end } = halted();
    const left = hub.sync(
      fleetModel(CLUSTERS.slice(1), POLICY, () => "1.22"),
      "commit-bad",
      at(end + 30),
      INVENTORY,
    );
    expect(left.state.phase).toBe("Halted");
    expect(reasons(left.events)).toEqual([]);
  });

  it("with HaltAndRevert, does not revert again a CR whose revert to that baseline failed", () => {
    const revert = { ...POLICY, onFailure: "HaltAndRevert" };
    const failedBefore = (revertFailed: boolean) => {
      const { hub, end } = halted();
      const entry = hub.state!.crs[key("c1")]!;
      if (revertFailed) entry.revertFailed = entry.baseline!.hash;
      return { hub, outcome: step(hub, revert, () => "1.22", "commit-bad", end + 30) };
    };
    expect(failedBefore(false).outcome.reverts.map((r) => r.resource)).toEqual([C1]);
    const { hub, outcome } = failedBefore(true);
    expect(outcome.state.phase).toBe("Halted");
    expect(outcome.reverts).toEqual([]);
    expect(hub.version("c1-serving")).toBe("1.22");
  });

  it("holds when a newer commit wants the same content for the CR that failed", () => {
    const { hub, end } = halted();
    const outcome = step(hub, POLICY, (c) => (c === "c1" ? "1.22" : "1.23"), "commit-c", end + 30);
    expect(outcome.state.phase).toBe("Halted");
    expect(hub.version("c2-serving")).toBe("1.21");
  });

  it("holds when the failed CR's file fails validation in a newer commit", () => {
    const { hub, end } = halted();
    const outcome = step(hub, POLICY, (c) => (c === "c1" ? null : "1.23"), "commit-c", end + 30);
    expect(outcome.state.phase).toBe("Halted");
  });

  it("in a later wave holds when a newer commit changes only an earlier wave", () => {
    const { hub, end } = halted("c2-serving");
    expect(hub.state?.halt?.resource).toBe(key("c2"));
    const outcome = step(hub, POLICY, (c) => (c === "c2" ? "1.22" : "1.23"), "commit-c", end + 30);
    expect(outcome.state.phase).toBe("Halted");
    expect(reasons(outcome.events)).toEqual([]);
  });

  it("is lifted by a newer commit with other content for the failed CR, saying so", () => {
    const { hub, end } = halted();
    const outcome = step(hub, POLICY, () => "1.23", "commit-fix", end + 30);
    expect(outcome.events[0]).toEqual(liftedFor(key("c1"), `Git wants another content for ${key("c1")}`));
    expect(outcome.state.halt).toBeUndefined();
  });

  it("completes no wave while it holds, even once the failed CR recovers", () => {
    const { hub, end } = halted();
    hub.report("c1-serving", true);
    step(hub, POLICY, () => "1.22", "commit-bad", end + 30);
    const outcome = step(hub, POLICY, () => "1.22", "commit-bad", end + 120);
    expect(outcome.state.phase).toBe("Halted");
    expect(outcome.state.waves.canary?.opened).toBeDefined();
    expect(outcome.state.waves.canary?.completed).toBeUndefined();
  });

  it("is lifted by allAtOnce, saying so", () => {
    const { hub, end } = halted();
    const outcome = step(hub, { ...POLICY, allAtOnce: true }, () => "1.22", "commit-emergency", end + 30);
    expect(outcome.events[0]).toEqual(liftedFor(key("c1"), "allAtOnce is set"));
    expect(outcome.state.phase).not.toBe("Halted");
  });

  it("of a CR Git no longer declares holds while the CR is held for its grace period", () => {
    const gone = CLUSTERS.slice(1);
    const without = (held: (typeof C1)[]) => {
      const { hub, end } = halted();
      hub.applied = [];
      const model = fleetModel(gone, POLICY, () => "1.22");
      return hub.sync(model, "commit-c", at(end + 30), INVENTORY, held);
    };
    expect(without([OTHER, C1]).state.phase).toBe("Halted");
    expect(without([C1]).state.phase).toBe("Halted");
    const free = without([OTHER]);
    expect(free.state.phase).not.toBe("Halted");
    expect(free.events[0]).toEqual(liftedFor(key("c1"), `Git wants another content for ${key("c1")}`));
  });
});

describe("a rollout that does not halt", () => {
  it("emits no lifted halt under allAtOnce", () => {
    const { hub, end } = installed();
    const outcome = step(hub, { ...POLICY, allAtOnce: true }, () => "1.22", "fix", end);
    expect(reasons(outcome.events)).not.toContain("RolloutHaltLifted");
  });

  it("does not halt on a CR that Git put back on its baseline, unhealthy there", () => {
    const { hub, end } = installed();
    const policy = { ...POLICY, soak: "10m" };
    step(
      hub,
      policy,
      () => "1.22",
      "commit-bad",
      end,
      () => false,
    );
    // Within the time limit Git puts the canary back; the rest still wants 1.22.
    const back = (c: string) => (c === "c1" ? "1.21" : "1.22");
    step(hub, policy, back, "commit-back", end + 60, () => false);
    expect(hub.version("c1-serving")).toBe("1.21");
    // The later waves soak for 10 minutes: the rollout is still in progress past c1's time limit.
    for (let t = end + 90; t < end + 900; t += 30) {
      step(hub, policy, back, "commit-back", t);
      expect(hub.state?.phase).toBe("Progressing");
    }
    expect(hub.version("c2-serving")).toBe("1.22");
    // The canary opened, and counts as done though Git took its change back.
    expect(hub.state?.waves.canary?.completed).toBeDefined();
  });
});

describe("held CRs", () => {
  it("a paused rollout names only the CRs with a change", () => {
    const { hub, end } = installed();
    const outcome = step(
      hub,
      { ...POLICY, paused: true },
      (c) => (c === "c3" ? "1.21" : "1.22"),
      "commit-b",
      end,
    );
    expect([...outcome.waiting.keys()].sort()).toEqual([key("c1"), key("c2"), key("c4")]);
  });

  it("outside the windows, each later wave's CR says its wave and why", () => {
    const { hub, end } = installed();
    const windowed = {
      ...POLICY,
      windows: [{ days: ["Mon"], start: "11:08", end: "11:10", timeZone: "Europe/Berlin" }],
    };
    const outcome = step(hub, windowed, () => "1.22", "commit-b", end);
    const why = "outside the rollout windows";
    expect(Object.fromEntries(outcome.waiting)).toEqual({
      [key("c1")]: `rollout of commit-b in progress: wave canary waits to open: ${why}`,
      [key("c2")]: `rollout of commit-b waits for its wave, ring-b: ${why}`,
      [key("c3")]: `rollout of commit-b waits for its wave, ring-b: ${why}`,
      [key("c4")]: `rollout of commit-b waits for its wave, remaining: ${why}`,
    });
    expect(outcome.steps.find((s) => s.name === "c2-serving")?.reason).toBe(
      `rollout of commit-b waits for its wave, ring-b: ${why}`,
    );
  });

  it("a wave waiting outside the windows names neither CRs without a change nor a blocked earlier one", () => {
    const { hub, end } = installed();
    hub.checks = { blocked: new Map([[key("c1"), "Gateway API CRDs missing"]]) };
    const windowed = {
      ...POLICY,
      windows: [{ days: ["Mon"], start: "11:08", end: "11:10", timeZone: "Europe/Berlin" }],
    };
    const outcome = step(hub, windowed, (c) => (c === "c3" ? "1.21" : "1.22"), "commit-b", end);
    const why = "outside the rollout windows";
    expect(Object.fromEntries(outcome.waiting)).toEqual({
      [key("c1")]: "rollout of commit-b: its cluster is not ready for it: Gateway API CRDs missing",
      [key("c2")]: `rollout of commit-b in progress: wave ring-b waits to open: ${why}`,
      [key("c4")]: `rollout of commit-b waits for its wave, remaining: ${why}`,
    });
  });

  it("a wave awaiting approval names neither CRs without a change nor a blocked earlier one", () => {
    const { hub, end } = installed();
    hub.checks = { blocked: new Map([[key("c1"), "Gateway API CRDs missing"]]), approvals: new Set() };
    const waves = POLICY.waves as Record<string, unknown>[];
    const approving = { ...POLICY, waves: [waves[0], { ...waves[1], approval: "Required" }] };
    const outcome = step(hub, approving, (c) => (c === "c3" ? "1.21" : "1.22"), "commit-b", end);
    expect(outcome.awaitingApproval).toEqual({ wave: "ring-b", commit: "commit-b" });
    expect(Object.fromEntries(outcome.waiting)).toEqual({
      [key("c1")]: "rollout of commit-b: its cluster is not ready for it: Gateway API CRDs missing",
      [key("c2")]: approvalVerdict({ commit: "commit-b", wave: "ring-b" }),
      [key("c4")]: "rollout of commit-b waits for its wave, remaining",
    });
  });

  it("an unhealthy changed CR spends the wave's budget: the next one waits its turn", () => {
    const { hub, end } = installed();
    let t = end;
    for (; !hub.applied.includes(key("c2")); t += 30) {
      step(
        hub,
        POLICY,
        () => "1.22",
        "commit-b",
        t,
        (cr) => cr !== "c2-serving",
      );
    }
    const outcome = step(hub, POLICY, () => "1.22", "commit-b", t);
    expect(hub.version("c3-serving")).toBe("1.21");
    expect(Object.fromEntries(outcome.waiting)).toEqual({
      [key("c3")]: "rollout of commit-b: waits for its turn in wave ring-b (maxUnavailable 1)",
      [key("c4")]: "rollout of commit-b waits for its wave, remaining",
    });
    // c3's file breaks meanwhile: its change waits, saying why.
    const broken = step(hub, POLICY, (c) => (c === "c3" ? null : "1.22"), "commit-c", t + 30);
    expect(broken.waiting.get(key("c3"))).toBe(
      "rollout of commit-b: its file fails validation, so its change waits",
    );
  });

  it("a fix for an unhealthy CR goes out in its own place, spending none of the budget", () => {
    const policy = {
      ...POLICY,
      waves: [
        (POLICY.waves as unknown[])[0],
        {
          name: "ring-b",
          maxUnavailable: 2,
          clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }],
        },
      ],
    };
    const { hub, end } = installed(policy);
    let t = end;
    for (; !hub.applied.includes(key("c2")); t += 30) {
      step(
        hub,
        policy,
        () => "1.22",
        "commit-b",
        t,
        (cr) => cr !== "c2-serving",
      );
    }
    expect(hub.version("c3-serving")).toBe("1.22");
    hub.applied = [];
    const fix = (c: string) => (c === "c1" ? "1.22" : "1.23");
    step(hub, policy, fix, "commit-fix", t);
    expect(hub.applied).toEqual([key("c2"), key("c3")]);
  });
});

describe("waves", () => {
  it("each opens once, saying how many CRs it changes", () => {
    const { hub, end } = installed();
    const { outcomes } = run(hub, POLICY, (c) => (c === "c3" ? "1.21" : "1.22"), "commit-b", end);
    expect(hub.state?.phase).toBe("Complete");
    const opened = outcomes.flatMap((o) => o.events).filter((e) => e.reason === "RolloutWaveOpened");
    expect(opened.map((e) => e.message)).toEqual([
      "rollout of commit-b in progress: wave canary is open (1 CR to change)",
      "rollout of commit-b in progress: wave ring-b is open (1 CR to change)",
      "rollout of commit-b in progress: wave remaining is open (1 CR to change)",
    ]);
  });

  it("an opened wave says so once, however many of its CRs go later", () => {
    const { hub, end } = installed();
    const { outcomes } = run(hub, POLICY, () => "1.22", "commit-b", end);
    const opened = outcomes.flatMap((o) => o.events).filter((e) => e.reason === "RolloutWaveOpened");
    expect(opened.map((e) => e.message)).toEqual([
      "rollout of commit-b in progress: wave canary is open (1 CR to change)",
      "rollout of commit-b in progress: wave ring-b is open (2 CRs to change)",
      "rollout of commit-b in progress: wave remaining is open (1 CR to change)",
    ]);
  });

  it("a rollout records only the waves that changed something", () => {
    const { hub, end } = installed();
    run(hub, POLICY, (c) => (c === "c4" ? "1.22" : "1.21"), "commit-b", end);
    expect(hub.state?.phase).toBe("Complete");
    expect(Object.keys(hub.state!.waves)).toEqual(["remaining"]);
  });

  it("a hub that lost the state records each wave done once its CRs soaked, none opened", () => {
    const { hub } = installed();
    const fresh = new FakeHub();
    for (const [k, object] of hub.objects) fresh.objects.set(k, object);
    const { outcomes } = run(fresh, POLICY, () => "1.21", "commit-a", 0);
    expect(fresh.state?.phase).toBe("Complete");
    expect(outcomes.flatMap((o) => o.steps).filter((s) => s.action === "update")).toEqual([]);
    const waves = fresh.state!.waves;
    expect(Object.keys(waves)).toEqual(["canary", "ring-b", "remaining"]);
    expect(Object.values(waves).map((w) => [w.opened, w.completed !== undefined])).toEqual([
      [undefined, true],
      [undefined, true],
      [undefined, true],
    ]);
  });

  it("a start-over with the state still on the hub keeps each CR's revert target", () => {
    const { hub, end } = installed();
    step(hub, POLICY, () => "1.22", "commit-b", end);
    // A start-over was chosen earlier: its mark stays on the hub beside the state written since, which
    // already knows the canary's baseline.
    hub.checks = { startedOver: true } as FakeHub["checks"];
    const outcome = step(hub, POLICY, () => "1.22", "commit-b", end + 30);
    expect(outcome.state.crs[key("c1")]?.baseline?.commit).toBe("commit-a");
  });

  it("a commit that changes the canary again un-completes the later waves", () => {
    const { hub, end } = installed();
    let t = end;
    for (; hub.state?.waveName !== "remaining"; t += 30) step(hub, POLICY, () => "1.22", "commit-b", t);
    expect(hub.state?.waves["ring-b"]?.completed).toBeDefined();
    step(hub, POLICY, () => "1.23", "commit-c", t);
    expect(hub.state?.waveName).toBe("canary");
    expect(hub.state?.waves["ring-b"]?.opened).toBeDefined();
    expect(hub.state?.waves["ring-b"]?.completed).toBeUndefined();
  });
});

describe("deletions with allAtOnce", () => {
  const spec = fleetModel([], { ...POLICY, allAtOnce: true }, () => "1.21").rollout.policy!.rollout.spec;
  const hubCrs = [live("a", "c1"), live("d", "c4")];

  it("go at once in every wave", () => {
    const decided = gatePrunes(spec, INVENTORY, false, [candidate("a"), candidate("d")], hubCrs);
    expect(decided).toEqual([candidate("a"), candidate("d")]);
  });

  it("wait while paused", () => {
    const decided = gatePrunes(spec, INVENTORY, true, [candidate("a"), candidate("d")], hubCrs);
    expect(decided.map((c) => c.waiting)).toEqual(["the rollout is paused", "the rollout is paused"]);
  });
});
