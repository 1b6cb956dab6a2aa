import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  openState,
  ROLLOUT_STATE_MAC_KEY,
  ROLLOUT_STATE_PREVIOUS_KEY,
  type RolloutState,
  RolloutStateSchema,
  sealState,
  stateBinding,
} from "../../../src/rollout/state.ts";
import { REPOSITORY } from "./support.ts";

// The seal covers the chain: each state's HMAC includes the HMAC of the state it replaced, so an older state
// cannot be made to look like the successor of the last one recorded by rewriting its `previous`.

const key = randomBytes(32);
const binding = stateBinding("knative-fleet", REPOSITORY);
const state = (commit: string): RolloutState => ({
  schema: 2,
  phase: "Progressing",
  commit,
  startedAt: "2026-03-02T15:00:00.000Z",
  waves: {},
  crs: {},
});

/** Three states stored one after the other; the key Secret records the last one's HMAC. */
function chain() {
  const first = sealState(state("c-1"), key, binding, "");
  const second = sealState(state("c-2"), key, binding, first[ROLLOUT_STATE_MAC_KEY]!);
  const third = sealState(state("c-3"), key, binding, second[ROLLOUT_STATE_MAC_KEY]!);
  return { first, second, third, last: third[ROLLOUT_STATE_MAC_KEY]! };
}

describe("the rollout state's seal", () => {
  it("accepts the last state recorded, and the one stored right after it", () => {
    const { second, third } = chain();
    expect(openState(third, key, binding, third[ROLLOUT_STATE_MAC_KEY])).toMatchObject({ kind: "valid" });
    expect(openState(third, key, binding, second[ROLLOUT_STATE_MAC_KEY])).toMatchObject({ kind: "valid" });
  });

  it("refuses an older state put back with `previous` rewritten to the last recorded HMAC", () => {
    const { first, second, last } = chain();
    for (const old of [first, second]) {
      const replay = { ...old, [ROLLOUT_STATE_PREVIOUS_KEY]: last };
      expect(openState(replay, key, binding, last)).toEqual({
        kind: "refused",
        reason: "its HMAC does not match: it was not written by this knative-fleet for this repository",
      });
    }
  });

  it("refuses an older state put back with `previous` removed", () => {
    const { first, last } = chain();
    const { [ROLLOUT_STATE_PREVIOUS_KEY]: _previous, ...replay } = first;
    expect(openState(replay, key, binding, last)).toMatchObject({ kind: "refused" });
  });

  it("refuses an older state put back as it was stored", () => {
    const { first, last } = chain();
    expect(openState(first, key, binding, last)).toMatchObject({
      kind: "refused",
      reason: expect.stringContaining("it is not the last state this knative-fleet stored"),
    });
  });
});

describe("the rollout state's versions", () => {
  // A baseline's version is put on a revert's CR (re-derived from Git, then hashed), and a chain's step on
  // every CR behind it: only a release version is taken from the stored state.
  const withVersion = (version: string) =>
    RolloutStateSchema.safeParse({
      ...state("c-1"),
      crs: { "KnativeServing knative-fleet/x": { baseline: { hash: "ab", commit: "c-1", version } } },
      upgrades: { "KnativeServing 1.23": version },
    }).success;

  it("takes x.y and x.y.z, and nothing else", () => {
    for (const version of ["1.21", "1.21.3", "1.2", "1000.1000.1000"])
      expect(withVersion(version), version).toBe(true);
    for (const version of [
      "v1.21",
      "1.21.0-rc.1",
      "x1.21",
      "1.21.",
      "12345.1",
      "1.12345",
      "1.2.34567",
      "1.21.3.4",
      "latest",
      "",
    ]) {
      expect(withVersion(version), version).toBe(false);
    }
  });
});
