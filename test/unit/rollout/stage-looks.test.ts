import { afterEach, describe, expect, it, vi } from "vitest";
import { ROLLOUT_PAUSED_ANNOTATION } from "../../../src/api/labels.ts";
import type { RolloutStage } from "../../../src/rollout/stage.ts";
import { ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { fleetFiles, fleetModel, hubWithKnativeKinds, stageOn, syncThrough } from "./support.ts";

// When the rollout stage looks again without a commit (its schedule), what stops it, and the pauses it
// reports: a rollout under way, paused, with deletions waiting or an upgrade chain step to go is looked at
// again after the check interval; a halted or complete one, or a stopped stage, waits for Git.

const POLICY = { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }] };
const INTERVAL = 1_000;

type StageOptions = ConstructorParameters<typeof RolloutStage>[0];

function setup(extra: Partial<StageOptions> = {}) {
  const kube = hubWithKnativeKinds();
  let due = 0;
  const stage = stageOn(kube, { onDue: () => due++, checkIntervalMs: INTERVAL, ...extra });
  const sync = syncThrough(kube, () => stage);
  /** How many times the stage asked for a sync over the next check interval (fake time), from none. */
  const dueOverInterval = async () => {
    due = 0;
    await vi.advanceTimersByTimeAsync(INTERVAL + 1);
    return due;
  };
  return { kube, stage, sync, dueOverInterval };
}

const healthy = (kube: FakeKube, name: string) => {
  const cr = kube.find("KnativeServing", name)!;
  cr.status = {
    observedGeneration: cr.metadata.generation ?? 1,
    conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
  };
};

/** Installs `clusters` at 1.21 under `policy` and makes every CR healthy until the rollout is complete. */
async function completed(hub: ReturnType<typeof setup>, clusters: string[], policy: Record<string, unknown>) {
  const files = fleetFiles(clusters, policy, () => "1.21");
  for (let attempt = 0; attempt < 5; attempt++) {
    const { report } = await hub.sync(files, "a");
    if (report?.phase === "Complete") return;
    for (const name of clusters)
      if (hub.kube.find("KnativeServing", `${name}-serving`)) healthy(hub.kube, `${name}-serving`);
  }
  throw new Error("the rollout did not complete");
}

afterEach(() => {
  vi.useRealTimers();
});

describe("when the rollout stage looks again", () => {
  it("keeps one look-again at a time, and none once the rollout is complete; its timer never holds the process", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const timers = vi.spyOn(globalThis, "setTimeout");
    const hub = setup();
    const files = fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s" }, () => "1.21");
    try {
      // The canary is out and not healthy yet: the rollout is under way, twice in a row.
      expect((await hub.sync(files, "a")).report?.phase).toBe("Progressing");
      expect((await hub.sync(files, "a")).report?.phase).toBe("Progressing");
      expect(vi.getTimerCount()).toBe(1);
      const made = timers.mock.results.map((result) => result.value as NodeJS.Timeout);
      expect(made).toHaveLength(2);
      expect(made.map((timer) => timer.hasRef())).toEqual([false, false]);
      expect(await hub.dueOverInterval()).toBe(1);
      // Every CR healthy: complete, and the look-again the last sync asked for is dropped.
      healthy(hub.kube, "c1-serving");
      await hub.sync(files, "a");
      expect(vi.getTimerCount()).toBe(1);
      healthy(hub.kube, "c2-serving");
      expect((await hub.sync(files, "a")).report?.phase).toBe("Complete");
      expect(vi.getTimerCount()).toBe(0);
      expect(await hub.dueOverInterval()).toBe(0);
    } finally {
      timers.mockRestore();
      hub.stage.stop();
    }
  });

  it("a stopped stage (leadership lost) keeps no timer and asks for no sync, even from a sync that ends after", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const hub = setup();
    const files = fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s" }, () => "1.21");
    await hub.sync(files, "a");
    expect(vi.getTimerCount()).toBe(1);
    hub.stage.stop();
    expect(vi.getTimerCount()).toBe(0);
    expect(await hub.dueOverInterval()).toBe(0);
    // A sync under way when the stage stopped still finishes, and asks for nothing.
    expect((await hub.sync(files, "a")).report?.phase).toBe("Progressing");
    expect(vi.getTimerCount()).toBe(0);
    expect(await hub.dueOverInterval()).toBe(0);
  });

  it("a policy removed drops the look-again as soon as the sync reads it, before the sync is done", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const hub = setup();
    await hub.sync(
      fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s" }, () => "1.21"),
      "a",
    );
    expect(vi.getTimerCount()).toBe(1);
    // The next commit has no policy: nothing to read, and nothing to look at again.
    expect(
      await hub.stage.open(
        fleetModel(["c1", "c2"], undefined, () => "1.21"),
        "b",
      ),
    ).toBeUndefined();
    expect(vi.getTimerCount()).toBe(0);
    expect(await hub.dueOverInterval()).toBe(0);
    hub.stage.stop();
  });

  it("a halted rollout waits for Git, even with an upgrade chain's step to go", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    let clock = Date.parse("2026-11-30T10:00:00Z");
    const hub = setup({ now: () => new Date(clock) });
    const policy = { ...POLICY, soak: "0s", timeLimit: "0s" };
    await completed(hub, ["c1", "c2"], policy);
    // 1.21 to 1.23 goes one minor at a time: step 1.22 to the canary, which never becomes healthy on it.
    const at123 = fleetFiles(["c1", "c2"], policy, () => "1.23");
    const first = await hub.sync(at123, "b");
    expect(first.result.upgrades?.map((cr) => cr.step)).toEqual(["1.22", "1.22"]);
    expect(first.report).toMatchObject({ phase: "Progressing", wave: "canary", opened: true });
    clock += 60_000; // past the time limit (0s)
    const halted = await hub.sync(at123, "b");
    expect(halted.report?.phase).toBe("Halted");
    expect(halted.result.upgrades?.length).toBeGreaterThan(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(await hub.dueOverInterval()).toBe(0);
    hub.stage.stop();
  });
});

describe("a paused rollout", () => {
  it("paused on the hub: a new change waits in a wave not opened yet, and the report says paused", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const hub = setup();
    const policy = { ...POLICY, soak: "0s" };
    await completed(hub, ["c1", "c2"], policy);
    const configMap = hub.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!;
    configMap.metadata.annotations = {
      ...configMap.metadata.annotations,
      [ROLLOUT_PAUSED_ANNOTATION]: "true",
    };
    const { report, result } = await hub.sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "waiting"],
      ["c2-serving", "waiting"],
    ]);
    expect(report).toMatchObject({
      phase: "Progressing",
      commit: "b",
      wave: "canary",
      opened: false,
      paused: true,
    });
    expect(report?.waiting).toBe(2);
    // Paused, it looks again: nothing else would notice the pause lifted.
    expect(await hub.dueOverInterval()).toBe(1);
    // The pause lifted (annotated false): the canary takes the change.
    configMap.metadata.annotations = {
      ...configMap.metadata.annotations,
      [ROLLOUT_PAUSED_ANNOTATION]: "false",
    };
    const resumed = await hub.sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(resumed.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "update"],
      ["c2-serving", "waiting"],
    ]);
    expect(resumed.report).toMatchObject({
      phase: "Progressing",
      wave: "canary",
      opened: true,
      paused: false,
    });
    hub.stage.stop();
  });

  it("paused in the file: a complete rollout reports paused and keeps looking until the pause goes", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const hub = setup();
    const policy = { ...POLICY, soak: "0s" };
    await completed(hub, ["c1", "c2"], policy);
    expect(await hub.dueOverInterval()).toBe(0);
    const paused = await hub.sync(
      fleetFiles(["c1", "c2"], { ...policy, paused: true }, () => "1.21"),
      "b",
    );
    expect(paused.report).toMatchObject({ phase: "Complete", paused: true, waiting: 0 });
    expect(await hub.dueOverInterval()).toBe(1);
    const unpaused = await hub.sync(
      fleetFiles(["c1", "c2"], policy, () => "1.21"),
      "c",
    );
    expect(unpaused.report).toMatchObject({ phase: "Complete", paused: false });
    expect(await hub.dueOverInterval()).toBe(0);
    hub.stage.stop();
  });
});

describe("deletions of a complete rollout", () => {
  it("a deletion that waits for a later wave's CRs is looked at again; once all are gone, nothing is", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const hub = setup();
    const policy = { ...POLICY, soak: "0s", maxUnavailable: "100%" };
    await completed(hub, ["c1", "c2", "c3", "c4"], policy);
    expect(await hub.dueOverInterval()).toBe(0);
    // c1 (canary) and c4 (remaining) leave Git: c4 goes first, c1 waits for it.
    const first = await hub.sync(
      fleetFiles(["c2", "c3"], policy, () => "1.21"),
      "b",
    );
    expect(first.report?.phase).toBe("Complete");
    expect(first.result.prune.candidates.map((c) => [c.name, c.waiting ?? "deleted"])).toEqual([
      ["c1-serving", "deletions go in reverse wave order: wave remaining first"],
      ["c4-serving", "deleted"],
    ]);
    expect(hub.kube.find("KnativeServing", "c4-serving")).toBeUndefined();
    expect(await hub.dueOverInterval()).toBe(1);
    const next = await hub.sync(
      fleetFiles(["c2", "c3"], policy, () => "1.21"),
      "b",
    );
    expect(next.report?.phase).toBe("Complete");
    expect(next.result.prune.candidates.map((c) => [c.name, c.waiting ?? "deleted"])).toEqual([
      ["c1-serving", "deleted"],
    ]);
    expect(hub.kube.find("KnativeServing", "c1-serving")).toBeUndefined();
    expect(await hub.dueOverInterval()).toBe(0);
    hub.stage.stop();
  });
});
