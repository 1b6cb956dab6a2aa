import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  openState,
  peekRolloutState,
  type RolloutState,
  sealState,
  stateBinding,
} from "../../../src/rollout/state.ts";
import { REPOSITORY } from "./support.ts";

// A state whose HMAC checks out is still read through its schema: a field written wrong (by a release that
// wrote another form, or by a bug) makes the state unreadable, and an unreadable state decides nothing (the
// rollout starts over, safely). These are the schema's edges: what it takes, and the nearest it refuses.

const key = randomBytes(32);
const binding = stateBinding("knative-fleet", REPOSITORY);
const CR = "KnativeServing knative-serving/prod-1";
const HASH = "0123456789abcdef".repeat(4);
const COMMIT = "4f2a9c0d1e3b5a7c9e1f3a5b7c9d1e3f5a7b9c1d";
const AT = "2026-11-30T10:00:00.000Z";

/** A halted rollout whose one CR has every field set; `change` edits it before it is sealed. */
function sealedWith(change: (state: RolloutState) => unknown) {
  const state: RolloutState = {
    schema: 2,
    phase: "Halted",
    commit: COMMIT,
    startedAt: AT,
    waves: { canary: { opened: AT } },
    halt: {
      wave: "canary",
      waveIndex: 0,
      resource: CR,
      cluster: "prod-1",
      hash: HASH,
      commit: COMMIT,
      reason: "NotReady",
      at: AT,
    },
    crs: {
      [CR]: {
        target: { hash: HASH, commit: COMMIT, version: "1.22" },
        cluster: { namespace: "fleet", name: "prod-1" },
        baseline: { hash: HASH, commit: COMMIT },
        released: { hash: HASH, at: AT },
        health: { hash: HASH, healthy: false, since: AT },
        revertFailed: HASH,
      },
    },
    upgrades: { "KnativeServing 1.23": "1.22" },
  };
  change(state);
  return sealState(state, key, binding, "");
}

const cr = (state: RolloutState) => state.crs[CR]!;

/** Whether the sealed state is read (and obeyed), by the reconciler and by `knative-fleet status` alike. */
function isRead(data: Record<string, string>): boolean {
  const opened = openState(data, key, binding, undefined);
  const peeked = peekRolloutState(data);
  expect(peeked !== undefined).toBe(opened.kind === "valid");
  if (opened.kind !== "valid") expect(opened).toEqual({ kind: "none", legacy: "unreadable" });
  return opened.kind === "valid";
}

/** Whether the state is read once `edit` has changed it (edits assign with Object.assign). */
const readWith = (edit: (state: RolloutState) => unknown) => isRead(sealedWith(edit));

describe("the rollout state's schema, behind a valid HMAC", () => {
  it("reads the state with every field set", () => {
    expect(readWith(() => {})).toBe(true);
  });

  it.each([
    ["one digit", "a"],
    ["64 digits (a whole sha256)", HASH],
  ])("takes a digest of %s", (_, hash) => {
    expect(readWith((s) => Object.assign(cr(s).target!, { hash }))).toBe(true);
  });

  it.each([
    ["a prefix that is no digit", `x${HASH.slice(1)}`],
    ["a suffix that is no digit", `${HASH.slice(1)}x`],
    ["upper case", HASH.toUpperCase()],
    ["65 digits", `${HASH}0`],
    ["nothing", ""],
  ])("refuses a digest with %s, wherever it is written", (_, hash) => {
    expect(readWith((s) => Object.assign(cr(s).target!, { hash }))).toBe(false);
    expect(readWith((s) => Object.assign(cr(s).released!, { hash }))).toBe(false);
    expect(readWith((s) => Object.assign(s.halt!, { hash }))).toBe(false);
    expect(readWith((s) => Object.assign(cr(s), { revertFailed: hash }))).toBe(false);
  });

  it.each([
    ["none (a hub CR that carried none)", ""],
    ["a tag's characters", "v1.22.0_rc-1"],
    ["64 characters", "a".repeat(64)],
  ])("takes a commit of %s", (_, commit) => {
    expect(readWith((s) => Object.assign(s, { commit }))).toBe(true);
  });

  it.each([
    ["a slash first", "/abc"],
    ["a slash last", "abc/"],
    ["a line end", "abc\ndef"],
    ["65 characters", "a".repeat(65)],
  ])("refuses a commit with %s", (_, commit) => {
    expect(readWith((s) => Object.assign(s, { commit }))).toBe(false);
    expect(readWith((s) => Object.assign(cr(s).baseline!, { commit }))).toBe(false);
  });

  it.each(["1.22", "10.3", "1.22.10", "1234.5678.9012"])("takes the version %s", (version) => {
    expect(readWith((s) => Object.assign(cr(s).target!, { version }))).toBe(true);
    expect(readWith((s) => Object.assign(s, { upgrades: { "KnativeServing 1.23": version } }))).toBe(true);
  });

  it.each(["v1.22", "1.22-rc", "1.22.x", "1", "1.22.3.4", "12345.1", "1.12345"])(
    "refuses the version %s",
    (version) => {
      expect(readWith((s) => Object.assign(cr(s).target!, { version }))).toBe(false);
      expect(readWith((s) => Object.assign(s, { upgrades: { "KnativeServing 1.23": version } }))).toBe(false);
    },
  );

  it("takes a cluster's namespace and name at their most (63 and 253), refuses one more", () => {
    const at = (namespace: number, name: number) =>
      readWith((s) =>
        Object.assign(cr(s), { cluster: { namespace: "n".repeat(namespace), name: "c".repeat(name) } }),
      );
    expect([at(63, 253), at(64, 253), at(63, 254)]).toEqual([true, false, false]);
  });

  it("takes an upgrade chain's name up to 64 characters", () => {
    const chain = (length: number) =>
      readWith((s) => Object.assign(s, { upgrades: { ["K".repeat(length)]: "1.22" } }));
    expect([chain(1), chain(64), chain(65)]).toEqual([true, true, false]);
  });

  it("takes a halt in any wave but before the first", () => {
    const halted = (waveIndex: number) => readWith((s) => Object.assign(s.halt!, { waveIndex }));
    expect([halted(0), halted(3), halted(-1), halted(1.5)]).toEqual([true, true, false, false]);
  });

  it.each(["Progressing", "Complete", "Halted"])("takes the phase %s, and no other", (phase) => {
    expect(readWith((s) => Object.assign(s, { phase }))).toBe(true);
    expect(readWith((s) => Object.assign(s, { phase: phase.toLowerCase() }))).toBe(false);
    expect(readWith((s) => Object.assign(s, { phase: "" }))).toBe(false);
  });

  it("refuses a field it does not know, in the state, a CR's record or its parts", () => {
    const unknown = (part: (s: RolloutState) => object) =>
      readWith((s) => Object.assign(part(s), { extra: "x" }));
    expect([
      unknown((s) => s),
      unknown((s) => cr(s)),
      unknown((s) => cr(s).target!),
      unknown((s) => cr(s).cluster!),
      unknown((s) => cr(s).released!),
      unknown((s) => cr(s).health!),
      unknown((s) => s.halt!),
      unknown((s) => s.waves.canary!),
    ]).toEqual([false, false, false, false, false, false, false, false]);
  });
});
