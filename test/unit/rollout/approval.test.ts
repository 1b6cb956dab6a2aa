import { describe, expect, it } from "vitest";
import { buildFleetModel, type FleetModel } from "../../../src/fleet/model.ts";
import type { GateOutcome } from "../../../src/rollout/gate.ts";
import { approvalVerdict } from "../../../src/rollout/state.ts";
import { approvalText } from "../../support/fleet-files.ts";
import { cluster, FakeHub, fleetFiles } from "./support.ts";

// Approvals held in Git and per-cluster maintenance windows, through the real fleet model (the approval is a
// fleet file) and the gate, on a hub that holds CRs as the API server does.

const CLUSTERS = ["c1", "c2", "c3", "c4"];
const INVENTORY = [
  cluster("c1"),
  cluster("c2", { ring: "b", night: "late" }, { "example.com/time-zone": "Asia/Tokyo" }),
  cluster("c3", { ring: "b" }),
  cluster("c4"),
];
const POLICY = {
  waves: [
    { name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] },
    {
      name: "ring-b",
      approval: "Required",
      clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }],
    },
  ],
  soak: "1m",
  timeLimit: "5m",
};
// 10:00 UTC on Monday 2 March 2026.
const T0 = Date.parse("2026-03-02T10:00:00Z");
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const COMMIT_A = "a".repeat(40);
const COMMIT_B = "b".repeat(40);
const COMMIT_C = "c".repeat(40);
const COMMIT_D = "d".repeat(40);
const TUNED = { version: "1.22", "high-availability": { replicas: 2 } };
const key = (c: string) => `KnativeServing knative-fleet/${c}-serving`;

function model(
  version: string | Record<string, unknown>,
  approvals: [commit: string, wave: string][] = [],
  policy: Record<string, unknown> = POLICY,
): FleetModel {
  const files = fleetFiles(CLUSTERS, policy, () => version);
  approvals.forEach(([commit, wave], index) => {
    files.push({ path: `clusters/approvals/${index}.yaml`, text: approvalText(commit, wave) });
  });
  return buildFleetModel(files, { defaultNamespace: "knative-fleet" });
}

/** Syncs every 30 s for `seconds`, every applied CR healthy by the next sync; what was applied, when. */
function run(hub: FakeHub, fleet: FleetModel, commit: string, from: number, seconds: number) {
  const applied: [string, number][] = [];
  let outcome: GateOutcome | undefined;
  for (let t = from; t < from + seconds; t += 30) {
    hub.applied = [];
    outcome = hub.sync(fleet, commit, at(t), INVENTORY);
    for (const applied1 of hub.applied) {
      const cr = applied1.split("/")[1]!;
      applied.push([cr.replace("-serving", ""), t - from]);
      hub.report(cr, true);
    }
  }
  return { applied, outcome: outcome! };
}

function installed(policy: Record<string, unknown> = POLICY, from = 0): FakeHub {
  const hub = new FakeHub();
  run(hub, model("1.21", [[COMMIT_A, "ring-b"]], policy), COMMIT_A, from, 600);
  expect(hub.state?.phase).toBe("Complete");
  return hub;
}

describe("approvals held in Git", () => {
  it("a wave that needs one waits after the canary, says for which commit, and opens once it is in Git", () => {
    const hub = installed();
    const held = run(hub, model("1.22"), COMMIT_B, 1000, 600);
    expect(held.applied).toEqual([["c1", 0]]);
    expect(held.outcome.awaitingApproval).toEqual({ wave: "ring-b", commit: COMMIT_B });
    expect(held.outcome.waiting.get(key("c2"))).toBe(approvalVerdict({ commit: COMMIT_B, wave: "ring-b" }));
    expect(held.outcome.waiting.get(key("c2"))).toContain(`--wave ring-b --commit ${COMMIT_B}`);
    expect(held.outcome.waiting.get(key("c4"))).toBe("rollout of bbbbbbbbbbbb waits for its wave, remaining");

    // An approval of another commit, and one of this commit for another wave, open nothing.
    const wrong = run(
      hub,
      model("1.22", [
        [COMMIT_A, "ring-b"],
        [COMMIT_B, "canary"],
      ]),
      COMMIT_C,
      2000,
      300,
    );
    expect(wrong.applied).toEqual([]);
    expect(wrong.outcome.awaitingApproval).toEqual({ wave: "ring-b", commit: COMMIT_B });

    // The approval commit changes no CR: the rollout keeps its commit, and the wave opens.
    const approved = run(hub, model("1.22", [[COMMIT_B, "ring-b"]]), COMMIT_C, 3000, 600);
    expect(approved.applied.map(([c]) => c)).toEqual(["c2", "c3", "c4"]);
    expect(hub.state).toMatchObject({ phase: "Complete", commit: COMMIT_B });
    expect(approved.outcome.awaitingApproval).toBeUndefined();
  });

  it("content a later commit brings to an approved wave waits for an approval of that commit", () => {
    const hub = installed();
    run(hub, model("1.22", [[COMMIT_B, "ring-b"]]), COMMIT_B, 1000, 120);
    expect(hub.version("c2-serving")).toBe("1.22");
    expect(hub.version("c3-serving")).toBe("1.21");
    // A setting pushed while ring-b is open: the rollout is now the one of COMMIT_C, which nobody approved.
    const later = run(hub, model(TUNED, [[COMMIT_B, "ring-b"]]), COMMIT_C, 1120, 600);
    expect(later.applied).toEqual([["c1", 0]]);
    expect(later.outcome.awaitingApproval).toEqual({ wave: "ring-b", commit: COMMIT_C });
    const approved = run(hub, model(TUNED, [[COMMIT_C, "ring-b"]]), COMMIT_D, 2000, 600);
    expect(approved.applied.map(([c]) => c).sort()).toEqual(["c2", "c3", "c4"]);
  });

  it("allAtOnce, the emergency path, needs no approval", () => {
    const hub = installed();
    const outcome = hub.sync(
      model("1.22", [], { ...POLICY, allAtOnce: true }),
      COMMIT_B,
      at(1000),
      INVENTORY,
    );
    expect(outcome.steps.map((s) => s.action)).toEqual(["update", "update", "update", "update"]);
    expect(outcome.awaitingApproval).toBeUndefined();
  });

  it("an approval that fails validation approves nothing, holds no other file and is an error at its line", () => {
    const files = fleetFiles(CLUSTERS, POLICY, () => "1.22");
    files.push({
      path: "clusters/approvals/short.yaml",
      text: approvalText(COMMIT_B.slice(0, 12), "ring-b"),
    });
    files.push({
      path: "clusters/approvals/typo.yaml",
      text: approvalText(COMMIT_B, "ring-b").replace("KnativeRolloutApproval", "KnativeRolloutAproval"),
    });
    const fleet = buildFleetModel(files, { defaultNamespace: "knative-fleet" });
    expect(fleet.approvals).toEqual([]);
    expect(fleet.rollout.policy).toBeDefined();
    expect(fleet.resources).toHaveLength(4);
    expect(fleet.diagnostics.map((d) => [d.path, d.line, d.field, d.message])).toEqual([
      [
        "clusters/approvals/short.yaml",
        6,
        "spec.commit",
        "must be a whole commit id (40 or 64 lowercase hex digits), as the rollout's status names it",
      ],
      [
        "clusters/approvals/typo.yaml",
        2,
        "kind",
        '"KnativeRolloutAproval" is not a kind; did you mean KnativeRolloutApproval? It approves nothing until it validates',
      ],
    ]);
  });
});

describe("per-cluster maintenance windows", () => {
  // 16:00 UTC is 01:00 in Tokyo, inside c2's window; a day later 10:00 UTC (19:00 there) is outside.
  const NIGHT = 6 * 3600;
  const DAY = 24 * 3600;
  // ring-b's night clusters change only 01:00-05:00 in their own time zone (c2: Tokyo, where 10:00 UTC is
  // 19:00); c3 has no window.
  const WINDOWED = {
    ...POLICY,
    waves: [POLICY.waves[0], { ...POLICY.waves[1], approval: "None" }],
    clusterWindows: [
      {
        name: "nights",
        clusterSelectorTerms: [{ labelSelector: { matchLabels: { night: "late" } } }],
        windows: [{ start: "01:00", end: "05:00" }],
        timeZoneProperty: "example.com/time-zone",
      },
    ],
  };

  it("a cluster outside its window waits in its wave, spending none of its budget; the next wave waits for it", () => {
    const hub = installed(WINDOWED, NIGHT);
    const { applied, outcome } = run(hub, model("1.22", [], WINDOWED), COMMIT_B, DAY, 1800);
    // c3 goes in ring-b's first turn (maxUnavailable 1): c2, outside its window, does not take the turn.
    expect(applied).toEqual([
      ["c1", 0],
      ["c3", 90],
    ]);
    expect(outcome.waiting.get(key("c2"))).toBe(
      "rollout of bbbbbbbbbbbb: fleet-system/c2 is outside its maintenance windows nights (daily 01:00-05:00 Asia/Tokyo)",
    );
    expect(hub.version("c4-serving")).toBe("1.21");
    // 16:00 UTC is 01:00 in Tokyo: c2 goes, then the remaining wave.
    const later = run(hub, model("1.22", [], WINDOWED), COMMIT_B, DAY + NIGHT, 600);
    expect(later.applied.map(([c]) => c)).toEqual(["c2", "c4"]);
    expect(hub.state?.phase).toBe("Complete");
  });

  it("a time zone property that names no time zone reads as closed, saying so", () => {
    const inventory = INVENTORY.map((c) =>
      c.name === "c2"
        ? cluster("c2", { ring: "b", night: "late" }, { "example.com/time-zone": "Mars/Olympus" })
        : c,
    );
    const hub = installed(WINDOWED, NIGHT);
    const fleet = model("1.22", [], WINDOWED);
    let outcome: GateOutcome | undefined;
    for (let t = DAY + NIGHT; t < DAY + NIGHT + 3600; t += 30) {
      hub.applied = [];
      outcome = hub.sync(fleet, COMMIT_B, at(t), inventory);
      for (const applied of hub.applied) hub.report(applied.split("/")[1]!, true);
    }
    expect(hub.version("c2-serving")).toBe("1.21");
    expect(outcome?.waiting.get(key("c2"))).toContain(
      'its time zone property example.com/time-zone is "Mars/Olympus", no IANA time zone',
    );
  });

  it("allAtOnce changes a cluster outside its window", () => {
    const hub = installed(WINDOWED, NIGHT);
    const outcome = hub.sync(
      model("1.22", [], { ...WINDOWED, allAtOnce: true }),
      COMMIT_B,
      at(DAY),
      INVENTORY,
    );
    expect(outcome.steps.map((s) => s.action)).toEqual(["update", "update", "update", "update"]);
  });
});
