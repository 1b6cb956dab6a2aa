import { afterEach, describe, expect, it, vi } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { type FleetFiles, ROLLOUT_PATH, type RolloutContent } from "../../soak/model.ts";
import { observedFleet, putRolloutState, SPOKE } from "./observed-fleet.ts";

// waves-within-max-unavailable, as the observer applies it: right after a hub CR gets new content, under a
// rollout policy that has settled (30 s), against the rollout state's baselines on the hub.

const T0 = 1_000_000;
const OTHER = "spoke-2";
const POLICY: RolloutContent = { canary: "spoke-9", maxUnavailable: 1, soak: "1m" };

/** Two CRs of the `remaining` wave (spoke-1's and spoke-2's), both declared, maxUnavailable 1. */
function waveFleet() {
  vi.useFakeTimers({ now: T0, toFake: ["Date"] });
  const observed = observedFleet();
  const { hub, fleet, observer, pushed, cr } = observed;
  const at = (ms: number) => vi.setSystemTime(T0 + ms);
  fleet.files = {
    ...fleet.files,
    rollout: POLICY,
    serving: new Map([...fleet.files.serving, [OTHER, pushed]]),
  };
  fleet.pushedContents.add(`serving-${OTHER}|${pushed.version}|${pushed.marker}`);
  /** The repository's history: `[at, policy, broken]` per revision. */
  const history = (...revisions: [number, RolloutContent | undefined, boolean?][]) => {
    fleet.revisions.length = 0;
    for (const [ms, rollout, broken] of revisions)
      fleet.revisions.push({
        commit: `c${ms}`,
        at: T0 + ms,
        message: "a push",
        kind: "rollout",
        files: {
          ...fleet.files,
          rollout,
          broken: new Map(broken ? [[ROLLOUT_PATH, "yaml-syntax"]] : []),
        } as FleetFiles,
      });
  };
  history([0, POLICY]);
  observer.declare(fleet, "after");
  const key = (spoke: string) => `KnativeServing ${fleet.layout.namespace}/serving-${spoke}`;
  /** The rollout state on the hub: spoke-1's CR has baseline b0; spoke-2's has no record. */
  const state = () =>
    putRolloutState(hub, fleet, T0, { [key(SPOKE)]: { baseline: { hash: "b0", commit: "c0" } } });
  state();
  /** A hub CR of `spoke` with desired hash `hash`, healthy or not. */
  const content = (spoke: string, hash: string, healthy: boolean, deleting = false): KubeObject => {
    const object = cr(pushed, healthy);
    return {
      ...object,
      metadata: {
        ...object.metadata,
        name: `serving-${spoke}`,
        annotations: { [DESIRED_HASH_ANNOTATION]: hash },
        ...(deleting ? { deletionTimestamp: new Date().toISOString() } : {}),
      },
      spec: { ...(object.spec as object), clusterProfileRef: { name: spoke } },
    };
  };
  const waves = () => observer.violations.filter((v) => v.invariant === "waves-within-max-unavailable");
  /** spoke-1's CR unhealthy on new content since 1 s; at 60 s spoke-2's CR gets new content. */
  const secondLetThrough = async (otherBefore?: KubeObject) => {
    at(1_000);
    await observed.hooks.onHubCr(fleet, "ADDED", content(SPOKE, "a1", false));
    if (otherBefore) await observed.hooks.onHubCr(fleet, "ADDED", otherBefore);
    at(60_000);
    await observed.hooks.onHubCr(fleet, "MODIFIED", content(OTHER, "a2", false));
    return waves();
  };
  return { ...observed, at, history, key, state, content, waves, secondLetThrough };
}

describe("the observer's wave check", () => {
  afterEach(() => vi.useRealTimers());

  it("catches a CR let through while another changed CR of its wave is unhealthy beyond maxUnavailable", async () => {
    const { observer, key, secondLetThrough } = waveFleet();
    const found = await secondLetThrough();
    expect(found.map((v) => v.evidence)).toEqual([
      `${key(OTHER)} got new content while 2 changed CRs of wave remaining were unhealthy (maxUnavailable 1): ${key(SPOKE)}, ${key(OTHER)}`,
    ]);
    // The first sighting, 1 s after the policy's push, was not checked: the policy had not settled.
    expect([observer.counts.waveChecks, observer.counts.waveChecksSkipped]).toEqual([1, 1]);
  });

  it("lets pass a CR that was already unavailable on changed content before (a fix going out in its place)", async () => {
    const { content, secondLetThrough } = waveFleet();
    expect(await secondLetThrough(content(OTHER, "a0", false))).toEqual([]);
  });

  it("still counts a CR let through that was healthy before", async () => {
    const { content, secondLetThrough } = waveFleet();
    expect(await secondLetThrough(content(OTHER, "a0", true))).toHaveLength(1);
  });

  it("counts a CR let through that was unhealthy on its baseline before, or is seen for the first time", async () => {
    const first = waveFleet();
    first.at(1_000);
    await first.hooks.onHubCr(first.fleet, "ADDED", first.content(OTHER, "a2", false));
    first.at(60_000);
    await first.hooks.onHubCr(first.fleet, "ADDED", first.content(SPOKE, "a1", false));
    expect(first.waves()).toHaveLength(1);
    vi.useRealTimers();
    const onBaseline = waveFleet();
    onBaseline.at(1_000);
    await onBaseline.hooks.onHubCr(onBaseline.fleet, "ADDED", onBaseline.content(SPOKE, "b0", false));
    await onBaseline.hooks.onHubCr(onBaseline.fleet, "ADDED", onBaseline.content(OTHER, "a2", false));
    onBaseline.at(60_000);
    await onBaseline.hooks.onHubCr(onBaseline.fleet, "MODIFIED", onBaseline.content(SPOKE, "a1", false));
    expect(onBaseline.waves()).toHaveLength(1);
  });

  it("judges maxUnavailable as a percentage of the CRs of the let-through CR's wave", async () => {
    const { fleet, history, secondLetThrough } = waveFleet();
    // 100% of the remaining wave's 2 CRs: both may be unavailable.
    const policy = { ...POLICY, maxUnavailable: "100%" };
    fleet.files = { ...fleet.files, rollout: policy };
    history([0, policy]);
    expect(await secondLetThrough()).toEqual([]);
  });

  it("lets pass a CR whose content is its baseline: it makes nothing unavailable", async () => {
    const { fleet, history, hooks, content, at, waves } = waveFleet();
    // maxUnavailable 0: any other unhealthy changed CR would be one too many.
    const policy = { ...POLICY, maxUnavailable: 0 };
    fleet.files = { ...fleet.files, rollout: policy };
    history([0, policy]);
    at(1_000);
    await hooks.onHubCr(fleet, "ADDED", content(OTHER, "a2", false));
    at(60_000);
    await hooks.onHubCr(fleet, "MODIFIED", content(SPOKE, "b0", false)); // back on its baseline
    expect(waves()).toEqual([]);
  });

  it("leaves out of the count a CR being deleted", async () => {
    const { fleet, hooks, content, at, waves } = waveFleet();
    at(1_000);
    await hooks.onHubCr(fleet, "ADDED", content(OTHER, "a2", false, true));
    at(60_000);
    await hooks.onHubCr(fleet, "MODIFIED", content(SPOKE, "a1", false));
    expect(waves()).toEqual([]);
  });

  it("does not count a CR that is no settled member of the fleet", async () => {
    const { fleet, observer, content, secondLetThrough } = waveFleet();
    // spoke-1's CR left the files for 10 s, 20 s before the check.
    vi.setSystemTime(T0 + 30_000);
    observer.declare(fleet, "after", {
      ...fleet.files,
      serving: new Map([[OTHER, fleet.files.serving.get(OTHER)!]]),
    });
    vi.setSystemTime(T0 + 40_000);
    observer.declare(fleet, "after");
    expect(await secondLetThrough(content(OTHER, "a0", true))).toEqual([]);
  });

  it("checks nothing once the soak stopped checking, nor without a rollout state on the hub", async () => {
    const stopped = waveFleet();
    stopped.observer.stopChecking();
    expect(await stopped.secondLetThrough()).toEqual([]);
    vi.useRealTimers();
    const stateless = waveFleet();
    // The ConfigMap without a state in it (none written yet).
    stateless.hub.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: stateless.fleet.layout.namespace },
      data: {},
    });
    expect(await stateless.secondLetThrough()).toEqual([]);
    expect([stateless.observer.counts.waveChecks, stateless.observer.counts.waveChecksSkipped]).toEqual([
      0, 2,
    ]);
  });

  it("skips until the policy has been the same, and its file valid, for 30 s", async () => {
    const cases: [number, RolloutContent | undefined, boolean?][][] = [
      [
        [0, { ...POLICY, maxUnavailable: 2 }],
        [40_000, POLICY],
      ], // pushed 20 s before
      [
        [0, { ...POLICY, maxUnavailable: 2 }],
        [30_000, POLICY],
      ], // pushed 30 s before, to the millisecond
      [
        [0, POLICY],
        [40_000, POLICY, true],
      ], // its file broken 20 s before
      [[0, POLICY, true]], // broken since long before
      [
        [0, POLICY],
        [40_000, { ...POLICY, maxUnavailable: 2 }],
        [50_000, POLICY],
      ], // changed and back
      [[40_000, POLICY]], // no revision older than 30 s
    ];
    for (const revisions of cases) {
      const { history, secondLetThrough } = waveFleet();
      history(...revisions);
      expect(await secondLetThrough(), JSON.stringify(revisions)).toEqual([]);
      vi.useRealTimers();
    }
    // Settled although pushed again within 30 s: the policy is the same.
    const { history, secondLetThrough } = waveFleet();
    history([0, { ...POLICY, maxUnavailable: 2 }], [10_000, POLICY], [40_000, POLICY]);
    expect(await secondLetThrough()).toHaveLength(1);
  });
});
