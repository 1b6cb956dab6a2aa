import { describe, expect, it } from "vitest";
import {
  describeRollout,
  historyOf,
  type RolloutState,
  type RolloutView,
  rolloutVerdict,
  rolloutViewOf,
} from "../../../src/rollout/state.ts";

// What the stored state tells its readers: the completed waves in the order they were done (the gate's
// history), and the one sentence of each phase, whether or not the view knows the rollout's commit, its wave
// or its halt (a view read from a state, or from a report that lacks them).

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
/** The commit as a sentence names it: its first 12 characters. */
const NAME = "rollout of 0123456789ab";
const CONFIGMAP = "knative-fleet/knative-fleet-rollout";

const state = (waves: RolloutState["waves"]): RolloutState => ({
  schema: 2,
  phase: "Progressing",
  commit: COMMIT,
  startedAt: "2026-11-29T10:00:00.000Z",
  waves,
  crs: {},
});

describe("the completed waves of a rollout", () => {
  it("come in the order they were done, whatever order the state holds them in, with when each opened", () => {
    const waves = {
      remaining: { opened: "2026-11-29T12:00:00.000Z", completed: "2026-11-29T13:00:00.000Z" },
      open: { opened: "2026-11-29T13:00:00.000Z" },
      canary: { opened: "2026-11-29T10:00:00.000Z", completed: "2026-11-29T11:00:00.000Z" },
      early: { completed: "2026-11-29T12:00:00.000Z" },
      next: {},
    };
    expect(historyOf(state(waves))).toEqual([
      { wave: "canary", opened: "2026-11-29T10:00:00.000Z", completed: "2026-11-29T11:00:00.000Z" },
      { wave: "early", completed: "2026-11-29T12:00:00.000Z" },
      { wave: "remaining", opened: "2026-11-29T12:00:00.000Z", completed: "2026-11-29T13:00:00.000Z" },
    ]);
    expect(historyOf(state({ open: {} }))).toEqual([]);
  });
});

describe("the verdict's sentence", () => {
  const halt = {
    wave: "canary",
    resource: "KnativeServing knative-serving/c1",
    cluster: "fleet-system/c1",
    reason: "Ready=False: webhook unavailable",
  };
  const says = (view: RolloutView) => rolloutVerdict(view).message;

  it("names the rollout by its commit, or as `the rollout` when the view has none", () => {
    expect(says({ phase: "Complete", commit: COMMIT })).toBe(`${NAME} has reached every wave`);
    expect(says({ phase: "Complete" })).toBe("the rollout has reached every wave");
    expect(says({ phase: "Complete", commit: "" })).toBe("the rollout has reached every wave");
  });

  it("says a halt as far as it is known, and what lifts it", () => {
    expect(says({ phase: "Halted", commit: COMMIT })).toBe(`${NAME} halted`);
    expect(says({ phase: "Halted" })).toBe("the rollout halted");
    expect(says({ phase: "Halted", commit: COMMIT, halt })).toBe(
      `${NAME} halted in wave canary: KnativeServing knative-serving/c1 on fleet-system/c1: ` +
        "Ready=False: webhook unavailable; a commit that changes KnativeServing knative-serving/c1 " +
        "(a fix, or a revert of the change) lifts the halt",
    );
  });

  it("says a rollout in progress, with its wave when known", () => {
    expect(says({ phase: "Progressing", commit: COMMIT })).toBe(`${NAME} in progress`);
    expect(says({ phase: "Progressing" })).toBe("the rollout in progress");
    expect(says({ phase: "Progressing", commit: COMMIT, wave: "canary", opened: false })).toBe(
      `${NAME} in progress: wave canary waits to open`,
    );
    expect(says({ phase: "Progressing", commit: COMMIT, wave: "canary" })).toBe(
      `${NAME} in progress: wave canary is open`,
    );
  });

  it("says a refused state: how to start it over when the ConfigMap is known, else that every change waits", () => {
    expect(says({ phase: "Refused" })).toBe("the rollout state is refused; every change waits");
    expect(says({ phase: "Refused", message: "the key is refused" })).toBe("the key is refused");
    expect(
      says({ phase: "Refused", refused: { configMap: CONFIGMAP, reason: "its HMAC does not match" } }),
    ).toBe(
      `the rollout state ConfigMap ${CONFIGMAP} is refused: its HMAC does not match. Every change waits; ` +
        "annotate it fleet.knative.dev/rollout-start-over=<why> (create it first if it is missing) to start " +
        "the rollout state over",
    );
  });

  it("says that every change waits while no state decides, in the view's words when it has them", () => {
    for (const phase of ["Invalid", "Waiting"] as const) {
      expect(says({ phase })).toBe("every change waits");
      expect(says({ phase, message: "the fleet policy is invalid" })).toBe("the fleet policy is invalid");
      expect(rolloutVerdict({ phase })).toEqual({ phase, message: "every change waits" });
    }
    expect(describeRollout({ phase: "Waiting", paused: true })).toBe(
      "Rollout: every change waits; the rollout is paused",
    );
  });

  it("reads a stored halted state as the halt it holds", () => {
    const halted: RolloutState = {
      ...state({ canary: { opened: "2026-11-29T10:00:00.000Z" } }),
      phase: "Halted",
      waveName: "canary",
      halt: { ...halt, waveIndex: 0, hash: "ab", commit: COMMIT, at: "2026-11-29T10:05:00.000Z" },
    };
    expect(describeRollout(rolloutViewOf(halted))).toBe(
      `Rollout: ${NAME} halted in wave canary: KnativeServing knative-serving/c1 on fleet-system/c1: ` +
        "Ready=False: webhook unavailable; a commit that changes KnativeServing knative-serving/c1 " +
        "(a fix, or a revert of the change) lifts the halt",
    );
  });
});
