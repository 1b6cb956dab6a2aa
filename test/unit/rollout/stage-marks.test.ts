import { describe, expect, it } from "vitest";
import { ROLLOUT_WAITING_ANNOTATION } from "../../../src/api/labels.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import type { RolloutStage } from "../../../src/rollout/stage.ts";
import { ROLLOUT_KEY_SECRET, ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { fleetFiles, hubWithKnativeKinds, rolloutText, stageOn, syncThrough } from "./support.ts";

// The stage's marks on the hub CRs that wait (the waiting annotation and its RolloutWaiting Event), and what
// it reads and writes when every change is held: what an operator sees with `kubectl describe`.

const POLICY = { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }] };
const SERVING = (cluster: string) => `KnativeServing knative-fleet/${cluster}-serving`;
/** Commits as Git names them: 40 hexadecimal digits, cut to 12 in a sentence. */
const A = "a".repeat(40);
const B = `b1${"0".repeat(38)}`;
const C = `c1${"0".repeat(38)}`;

type StageOptions = ConstructorParameters<typeof RolloutStage>[0];

function setup(extra: Partial<StageOptions> = {}, kube: FakeKube = hubWithKnativeKinds()) {
  const stage = stageOn(kube, extra);
  const sync = syncThrough(kube, () => stage);
  return { kube, stage, sync };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20)); // Events are recorded in the background

/** The Events of one reason on the hub: the CR each is about, its type and message. */
const eventsOf = (kube: FakeKube, reason: string) =>
  kube
    .objects()
    .filter((o) => o.kind === "Event" && o.reason === reason)
    .map((e) => {
      const { involvedObject, type, message } = e as unknown as {
        involvedObject: { kind: string; namespace: string; name: string };
        type: string;
        message: string;
      };
      return {
        about: `${involvedObject.kind} ${involvedObject.namespace}/${involvedObject.name}`,
        type,
        message,
      };
    });

const note = (kube: FakeKube, name: string) =>
  kube.find("KnativeServing", name)?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION];

const healthy = (kube: FakeKube, name: string) => {
  const cr = kube.find("KnativeServing", name)!;
  cr.status = {
    observedGeneration: cr.metadata.generation ?? 1,
    conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
  };
};

const BROKEN = "the rollout policy (rollout.yaml) cannot be read; changes wait until it is fixed";

describe("the rollout stage marks the hub CRs that wait", () => {
  it("a CR held for its wave gets the note and one RolloutWaiting Event naming the head commit; its release clears the note without one", async () => {
    const { kube, stage, sync } = setup();
    const policy = { ...POLICY, soak: "0s" };
    await sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.21"),
      A,
    );
    const first = await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      B,
    );
    // The canary takes the change; c2 waits for the canary's wave, and says so on the CR and in one Event.
    const reason = "rollout of b10000000000 waits for its wave, remaining";
    expect(first.result.resources.map((r) => [r.name, r.action, r.reason])).toEqual([
      ["c1-serving", "update", undefined],
      ["c2-serving", "waiting", reason],
    ]);
    expect(note(kube, "c2-serving")).toBe(reason);
    expect(note(kube, "c1-serving")).toBeUndefined();
    await settle();
    expect(eventsOf(kube, "RolloutWaiting")).toEqual([
      {
        about: SERVING("c2"),
        type: "Normal",
        message: `keeps its last applied spec; ${reason} (head b10000000000)`,
      },
    ]);
    // The same wait again: the note is as it was, and no second Event.
    await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      B,
    );
    await settle();
    expect(eventsOf(kube, "RolloutWaiting")).toHaveLength(1);
    // The canary is healthy: c2 goes out, its note is taken off, and no Event says it waits.
    healthy(kube, "c1-serving");
    const released = await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      B,
    );
    expect(released.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "unchanged"],
      ["c2-serving", "update"],
    ]);
    expect(kube.find("KnativeServing", "c2-serving")!.metadata.annotations).not.toHaveProperty(
      ROLLOUT_WAITING_ANNOTATION,
    );
    await settle();
    expect(eventsOf(kube, "RolloutWaiting")).toHaveLength(1);
    stage.stop();
  });

  it("a CR that cannot be marked is logged with why, and the others are still marked", async () => {
    const { logger: log, lines } = capturingLogger();
    const { kube, stage, sync } = setup({ log });
    await sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.21"),
      A,
    );
    // An admission webhook on the hub refuses any patch of c1-serving.
    const client = kube.client;
    const mergePatch = client.mergePatch.bind(client);
    client.mergePatch = (async (...args: Parameters<typeof client.mergePatch>) => {
      if (args[3] === "c1-serving") throw new Error("admission webhook denied the request");
      return mergePatch(...args);
    }) as typeof client.mergePatch;
    const { report } = await sync(
      fleetFiles(["c1", "c2"], { waves: [] }, () => "1.22"),
      B,
    );
    expect(report).toMatchObject({ phase: "Invalid", waiting: 2, message: BROKEN });
    expect(lines().filter((line) => line.msg === "cannot mark a waiting CR")).toEqual([
      expect.objectContaining({
        level: 40,
        resource: SERVING("c1"),
        err: "Error: admission webhook denied the request",
      }),
    ]);
    expect(note(kube, "c1-serving")).toBeUndefined();
    expect(note(kube, "c2-serving")).toBe(BROKEN);
    await settle();
    // Only the CR that was marked has an Event saying it waits.
    expect(eventsOf(kube, "RolloutWaiting")).toEqual([
      {
        about: SERVING("c2"),
        type: "Normal",
        message: `keeps its last applied spec; ${BROKEN} (head b10000000000)`,
      },
    ]);
    stage.stop();
  });

  it("a CR on its way out (deletionTimestamp set) keeps its note: it is not patched", async () => {
    const { kube, stage, sync } = setup();
    await sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.21"),
      A,
    );
    await sync(
      fleetFiles(["c1", "c2"], { waves: [] }, () => "1.22"),
      B,
    );
    expect([note(kube, "c1-serving"), note(kube, "c2-serving")]).toEqual([BROKEN, BROKEN]);
    // c1-serving is being deleted (a finalizer holds it); the policy goes, and c2's note with it.
    const c1 = kube.find("KnativeServing", "c1-serving")!;
    c1.metadata.deletionTimestamp = "2026-11-30T10:00:00Z";
    c1.metadata.finalizers = ["operator.knative.dev"];
    kube.resetCounts();
    const { result } = await sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.22"),
      C,
    );
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "terminating"],
      ["c2-serving", "update"],
    ]);
    expect(note(kube, "c2-serving")).toBeUndefined();
    expect(note(kube, "c1-serving")).toBe(BROKEN);
    // The mirror's apply of c2 and the patch that clears c2's note: nothing for c1.
    expect(kube.requests().writes).toBe(2);
    stage.stop();
  });
});

describe("the rollout stage holds every change while the policy cannot be read", () => {
  it("names every rollout file that fails, and neither reads nor makes the state's key", async () => {
    let due = 0;
    const { kube, stage, sync } = setup({ onDue: () => due++ });
    await sync(
      fleetFiles(["c1"], undefined, () => "1.21"),
      A,
    );
    kube.resetCounts();
    due = 0;
    const files = [
      ...fleetFiles(["c1"], { waves: [] }, () => "1.22"),
      { path: "canary/rollout.yaml", text: rolloutText({ waves: [] }) },
    ];
    expect(buildFleetModel(files, { defaultNamespace: "knative-fleet" }).rollout.failedPaths.sort()).toEqual([
      "canary/rollout.yaml",
      "rollout.yaml",
    ]);
    const { report, result } = await sync(files, B);
    const message =
      "the rollout policy (canary/rollout.yaml, rollout.yaml) cannot be read; changes wait until it is fixed";
    expect(report).toEqual({ phase: "Invalid", paused: false, waiting: 1, history: [], message });
    expect(result.resources.map((r) => [r.name, r.action, r.reason])).toEqual([
      ["c1-serving", "waiting", message],
    ]);
    expect(note(kube, "c1-serving")).toBe(message);
    // The state ConfigMap is read for the hub pause; the key Secret is neither read nor made.
    expect(kube.find("Secret", ROLLOUT_KEY_SECRET)).toBeUndefined();
    expect(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)).toBeUndefined();
    // The mirror's 3 reads and the state ConfigMap's; two writes, the note on c1 and its Event.
    await settle();
    expect(kube.requests()).toEqual({ reads: 4, writes: 2 });
    // A broken policy waits for Git: nothing to look at again.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(due).toBe(0);
    stage.stop();
  });
});
