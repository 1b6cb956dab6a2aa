import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION, SOURCE_COMMIT_ANNOTATION } from "../../../src/api/labels.ts";
import type { ResourceIdentity } from "../../../src/fleet/identity.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { ApplyStep } from "../../../src/mirror/decide.ts";
import type { RolloutState } from "../../../src/rollout/state.ts";
import {
  contentOf,
  type GateInput,
  healthOf,
  inEpoch,
  isPending,
  isSafe,
  isUnavailable,
  weigh,
} from "../../../src/rollout/weigh.ts";
import { crObject } from "../../support/fleet-files.ts";
import { cluster, fleetModel } from "./support.ts";

// The weighing on hand-made hub CRs and steps: what a member is made of when the hub, Git and the stored
// state disagree, and what counts against maxUnavailable.

const CLUSTERS = ["c1", "c2", "c3"];
const INVENTORY = CLUSTERS.map((name) => cluster(name));
const canaryOn = (name: string) =>
  fleetModel(
    CLUSTERS,
    { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name }] }], soak: "1m" },
    () => "1.21",
  ).rollout.policy!.rollout.spec;
const SPEC = canaryOn("c1");
const NOW = new Date("2026-03-02T10:00:00Z");
const key = (name: string) => `KnativeServing knative-fleet/${name}-serving`;
const identity = (name: string): ResourceIdentity => ({
  kind: "KnativeServing",
  namespace: "knative-fleet",
  name: `${name}-serving`,
});
const OLD = "aaaa";
const NEW = "bbbb";

interface CrOptions {
  hash?: string;
  commit?: string;
  version?: string | null;
  healthy?: boolean;
  /** The ClusterProfile; null for a CR on the hub itself. */
  cluster?: string | null;
  deleting?: boolean;
}

/** A hub CR `<name>-serving` on cluster `<name>`, with the desired hash and health the test says. */
function hubCr(name: string, options: CrOptions = {}): KubeObject {
  const base = crObject({
    name: `${name}-serving`,
    cluster: options.cluster === undefined ? name : options.cluster,
    annotations: {
      ...(options.hash !== undefined && { [DESIRED_HASH_ANNOTATION]: options.hash }),
      ...(options.commit !== undefined && { [SOURCE_COMMIT_ANNOTATION]: options.commit }),
    },
  });
  const spec: Record<string, unknown> = { ...base.spec };
  if (options.version === null) delete spec.version;
  else if (options.version !== undefined) spec.version = options.version;
  const condition = (type: string) => ({
    type,
    status: options.healthy ? "True" : "False",
    ...(options.healthy ? {} : { reason: "NotReady", message: "waiting for deployments" }),
  });
  return {
    ...base,
    spec,
    metadata: {
      ...base.metadata,
      generation: 1,
      ...(options.deleting && { deletionTimestamp: "2026-03-02T09:00:00Z" }),
    },
    ...(options.healthy !== undefined && {
      status: { observedGeneration: 1, conditions: [condition("DeploymentsAvailable"), condition("Ready")] },
    }),
  };
}

const outcome = (name: string) => ({ ...identity(name), path: `clusters/${name}-serving.yaml` });
/** The mirror's write of `<name>-serving` with content `hash`. */
const writeStep = (name: string, hash: string, options: CrOptions = {}): ApplyStep => ({
  ...outcome(name),
  action: "update",
  object: hubCr(name, { ...options, hash }),
});
const unchangedStep = (name: string): ApplyStep => ({ ...outcome(name), action: "unchanged" });
const refusedStep = (name: string): ApplyStep => ({ ...outcome(name), action: "refused", error: "no" });

function input(overrides: Partial<GateInput> = {}): GateInput {
  return {
    spec: SPEC,
    hubPaused: false,
    commit: "b",
    clusters: INVENTORY,
    state: undefined,
    frozen: [],
    held: [],
    now: NOW,
    ...overrides,
  };
}

/** A stored state whose CRs completed a rollout on `OLD` at commit "a". */
function completedOn(names: readonly string[]): RolloutState {
  const content = { hash: OLD, commit: "a" };
  return {
    crs: Object.fromEntries(
      names.map((name) => [
        key(name),
        {
          target: content,
          baseline: content,
          cluster: { namespace: "fleet-system", name },
          health: { hash: OLD, healthy: true, since: "2026-03-01T00:00:00Z" },
        },
      ]),
    ),
  } as unknown as RolloutState;
}

const memberOf = (weighing: ReturnType<typeof weigh>, name: string) =>
  weighing.members.find((m) => m.key === key(name))!;

describe("a CR's health and content as the gate reads them", () => {
  it("a Ready CR is healthy with no reason given; one not Ready says why", () => {
    expect(healthOf(hubCr("c1", { hash: OLD, healthy: true }))).toEqual({ healthy: true, reason: "" });
    const sick = healthOf(hubCr("c1", { hash: OLD, healthy: false }));
    expect(sick.healthy).toBe(false);
    expect(sick.reason).toContain("waiting for deployments");
  });

  it("a CR with no annotations and no version records an empty digest and commit, and no version at all", () => {
    const content = contentOf(hubCr("c1", { version: null }));
    expect(content).toStrictEqual({ hash: "", commit: "" });
    expect(Object.keys(content)).not.toContain("version");
    expect(contentOf(hubCr("c1", { hash: OLD, commit: "a", version: "1.21" }))).toStrictEqual({
      hash: OLD,
      commit: "a",
      version: "1.21",
    });
  });
});

describe("the members of a sync, hand-made", () => {
  it("records a new CR's cluster, and a CR on the hub itself has none and comes after every wave", () => {
    const weighing = weigh(
      input(),
      [writeStep("c2", NEW), writeStep("hub", NEW, { cluster: null })],
      [hubCr("c2", { hash: OLD, healthy: true })],
    );
    expect(weighing.crs[key("c2")]!.cluster).toEqual({ namespace: "fleet-system", name: "c2" });
    const onHub = memberOf(weighing, "hub");
    expect([onHub.cluster, onHub.wave]).toEqual(["hub", SPEC.waves.length]);
    expect(weighing.crs[key("hub")]!.cluster).toBeUndefined();
    // No windows in the policy: no member is said to be outside one.
    for (const m of weighing.members) expect(Object.keys(m)).not.toContain("outsideWindow");
  });

  it("orders members by wave first, then by name, whatever order the steps come in", () => {
    const weighing = weigh(
      input({ spec: canaryOn("c3") }),
      [writeStep("c2", NEW), writeStep("c1", NEW), writeStep("c3", NEW)],
      [],
    );
    expect(weighing.members.map((m) => [m.key, m.wave])).toEqual([
      [key("c3"), 0],
      [key("c1"), 1],
      [key("c2"), 1],
    ]);
  });

  it("a failed file's CR on the hub is weighed without any stored state, at the content it has", () => {
    const weighing = weigh(
      input({ frozen: [identity("c2"), identity("c3")] }),
      [unchangedStep("c1")],
      [
        hubCr("c1", { hash: OLD, healthy: true }),
        hubCr("c2", { hash: OLD, healthy: true }),
        hubCr("c3", { healthy: true }), // no desired hash: written by hand
      ],
    );
    expect(weighing.members.map((m) => m.key)).toEqual([key("c1"), key("c2"), key("c3")]);
    const c2 = memberOf(weighing, "c2");
    expect(c2).toMatchObject({ frozen: true, path: "", target: OLD, liveHash: OLD });
    expect(weighing.crs[key("c2")]!.cluster).toEqual({ namespace: "fleet-system", name: "c2" });
    // A CR with no digest has no target to wait for: not pending.
    const c3 = memberOf(weighing, "c3");
    expect(Object.keys(c3)).not.toContain("target");
    expect(isPending(c3)).toBe(false);
  });

  it("a failed file's CR is weighed once even when the mirror has a step for it, and not while it is deleted", () => {
    const state = completedOn(CLUSTERS);
    const weighing = weigh(
      input({ state, frozen: [identity("c1"), identity("c2")] }),
      [refusedStep("c1"), unchangedStep("c3")],
      [
        hubCr("c1", { hash: OLD, healthy: true }),
        hubCr("c2", { hash: OLD, healthy: true, deleting: true }),
        hubCr("c3", { hash: OLD, healthy: true }),
      ],
    );
    expect(weighing.members.map((m) => m.key)).toEqual([key("c1"), key("c3")]);
  });

  it("a new target at the commit that first wanted the old one is no change by a commit; at another it is", () => {
    const state = { crs: { [key("c1")]: { target: { hash: OLD, commit: "b" } } } } as unknown as RolloutState;
    const live = [hubCr("c1", { hash: OLD, healthy: true })];
    expect(weigh(input({ state, commit: "b" }), [writeStep("c1", NEW)], live).changedByCommit).toBe(false);
    expect(weigh(input({ state, commit: "c" }), [writeStep("c1", NEW)], live).changedByCommit).toBe(true);
  });
});

describe("what counts against maxUnavailable", () => {
  it("a CR changed since its baseline and not healthy counts; one on its baseline, one healthy, one not on the hub do not", () => {
    const state = completedOn(["c1", "c2", "c3", "c4"]);
    const weighing = weigh(
      input({ state }),
      [writeStep("c1", NEW), writeStep("c2", NEW), writeStep("c3", NEW), writeStep("c4", NEW)],
      [
        hubCr("c1", { hash: NEW, healthy: false }), // on the new content, failing
        hubCr("c2", { hash: OLD, healthy: false }), // still on its baseline
        hubCr("c3", { hash: NEW, healthy: true }), // on the new content, healthy
        // c4 gone from the hub: Git wants it back
      ],
    );
    const verdict = (name: string) => {
      const m = memberOf(weighing, name);
      return [inEpoch(weighing, m), isUnavailable(weighing, m)];
    };
    expect(verdict("c1")).toEqual([true, true]);
    expect(verdict("c2")).toEqual([false, false]);
    expect(verdict("c3")).toEqual([true, false]);
    const c4 = memberOf(weighing, "c4");
    expect(c4.health).toEqual({ healthy: false, reason: "not applied yet" });
    expect(weighing.crs[key("c4")]!.baseline?.hash).toBe(OLD);
    expect(verdict("c4")).toEqual([false, false]);
  });
});

describe("a safe write", () => {
  it("rewriting the content a CR already has (drift) is safe without any baseline; a non-write never is", () => {
    const weighing = weigh(
      input(),
      [writeStep("c1", OLD), unchangedStep("c2")],
      [hubCr("c1", { hash: OLD, healthy: true }), hubCr("c2", { hash: OLD, healthy: true })],
    );
    const c1 = memberOf(weighing, "c1");
    expect(weighing.crs[key("c1")]!.baseline).toBeUndefined();
    expect([isPending(c1), isSafe(weighing, c1)]).toEqual([false, true]);
    expect(isSafe(weighing, memberOf(weighing, "c2"))).toBe(false);
  });
});
