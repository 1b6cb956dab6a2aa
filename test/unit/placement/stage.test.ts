import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DECISION_KEY_LABEL } from "../../../src/api/labels.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { PlacementSync } from "../../../src/placement/combine.ts";
import type { DepartureResult } from "../../../src/placement/departures.ts";
import { PLACEMENT_DECISION_API_VERSION } from "../../../src/placement/inventory.ts";
import { PlacementStage } from "../../../src/placement/stage.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { FakeKube } from "../../support/fake-kube.ts";

// The placement stage as the service runs it: list + watch of the in-memory hub's ClusterProfiles and
// PlacementDecisions, on vitest's fake clock (the 200 ms debounce, the departure timer, the watches' retry).

// The informer's retry back-off sleeps through node:timers/promises, which the fake clock does not reach.
vi.mock("node:timers/promises", async (importOriginal) => ({
  ...(await importOriginal<typeof import("node:timers/promises")>()),
  setTimeout: (ms: number, value?: unknown, options?: { signal?: AbortSignal }) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(value), ms);
      options?.signal?.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(options.signal?.reason);
        },
        { once: true },
      );
    }),
}));

const PROFILE_API_VERSION = "multicluster.x-k8s.io/v1alpha1";
const PROFILES = "fleet-system";
const GRACE_MS = 60_000;
const NOW = 1_000_000;
/** A real macrotask: the fake hub answers in microtasks, so a few turns let every list and event land. */
const realImmediate = setImmediate;

interface ProfileShape {
  labels?: Record<string, string>;
  properties?: Record<string, string>;
  /** Its health condition: status that selection never reads. */
  healthy?: boolean;
  namespace?: string;
}

function profile(name: string, shape: ProfileShape = {}): KubeObject {
  const { labels = {}, properties = {}, healthy = true, namespace = PROFILES } = shape;
  return {
    apiVersion: PROFILE_API_VERSION,
    kind: "ClusterProfile",
    metadata: { name, namespace, labels },
    spec: { displayName: name },
    status: {
      conditions: [{ type: "ControlPlaneHealthy", status: healthy ? "True" : "False" }],
      properties: Object.entries(properties).map(([key, value]) => ({ name: key, value })),
    },
  };
}

function decision(name: string, clusters: string[], namespace = "knative-fleet"): KubeObject {
  return {
    apiVersion: PLACEMENT_DECISION_API_VERSION,
    kind: "PlacementDecision",
    metadata: { name, namespace, labels: { [DECISION_KEY_LABEL]: "serving" } },
    decisions: clusters.map((cluster) => ({ clusterProfileRef: { name: cluster, namespace: PROFILES } })),
  } as KubeObject;
}

/** A hub that serves both kinds, with watches, holding `objects`. */
function hubWith(...objects: KubeObject[]): FakeKube {
  const kube = new FakeKube().serveKindsOf([profile("kind"), decision("kind", [])]).serveWatches();
  for (const object of objects) kube.put(object);
  return kube;
}

let stages: PlacementStage[] = [];

function stageOn(kube: FakeKube, allowedNamespaces?: string[]) {
  const log = capturingLogger();
  const onChange = vi.fn();
  const stage = new PlacementStage({
    hub: kube.client,
    ...(allowedNamespaces ? { allowedNamespaces } : {}),
    clusterProfileApiVersion: PROFILE_API_VERSION,
    departureGracePeriodMs: GRACE_MS,
    log: log.logger,
    onChange,
    now: () => NOW,
  });
  stages.push(stage);
  const warnings = () => log.lines().filter((line) => line.level === 40);
  return { stage, onChange, warnings };
}

/** Lets the fake hub's answers and events reach the stage, without moving the clock. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => realImmediate(resolve));
}

/** Moves the fake clock, letting what each timer starts land. */
async function advance(ms: number): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  await settle();
}

/** A started stage whose watches have listed and whose first sync request has come and gone. */
async function started(kube: FakeKube, allowedNamespaces?: string[]) {
  const running = stageOn(kube, allowedNamespaces);
  running.stage.start();
  await settle();
  await advance(200);
  expect(running.onChange).toHaveBeenCalledTimes(1);
  running.onChange.mockClear();
  return running;
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  for (const stage of stages) stage.stop();
  stages = [];
  vi.useRealTimers();
});

describe("what the placement stage tells selection", () => {
  it("knows nothing before its watches have listed, then every ClusterProfile and PlacementDecision", async () => {
    const kube = hubWith(
      profile("c1", { labels: { env: "prod" }, properties: { region: "eu" } }),
      profile("c2", { namespace: "other-profiles" }),
      decision("serving-1", ["c1"]),
    );
    const { stage } = stageOn(kube);
    expect(stage.inventory()).toStrictEqual({ clusters: undefined, decisions: undefined });
    stage.start();
    await settle();
    const inventory = stage.inventory();
    expect(inventory.clusters).toEqual([
      { namespace: PROFILES, name: "c1", labels: { env: "prod" }, properties: new Map([["region", "eu"]]) },
      { namespace: "other-profiles", name: "c2", labels: {}, properties: new Map() },
    ]);
    expect(inventory.decisions).toEqual([
      {
        namespace: "knative-fleet",
        name: "serving-1",
        decisionKey: "serving",
        clusters: [{ namespace: PROFILES, name: "c1" }],
      },
    ]);
    expect(inventory).not.toHaveProperty("unknownReason");
  });

  it("reads the allowed namespaces only, and follows the hub's changes", async () => {
    const kube = hubWith(profile("c1"), profile("c2", { namespace: "elsewhere" }), decision("d", ["c1"]));
    const { stage } = await started(kube, [PROFILES, "knative-fleet"]);
    expect(stage.inventory().clusters?.map((c) => c.name)).toEqual(["c1"]);
    kube.put(profile("c3"));
    kube.remove("ClusterProfile", "c1");
    kube.put(decision("d", ["c3"]));
    await settle();
    expect(stage.inventory().clusters?.map((c) => c.name)).toEqual(["c3"]);
    expect(stage.inventory().decisions?.[0]?.clusters).toEqual([{ namespace: PROFILES, name: "c3" }]);
  });

  it("expansion waits until every watch has listed: one namespace refused leaves the clusters unknown", async () => {
    const kube = hubWith(profile("a1", { namespace: "team-a" }), profile("b1", { namespace: "team-b" }));
    kube.forbid("clusterprofiles", "team-b");
    const { stage } = stageOn(kube, ["team-a", "team-b"]);
    stage.start();
    await settle();
    // team-a's profiles alone would make a placement drop b1's cluster: unknown instead.
    expect(stage.inventory().clusters).toBeUndefined();
    expect(stage.inventory().decisions).toEqual([]);
    expect(stage.inventory().unknownReason).toContain("clusterprofiles is forbidden");
    kube.allow("clusterprofiles", "team-b");
    await advance(1_000); // the informer's first retry
    expect(stage.inventory().clusters?.map((c) => c.name)).toEqual(["a1", "b1"]);
    expect(stage.inventory()).not.toHaveProperty("unknownReason");
  });

  it("says why the lists are unknown: each failing watch's error, joined", async () => {
    const kube = hubWith();
    kube.forbid("clusterprofiles");
    kube.forbid("placementdecisions");
    const { stage } = stageOn(kube);
    stage.start();
    await settle();
    const profiles =
      "GET /apis/multicluster.x-k8s.io/v1alpha1/clusterprofiles: 403 Forbidden: clusterprofiles is forbidden";
    const decisions =
      "GET /apis/multicluster.x-k8s.io/v1alpha1/placementdecisions: 403 Forbidden: placementdecisions is forbidden";
    expect(stage.inventory()).toStrictEqual({
      clusters: undefined,
      decisions: undefined,
      unknownReason: `${profiles}; ${decisions}`,
    });
  });
});

describe("what the placement stage logs", () => {
  it("a watch that keeps failing the same way is logged once, with its kind, namespace and error", async () => {
    const kube = hubWith();
    kube.forbid("clusterprofiles", "team-a");
    const { stage, warnings } = stageOn(kube, ["team-a"]);
    stage.start();
    await settle();
    // The informer's two next retries (1 s, then 2 s later), each refused alike.
    await advance(1_000);
    await advance(2_000);
    expect(warnings()).toEqual([
      expect.objectContaining({
        msg: "placement inventory watch failed; retrying",
        kind: "ClusterProfile",
        namespace: "team-a",
        err: expect.stringContaining("403 Forbidden: clusterprofiles is forbidden"),
      }),
    ]);
  });
});

describe("when the placement stage asks for a sync", () => {
  it("each watch that lists for the first time asks, in one debounced request", async () => {
    const { stage, onChange } = stageOn(hubWith(profile("c1")));
    stage.start();
    await settle();
    expect(onChange).not.toHaveBeenCalled();
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(1);
    await advance(10_000);
    expect(onChange).toHaveBeenCalledTimes(1);
  });

  it("a burst of ClusterProfile events asks for one sync, and a later event asks again", async () => {
    const kube = hubWith(profile("c1"), profile("c2"));
    const { onChange } = await started(kube);
    kube.put(profile("c1", { labels: { env: "prod" } }));
    kube.put(profile("c2", { labels: { env: "prod" } }));
    kube.put(profile("c3"));
    await settle();
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(1);
    kube.remove("ClusterProfile", "c3");
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(2);
  });

  it("a status-only change of a ClusterProfile asks for nothing", async () => {
    const kube = hubWith(profile("c1", { labels: { env: "prod" }, properties: { region: "eu" } }));
    const { onChange } = await started(kube);
    kube.put(profile("c1", { labels: { env: "prod" }, properties: { region: "eu" }, healthy: false }));
    await advance(1_000);
    expect(onChange).not.toHaveBeenCalled();
  });

  it.each([
    ["a label", profile("c1", { labels: { env: "staging" }, properties: { region: "eu" } })],
    ["a property", profile("c1", { labels: { env: "prod" }, properties: { region: "us" } })],
  ])("a change of %s of a ClusterProfile asks for a sync", async (_what, changed) => {
    const kube = hubWith(profile("c1", { labels: { env: "prod" }, properties: { region: "eu" } }));
    const { onChange } = await started(kube);
    kube.put(changed);
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(1);
  });

  it("a ClusterProfile that appears or goes asks for a sync", async () => {
    const kube = hubWith(profile("c1"));
    const { onChange } = await started(kube);
    kube.put(profile("c2"));
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(1);
    kube.remove("ClusterProfile", "c1");
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(2);
  });

  it("any change of a PlacementDecision asks for a sync", async () => {
    const kube = hubWith(profile("c1"), profile("c2"), decision("d", ["c1"]));
    const { onChange } = await started(kube);
    kube.put(decision("d", ["c2"]));
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(1);
    kube.remove("PlacementDecision", "d");
    await advance(200);
    expect(onChange).toHaveBeenCalledTimes(2);
  });
});

/** A sync whose departures are `result`, keeping what the stage passes it. */
function syncDeparting(result: Omit<DepartureResult, "held" | "departures">) {
  const inputs: Parameters<PlacementSync["departures"]>[0][] = [];
  const sync: PlacementSync = {
    model: buildFleetModel([], { defaultNamespace: "knative-fleet" }),
    selections: [],
    departures: (input) => {
      inputs.push(input);
      return { held: [], departures: [], ...result };
    },
  };
  return { sync, inputs };
}

describe("the departure clock", () => {
  it("is kept across syncs: each sync gets the clock, the grace period and the last sync's departures", () => {
    const { stage } = stageOn(hubWith());
    const since = new Map([["KnativeServing knative-fleet/c1-serving", NOW - 5_000]]);
    const first = syncDeparting({ since });
    const held = stage.hold(first.sync, [], "https://git.example/fleet.git");
    expect(held.since).toBe(since);
    expect(first.inputs).toEqual([
      {
        live: [],
        repository: "https://git.example/fleet.git",
        now: NOW,
        gracePeriodMs: GRACE_MS,
        previous: new Map(),
      },
    ]);
    const second = syncDeparting({ since: new Map() });
    stage.hold(second.sync, [], "https://git.example/fleet.git");
    expect(second.inputs[0]!.previous).toBe(since);
  });

  it("a departure that falls due asks for a sync once its grace period has ended, not before", async () => {
    const { stage, onChange } = stageOn(hubWith());
    stage.hold(syncDeparting({ since: new Map(), nextDue: NOW + GRACE_MS }).sync, [], "repo");
    await advance(GRACE_MS);
    expect(onChange).not.toHaveBeenCalled();
    await advance(1_000);
    expect(onChange).toHaveBeenCalledTimes(1);
  });

  it("a later sync that holds nothing due cancels the earlier one's wake-up", async () => {
    const { stage, onChange } = stageOn(hubWith());
    stage.hold(syncDeparting({ since: new Map(), nextDue: NOW + 1_000 }).sync, [], "repo");
    stage.hold(syncDeparting({ since: new Map() }).sync, [], "repo");
    await advance(10 * GRACE_MS);
    expect(onChange).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a departure already past due asks for a sync right away", async () => {
    const { stage, onChange } = stageOn(hubWith());
    stage.hold(syncDeparting({ since: new Map(), nextDue: NOW - GRACE_MS }).sync, [], "repo");
    await advance(300);
    expect(onChange).toHaveBeenCalledTimes(1);
  });
});

describe("stopping the placement stage", () => {
  it("stop() closes the watches and cancels pending timers", async () => {
    const kube = hubWith(profile("c1"));
    const { stage, onChange } = await started(kube);
    expect(kube.openWatches()).toBe(2);
    kube.put(profile("c2"));
    stage.hold(syncDeparting({ since: new Map(), nextDue: NOW + 1_000 }).sync, [], "repo");
    expect(vi.getTimerCount()).toBe(2); // the debounce and the departure's wake-up
    stage.stop();
    expect(kube.openWatches()).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
    await advance(10 * GRACE_MS);
    expect(onChange).not.toHaveBeenCalled();
  });

  it("a watch that lists after stop(), or a sync that holds a departure then, asks for nothing", async () => {
    const kube = hubWith(profile("c1"));
    const { stage, onChange } = stageOn(kube);
    stage.start();
    stage.stop(); // before the lists are answered
    await settle();
    stage.hold(syncDeparting({ since: new Map(), nextDue: NOW + 1_000 }).sync, [], "repo");
    expect(vi.getTimerCount()).toBe(0);
    await advance(10 * GRACE_MS);
    expect(onChange).not.toHaveBeenCalled();
  });

  it("its timers never keep the process alive", async () => {
    const timers = vi.spyOn(globalThis, "setTimeout");
    try {
      const kube = hubWith(profile("c1"));
      const { stage } = stageOn(kube);
      stage.start();
      await settle();
      stage.hold(syncDeparting({ since: new Map(), nextDue: NOW + 1_000 }).sync, [], "repo");
      const made = timers.mock.results.map((result) => result.value as NodeJS.Timeout);
      expect(made).toHaveLength(2);
      expect(made.map((timer) => timer.hasRef())).toEqual([false, false]);
    } finally {
      timers.mockRestore();
    }
  });
});
