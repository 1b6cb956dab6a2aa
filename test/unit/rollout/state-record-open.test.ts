import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  openState,
  ROLLOUT_STATE_MAC_KEY,
  ROLLOUT_STATE_PREVIOUS_KEY,
  type RolloutState,
  sealState,
  stateBinding,
} from "../../../src/rollout/state.ts";
import { macOf } from "./state-fleet.ts";
import { REPOSITORY } from "./support.ts";

// What openState makes of the data it finds in the state ConfigMap: none, a state of the release before the
// seal (JSON with a `revision` and no schema number, unsealed: the rollout starts over), or a refusal with the
// words an operator reads. Anything else that carries no seal, or a seal of the wrong size, is refused, never
// taken for an old state nor thrown.

const key = randomBytes(32);
const binding = stateBinding("knative-fleet", REPOSITORY);
const HMAC_REFUSAL = "its HMAC does not match: it was not written by this knative-fleet for this repository";
const NO_TEXT = { kind: "refused", reason: "it holds no state text" };
const UNSEALED = { kind: "none", legacy: "unsealed" };

const state: RolloutState = {
  schema: 2,
  phase: "Progressing",
  commit: "c1",
  startedAt: "2026-11-29T10:00:00.000Z",
  waves: {},
  crs: {},
};

describe("data with no state text", () => {
  it("is no state when it holds neither text nor HMAC", () => {
    expect(openState(undefined, key, binding, undefined)).toEqual({ kind: "none" });
    expect(openState({}, key, binding, undefined)).toEqual({ kind: "none" });
    expect(openState({ [ROLLOUT_STATE_PREVIOUS_KEY]: "" }, key, binding, undefined)).toEqual({
      kind: "none",
    });
  });

  it("is refused when it holds an HMAC, or a text that is no string", () => {
    const { state: _text, ...sealed } = sealState(state, key, binding, "");
    expect(openState(sealed, key, binding, undefined)).toEqual(NO_TEXT);
    expect(openState({ [ROLLOUT_STATE_MAC_KEY]: "ab" }, key, binding, undefined)).toEqual(NO_TEXT);
    expect(openState({ state: 5, mac: "ab" }, key, binding, undefined)).toEqual(NO_TEXT);
    expect(openState({ state: { schema: 2 } }, key, binding, undefined)).toEqual(NO_TEXT);
  });
});

describe("a state of the release before the seal", () => {
  const legacy = JSON.stringify({ revision: "abc", clusters: {} });

  it("is no state when unsealed: a JSON object with a revision and no schema number", () => {
    expect(openState({ state: legacy }, key, binding, undefined)).toEqual(UNSEALED);
    expect(openState({ state: legacy }, key, binding, "f".repeat(64))).toEqual(UNSEALED);
  });

  it("is refused when it carries an HMAC that does not match: a seal is always checked", () => {
    expect(openState({ state: legacy, mac: "0".repeat(64) }, key, binding, undefined)).toEqual({
      kind: "refused",
      reason: HMAC_REFUSAL,
    });
  });

  it("refuses an unsealed text with a schema number, with no revision, or that is no JSON object", () => {
    for (const text of [
      JSON.stringify({ schema: 1, revision: "abc" }),
      JSON.stringify(state),
      JSON.stringify({ clusters: {} }),
      JSON.stringify(["revision"]),
      "null",
      '"revision"',
      "{ not json",
      "",
    ]) {
      expect(openState({ state: text }, key, binding, undefined), text).toEqual({
        kind: "refused",
        reason: HMAC_REFUSAL,
      });
    }
  });

  it("refuses a sealed state with its HMAC taken off", () => {
    const { [ROLLOUT_STATE_MAC_KEY]: _mac, ...unsealed } = sealState(state, key, binding, "");
    expect(openState(unsealed, key, binding, undefined)).toEqual({ kind: "refused", reason: HMAC_REFUSAL });
  });
});

describe("an HMAC of the wrong size", () => {
  it("is refused, not thrown", () => {
    const data = sealState(state, key, binding, "");
    const mac = data[ROLLOUT_STATE_MAC_KEY]!;
    expect(openState(data, key, binding, undefined)).toMatchObject({ kind: "valid", mac });
    for (const wrong of [mac.slice(0, -1), `${mac}0`, "", mac.slice(0, 32), `${mac.slice(0, -2)}é`]) {
      expect(openState({ ...data, mac: wrong }, key, binding, undefined), wrong).toEqual({
        kind: "refused",
        reason: HMAC_REFUSAL,
      });
    }
  });

  it("a legacy state's HMAC computed as the seal computes it opens as a state this release cannot read", () => {
    const text = JSON.stringify({ revision: "abc" });
    const data = { state: text, previous: "", mac: macOf(key, binding, text, "") };
    expect(openState(data, key, binding, undefined)).toEqual({ kind: "none", legacy: "unreadable" });
  });
});
