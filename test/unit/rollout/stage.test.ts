import { describe, expect, it } from "vitest";
import { ROLLOUT_WAITING_ANNOTATION } from "../../../src/api/labels.ts";
import { mirror } from "../../../src/mirror/mirror.ts";
import { MirrorOptionsSchema } from "../../../src/mirror/plan.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { RolloutStage } from "../../../src/rollout/stage.ts";
import { ROLLOUT_STATE_CONFIGMAP, readRolloutState } from "../../../src/rollout/state.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { ANY_NAMESPACE_ADMISSION, crObject } from "../../support/fleet-files.ts";
import { cluster, fleetModel, REPOSITORY } from "./support.ts";

const POLICY = { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }] };

function setup(onDue: () => void = () => {}) {
  const kube = new FakeKube().serveKindsOf([
    crObject({ name: "x", cluster: "c1" }),
    crObject({ kind: "KnativeEventing", name: "y", cluster: "c1" }),
    { apiVersion: "v1", kind: "Event", metadata: {} },
  ]);
  const stage = new RolloutStage({
    hub: kube.client,
    namespace: "knative-fleet",
    inventory: () => [cluster("c1"), cluster("c2")],
    events: new EventRecorder({ client: kube.client, component: "test", log: silentLogger }),
    log: silentLogger,
    checkIntervalMs: 20,
    onDue,
  });
  const sync = async (model: ReturnType<typeof fleetModel>, commit: string) => {
    const prepared = await stage.prepare(model, commit);
    const result = await mirror(kube.client, {
      model,
      source: { repository: REPOSITORY, branch: "main", commit },
      sourceRead: true,
      options: MirrorOptionsSchema.parse({}),
      namespace: "knative-fleet",
      admission: ANY_NAMESPACE_ADMISSION,
      gate: prepared.gate,
    });
    return { result, report: await prepared.finish() };
  };
  return { kube, stage, sync };
}

describe("the rollout stage on a hub", () => {
  it("without a policy, sends what the mirror would and makes no request of its own", async () => {
    const { kube, stage, sync } = setup();
    const model = fleetModel(["c1", "c2"], undefined, () => "1.21");
    await sync(model, "a");
    kube.resetCounts();
    const { report } = await sync(
      fleetModel(["c1", "c2"], undefined, () => "1.22"),
      "b",
    );
    expect(report).toBeUndefined();
    // The mirror's 3 reads and 2 applies, nothing else.
    expect(kube.requests()).toEqual({ reads: 3, writes: 2 });
    stage.stop();
  });

  it("marks the CR that waits, stores the state, and clears the note when the policy is removed", async () => {
    const { kube, stage, sync } = setup();
    await sync(
      fleetModel(["c1", "c2"], POLICY, () => "1.21"),
      "a",
    );
    const waitingNote = () =>
      kube.find("KnativeServing", "c2-serving")?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION];
    // The first install goes canary first: c2 is not created yet.
    expect(kube.find("KnativeServing", "c2-serving")).toBeUndefined();
    const state = readRolloutState(
      (kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data as Record<string, string>).state,
    );
    expect(state).toMatchObject({ phase: "Progressing", waveName: "canary", commit: "a" });
    // The policy goes: everything at once, and no note is left behind.
    await sync(
      fleetModel(["c1", "c2"], undefined, () => "1.21"),
      "b",
    );
    expect(kube.find("KnativeServing", "c2-serving")).toBeDefined();
    expect(waitingNote()).toBeUndefined();
    stage.stop();
  });

  it("records what it lets through before the mirror writes it (a leader killed in between loses nothing)", async () => {
    const { kube, stage } = setup();
    const model = fleetModel(["c1", "c2"], POLICY, () => "1.21");
    const gated = await (await stage.prepare(model, "a")).gate.applies(
      [
        {
          kind: "KnativeServing",
          namespace: "knative-fleet",
          name: "c1-serving",
          path: "clusters/c1-serving.yaml",
          action: "create",
          object: crObject({ name: "c1-serving", cluster: "c1" }),
        },
      ],
      [],
    );
    expect(gated.map((s) => s.action)).toEqual(["create"]);
    // Nothing is written yet, but the state already names the CR as let through.
    expect(kube.find("KnativeServing", "c1-serving")).toBeUndefined();
    const stored = readRolloutState(
      (kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data as Record<string, string>).state,
    );
    expect(Object.keys(stored!.released)).toEqual(["KnativeServing knative-fleet/c1-serving"]);
    stage.stop();
  });

  it("deletions go in reverse wave order and are looked at again without a commit", async () => {
    let due = 0;
    const { kube, stage, sync } = setup(() => due++);
    const policy = { ...POLICY, soak: "0s", maxUnavailable: "100%" };
    const all = fleetModel(["c1", "c2", "c3", "c4"], policy, () => "1.21");
    // Install: canary c1 first, then the remaining c2, c3 and c4 once c1 reports healthy.
    await sync(all, "a");
    const healthy = (name: string) => {
      const cr = kube.find("KnativeServing", name)!;
      cr.status = {
        observedGeneration: cr.metadata.generation ?? 1,
        conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
      };
    };
    healthy("c1-serving");
    await sync(all, "a");
    expect(kube.find("KnativeServing", "c4-serving")).toBeDefined();
    // c1 (canary) and c4 (remaining) leave: c4 first; c1 waits, and the stage asks to be called again.
    due = 0;
    const { result } = await sync(
      fleetModel(["c2", "c3"], policy, () => "1.21"),
      "b",
    );
    expect(result.prune.candidates.map((c) => [c.name, c.waiting ?? "deleted"])).toEqual([
      ["c1-serving", "deletions go in reverse wave order: wave remaining first"],
      ["c4-serving", "deleted"],
    ]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(due).toBeGreaterThan(0);
    const { result: next } = await sync(
      fleetModel(["c2", "c3"], policy, () => "1.21"),
      "b",
    );
    expect(next.prune.candidates.map((c) => [c.name, c.waiting ?? "deleted"])).toEqual([
      ["c1-serving", "deleted"],
    ]);
    stage.stop();
  });

  it("a broken policy holds every change and says why on the CR", async () => {
    const { kube, stage, sync } = setup();
    await sync(
      fleetModel(["c1"], undefined, () => "1.21"),
      "a",
    );
    const { report, result } = await sync(
      fleetModel(["c1"], { waves: [] }, () => "1.22"),
      "b",
    );
    expect(report?.phase).toBe("Invalid");
    expect(result.resources.map((r) => r.action)).toEqual(["waiting"]);
    const cr = kube.find("KnativeServing", "c1-serving")!;
    expect((cr.spec as { version: string }).version).toBe("1.21");
    expect(cr.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION]).toBe(
      "the rollout policy (rollout.yaml) failed validation; changes wait until it is fixed",
    );
    stage.stop();
  });
});
