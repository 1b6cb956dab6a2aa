import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import type { FleetModel } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { mirroredObject } from "../../../src/mirror/decide.ts";
import type { GateOutcome, RevertRequest } from "../../../src/rollout/gate.ts";
import { revertStep, revertsFor, revertsOf } from "../../../src/rollout/revert.ts";
import type { Halt, RolloutState } from "../../../src/rollout/state.ts";
import { crObject } from "../../support/fleet-files.ts";
import { fleetModel, REPOSITORY } from "./support.ts";

// HaltAndRevert puts a CR back on the content of the last completed rollout, re-derived from Git at that
// commit. What people read of it: the Events (RolloutReverted, RolloutRevertFailed) with the commit as a
// sentence names it (12 characters), and a revert that cannot be made reported once when retrying will not
// help (a commit whose file is broken, or reads differently now) and again next sync when it might (Git
// could not be read).

const SOURCE = { repository: REPOSITORY, branch: "main" };
/** The baseline's commit, and what a message calls it. */
const A = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";
const A12 = "a1b2c3d4e5f6";
const B = "b0b1b2b3b4b5b6b7b8b9c0c1c2c3c4c5c6c7c8c9";
const B12 = "b0b1b2b3b4b5";

/** Commit A as Git gives it back: c1 and c2 at 1.21. */
const AT_A = fleetModel(["c1", "c2"], undefined, () => "1.21");
/** The digest the mirror wrote for `<cluster>-serving` from commit A: the baseline the state keeps. */
const hashAtA = (name: string): string => {
  const desired = AT_A.resources.find((r) => r.resource.metadata.name === name)!;
  return mirroredObject(desired, { ...SOURCE, commit: A }).metadata.annotations![DESIRED_HASH_ANNOTATION]!;
};

const request = (cluster: string, commit = A): RevertRequest => ({
  resource: { kind: "KnativeServing", namespace: "knative-fleet", name: `${cluster}-serving` },
  cluster: `fleet-system/${cluster}`,
  path: `clusters/${cluster}-serving.yaml`,
  to: { hash: hashAtA(`${cluster}-serving`), commit },
  live: crObject({ name: `${cluster}-serving`, cluster, version: "1.22" }) as KubeObject,
});

const keyOf = (cluster: string): string => `KnativeServing knative-fleet/${cluster}-serving`;

const HALT: Halt = {
  wave: "canary",
  waveIndex: 0,
  resource: "KnativeServing knative-fleet/c1-serving",
  cluster: "fleet-system/c1",
  hash: "cc",
  commit: B,
  reason: "DeploymentsAvailable=False",
  at: "2026-11-28T10:05:00Z",
};

function outcome(reverts: RevertRequest[], halt?: Halt): GateOutcome {
  const state: RolloutState = {
    schema: 2,
    phase: halt ? "Halted" : "Progressing",
    commit: B,
    startedAt: "2026-11-28T10:00:00Z",
    waves: {},
    ...(halt && { halt }),
    crs: Object.fromEntries(
      ["c1", "c2"].map((c) => [
        `KnativeServing knative-fleet/${c}-serving`,
        { baseline: { hash: hashAtA(`${c}-serving`), commit: A } },
      ]),
    ),
  };
  return { steps: [], reverts, state, waiting: new Map(), events: [] };
}

describe("a revert re-derived from its commit", () => {
  it("is the commit's CR as the mirror wrote it, saying where it goes back to", () => {
    const result = revertStep(request("c1"), AT_A, SOURCE);
    expect("step" in result).toBe(true);
    if (!("step" in result)) return;
    expect(result.step).toMatchObject({
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "c1-serving",
      path: "clusters/c1-serving.yaml",
      action: "update",
      reason: `reverted to ${A12}, the last completed rollout's content on fleet-system/c1`,
    });
    expect((result.step.object.spec as { version: string }).version).toBe("1.21");
    expect(result.step.object.metadata.annotations?.[DESIRED_HASH_ANNOTATION]).toBe(hashAtA("c1-serving"));
  });

  it("a commit whose file of the CR is broken declares no valid CR: a lasting failure", () => {
    // At this commit c1's file fails validation (spec.version is a number): it declares no CR to go back to.
    const broken = fleetModel(["c1", "c2"], undefined, (c) => (c === "c1" ? null : "1.21"));
    expect(broken.resources.map((r) => r.resource.metadata.name)).toEqual(["c2-serving"]);
    expect(revertStep(request("c1"), broken, SOURCE)).toEqual({
      failure: `commit ${A12} declares no valid KnativeServing knative-fleet/c1-serving`,
      lasting: true,
    });
  });

  it("a commit that gives the CR other content today is a lasting failure too", () => {
    const other = fleetModel(["c1", "c2"], undefined, () => "1.20");
    expect(revertStep(request("c1"), other, SOURCE)).toEqual({
      failure: `what commit ${A12} gives it today differs from what was healthy (the inventory changed what its placement selects or overrides)`,
      lasting: true,
    });
  });
});

describe("the Events of reverts", () => {
  const KEY1 = keyOf("c1");
  const KEY2 = keyOf("c2");

  it("a revert of a halted rollout names the wave that halted first, then the CR and its commit", () => {
    const { steps, events } = revertsOf(outcome([request("c1")], HALT), (r) => revertStep(r, AT_A, SOURCE));
    expect(steps.map((s) => [s.name, s.action])).toEqual([["c1-serving", "update"]]);
    expect(events).toEqual([
      {
        resource: request("c1").resource,
        type: "Warning",
        reason: "RolloutReverted",
        message: `halted in wave canary; ${KEY1} on fleet-system/c1 goes back to ${A12}, the content of the last completed rollout`,
      },
    ]);
  });

  it("without a halt the message starts with the CR", () => {
    const { events } = revertsOf(outcome([request("c1")]), (r) => revertStep(r, AT_A, SOURCE));
    expect(events.map((e) => e.message)).toEqual([
      `${KEY1} on fleet-system/c1 goes back to ${A12}, the content of the last completed rollout`,
    ]);
  });

  it("marks a lasting failure in the state (reported once), not one that retrying may fix", () => {
    const gate = outcome([request("c1"), request("c2")], HALT);
    const { steps, events } = revertsOf(gate, (r) =>
      r.resource.name === "c1-serving"
        ? { failure: "it is gone for good", lasting: true }
        : { failure: "Git is away", lasting: false },
    );
    expect(steps).toEqual([]);
    expect(gate.state.crs[KEY1]!.revertFailed).toBe(hashAtA("c1-serving"));
    expect(gate.state.crs[KEY2]).not.toHaveProperty("revertFailed");
    expect(events.map((e) => [e.reason, e.message])).toEqual([
      ["RolloutRevertFailed", `${KEY1} on fleet-system/c1 cannot go back to ${A12}: it is gone for good`],
      ["RolloutRevertFailed", `${KEY2} on fleet-system/c2 cannot go back to ${A12}: Git is away`],
    ]);
  });
});

describe("reverts read from Git", () => {
  it("reads each commit once, however many CRs go back to it", async () => {
    const asked: string[] = [];
    const modelAt = async (commit: string): Promise<FleetModel> => {
      asked.push(commit);
      return AT_A;
    };
    const { steps } = await revertsFor(outcome([request("c1"), request("c2")], HALT), modelAt, SOURCE);
    expect(asked).toEqual([A]);
    expect(steps.map((s) => s.name)).toEqual(["c1-serving", "c2-serving"]);
  });

  it("a commit Git cannot give back fails its reverts for this sync only, saying why", async () => {
    const gate = outcome([request("c1"), request("c2", B)], HALT);
    const { steps, events } = await revertsFor(
      gate,
      async (commit) => (commit === A ? AT_A : Promise.reject(new Error(`no commit ${commit}`))),
      SOURCE,
    );
    expect(steps.map((s) => s.name)).toEqual(["c1-serving"]);
    expect(events.map((e) => e.message)).toEqual([
      `halted in wave canary; ${keyOf("c1")} on fleet-system/c1 goes back to ${A12}, the content of the last completed rollout`,
      `${keyOf("c2")} on fleet-system/c2 cannot go back to ${B12}: commit ${B12} cannot be read (Error: no commit ${B})`,
    ]);
    // Not marked: the next sync tries again.
    expect(gate.state.crs[keyOf("c2")]).not.toHaveProperty("revertFailed");
  });

  it("a commit whose file is broken fails for good: marked, so it is reported once", async () => {
    const broken = fleetModel(["c1", "c2"], undefined, (c) => (c === "c1" ? null : "1.21"));
    const gate = outcome([request("c1")], HALT);
    const { steps, events } = await revertsFor(gate, async () => broken, SOURCE);
    expect(steps).toEqual([]);
    expect(events.map((e) => e.message)).toEqual([
      `${keyOf("c1")} on fleet-system/c1 cannot go back to ${A12}: commit ${A12} declares no valid ${keyOf("c1")}`,
    ]);
    expect(gate.state.crs[keyOf("c1")]!.revertFailed).toBe(hashAtA("c1-serving"));
  });
});
