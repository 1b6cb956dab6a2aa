import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  CONFIGMAP_DATA_LIMIT,
  openState,
  ROLLOUT_STATE_CONFIGMAP,
  type RolloutState,
  sealedBytes,
  sealState,
  stateBinding,
  stateText,
} from "../../../src/rollout/state.ts";
import { SealedStateStore } from "../../../src/rollout/state-store.ts";
import { midRolloutState, sealedByPreviousRelease } from "./state-fleet.ts";
import { hubWithKnativeKinds, REPOSITORY } from "./support.ts";

// Issue #44: the rollout state, one ConfigMap, must hold 5,000 CRs with room. Measured here as data: the
// bytes of what the store writes to the ConfigMap (its data's keys and values), for states of every CR
// mid-rollout with every optional field set (state-fleet.ts), as the previous release stored them (the
// state's JSON) and as they are stored now. `console.log` prints the figures docs/scale.md quotes.

const key = randomBytes(32);
const binding = stateBinding("knative-fleet", REPOSITORY);
/** Every state follows another: its data names that one's HMAC. */
const PREVIOUS = "f".repeat(64);
/** The room 5,000 CRs must leave: a quarter of the ConfigMap. */
const ROOM = 0.25;

interface Measure {
  crs: number;
  before: number;
  after: number;
  sealMs: number;
  openMs: number;
}

function measure(state: RolloutState): Measure {
  const crs = Object.keys(state.crs).length;
  const before = sealedBytes(sealedByPreviousRelease(state, key, binding, PREVIOUS));
  let started = performance.now();
  const data = sealState(state, key, binding, PREVIOUS);
  const sealMs = performance.now() - started;
  started = performance.now();
  const opened = openState(data, key, binding, PREVIOUS);
  const openMs = performance.now() - started;
  // What is stored reads back as the same state, so storing it again is a no-op.
  expect(opened).toMatchObject({ kind: "valid", text: stateText(state) });
  return { crs, before, after: sealedBytes(data), sealMs, openMs };
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(0)} KiB`;
const row = (m: Measure) =>
  `${m.crs} CRs: before ${m.before} B (${kib(m.before)}, ${(m.before / m.crs).toFixed(0)} B a CR, ` +
  `${((100 * m.before) / CONFIGMAP_DATA_LIMIT).toFixed(0)}% of 1 MiB); after ${m.after} B (${kib(m.after)}, ` +
  `${(m.after / m.crs).toFixed(1)} B a CR, ${((100 * m.after) / CONFIGMAP_DATA_LIMIT).toFixed(1)}% of 1 MiB); ` +
  `seal ${m.sealMs.toFixed(0)} ms, open ${m.openMs.toFixed(0)} ms`;

describe("the rollout state's size (issue #44)", () => {
  const sizes = [1, 100, 1_000, 2_000, 5_000];

  it("holds 5,000 CRs mid-rollout (sha256 digests) in one ConfigMap with a quarter of it to spare", () => {
    const measured = sizes.map((n) => measure(midRolloutState(n)));
    for (const m of measured) console.log(`sha256 digests, ${row(m)}`);
    const at = (n: number) => measured.find((m) => m.crs === n)!;
    // Before: the state's JSON, ~870 bytes a CR, passed 1 MiB between 1,000 and 2,000 CRs.
    expect(at(1_000).before / 1_000).toBeGreaterThan(850);
    expect(at(2_000).before).toBeGreaterThan(CONFIGMAP_DATA_LIMIT);
    // After: 5,000 CRs take under three quarters of the ConfigMap.
    expect(at(5_000).after).toBeLessThanOrEqual((1 - ROOM) * CONFIGMAP_DATA_LIMIT);
    // A CR takes a bounded share, whatever the fleet's size: the state grows in a straight line.
    for (const n of [1_000, 2_000, 5_000]) expect(at(n).after / n).toBeLessThan(145);
    expect(at(5_000).after / 5_000).toBeLessThanOrEqual((at(1_000).after / 1_000) * 1.02);
    const fit = Math.floor((CONFIGMAP_DATA_LIMIT - at(1_000).after) / (at(5_000).after / 5_000)) + 1_000;
    console.log(`1 MiB holds about ${fit} CRs mid-rollout`);
  });

  it("with the mirror's digests (32 digits), 5,000 CRs take under half the ConfigMap", () => {
    const measured = [1_000, 2_000, 5_000].map((n) => measure(midRolloutState(n, { hashDigits: 32 })));
    for (const m of measured) console.log(`32-digit digests, ${row(m)}`);
    expect(measured.at(-1)!.after).toBeLessThan(CONFIGMAP_DATA_LIMIT / 2);
  });

  it("a small state is stored as it was: its JSON, readable as it is", () => {
    const state = midRolloutState(20);
    const data = sealState(state, key, binding, PREVIOUS);
    expect(data).toEqual(sealedByPreviousRelease(state, key, binding, PREVIOUS));
  });

  it("a state past the ConfigMap's limit is not written: the store says so, and the last state stays", async () => {
    const kube = hubWithKnativeKinds();
    const store = new SealedStateStore({
      hub: kube.client,
      namespace: "knative-fleet",
      keyNamespace: "knative-fleet",
      repository: REPOSITORY,
      events: new EventRecorder({ client: kube.client, component: "test", log: silentLogger }),
      log: silentLogger,
    });
    expect(await store.open(undefined)).toMatchObject({ kind: "ready", state: undefined });
    const small = midRolloutState(10);
    await store.store(small, stateText(small));
    const stored = structuredClone(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data);
    const huge = midRolloutState(10_000);
    await expect(store.store(huge, stateText(huge))).rejects.toThrow(
      /^the rollout state of 10000 CRs takes \d+ bytes sealed, more than the 1048576 a ConfigMap holds: it cannot be stored/,
    );
    expect(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data).toEqual(stored);
  });
});
