import { createHmac } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import {
  ROLLOUT_REFUSED_ANNOTATION,
  ROLLOUT_START_OVER_ANNOTATION,
  ROLLOUT_WAITING_ANNOTATION,
  UPGRADE_TARGET_ANNOTATION,
} from "../../../src/api/labels.ts";
import { buildFleetModel, type FleetFile } from "../../../src/fleet/model.ts";
import type { Preflight } from "../../../src/preflight/index.ts";
import type { RolloutStage } from "../../../src/rollout/stage.ts";
import {
  peekRolloutState,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_STATE_CONFIGMAP,
  type RolloutState,
} from "../../../src/rollout/state.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { fleetFiles, fleetModel, hubWithKnativeKinds, REPOSITORY, stageOn, syncThrough } from "./support.ts";

const POLICY = { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }] };

type StageOptions = ConstructorParameters<typeof RolloutStage>[0];

function setup(
  onDue: () => void = () => {},
  kube = hubWithKnativeKinds(),
  extra: Partial<StageOptions> = {},
) {
  const models = new Map<string, ReturnType<typeof fleetModel>>();
  const newStage = () =>
    stageOn(kube, {
      modelAt: async (commit) => models.get(commit) ?? Promise.reject(new Error(`no commit ${commit}`)),
      onDue,
      ...extra,
    });
  let stage = newStage();
  const syncStage = syncThrough(kube, () => stage);
  const sync = (files: FleetFile[], commit: string) => {
    models.set(commit, buildFleetModel(files, { defaultNamespace: "knative-fleet" }));
    return syncStage(files, commit);
  };
  /** A new leader: nothing in memory but what it reads from the hub. */
  const restart = () => {
    stage.stop();
    stage = newStage();
  };
  return {
    kube,
    get stage() {
      return stage;
    },
    sync,
    restart,
    /** What Git gives back for a commit (a revert's source). */
    models,
  };
}

/** Two CRs installed at 1.21 under a HaltAndRevert policy (no soak, no time limit), the rollout complete. */
async function completedWithRevert() {
  const hub = setup();
  const policy = { ...POLICY, soak: "0s", timeLimit: "0s", onFailure: "HaltAndRevert" };
  const files = fleetFiles(["c1", "c2"], policy, () => "1.21");
  await hub.sync(files, "a");
  healthy(hub.kube, "c1-serving");
  await hub.sync(files, "a");
  healthy(hub.kube, "c2-serving");
  expect((await hub.sync(files, "a")).report?.phase).toBe("Complete");
  return Object.assign(hub, { policy });
}

/** Serving 1.22, which the canary never runs, pushed at commit b: it halts, and c1 goes back to commit a. */
async function haltsAndRevertsTheCanary(
  sync: ReturnType<typeof setup>["sync"],
  policy: Record<string, unknown>,
): Promise<void> {
  await sync(
    fleetFiles(["c1", "c2"], policy, () => "1.22"),
    "b",
  );
  await new Promise((resolve) => setTimeout(resolve, 5));
  const { report, result } = await sync(
    fleetFiles(["c1", "c2"], policy, () => "1.22"),
    "b",
  );
  expect(report?.phase).toBe("Halted");
  expect(result.resources.find((r) => r.name === "c1-serving")).toMatchObject({
    action: "update",
    reason: "reverted to a, the last completed rollout's content on fleet-system/c1",
  });
  // The report names what this sync put back (the notifier tells RolloutReverted from it).
  expect(report?.reverted).toEqual(["KnativeServing knative-fleet/c1-serving"]);
}

const stored = (kube: FakeKube): RolloutState | undefined =>
  peekRolloutState(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)?.data as Record<string, unknown>);

const healthy = (kube: FakeKube, name: string) => {
  const cr = kube.find("KnativeServing", name)!;
  cr.status = {
    observedGeneration: cr.metadata.generation ?? 1,
    conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
  };
};

describe("the rollout stage on a hub", () => {
  it("without a policy, sends what the mirror would and makes no request of its own", async () => {
    const { kube, stage, sync } = setup();
    const files = fleetFiles(["c1", "c2"], undefined, () => "1.21");
    await sync(files, "a");
    kube.resetCounts();
    const { report } = await sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.22"),
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
      fleetFiles(["c1", "c2"], POLICY, () => "1.21"),
      "a",
    );
    const waitingNote = () =>
      kube.find("KnativeServing", "c2-serving")?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION];
    // The first install goes canary first: c2 is not created yet.
    expect(kube.find("KnativeServing", "c2-serving")).toBeUndefined();
    expect(stored(kube)).toMatchObject({ phase: "Progressing", waveName: "canary", commit: "a" });
    // The policy goes: everything at once, and no note is left behind.
    await sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.21"),
      "b",
    );
    expect(kube.find("KnativeServing", "c2-serving")).toBeDefined();
    expect(waitingNote()).toBeUndefined();
    stage.stop();
  });

  it("records what it lets through before the mirror writes it (a leader killed in between loses nothing)", async () => {
    const { kube, stage } = setup();
    const model = fleetModel(["c1", "c2"], POLICY, () => "1.21");
    const gated = await stage.gate(
      await stage.open(model, "a"),
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
      [],
    );
    expect(gated.steps.map((s) => [s.action, s.reason])).toEqual([["create", undefined]]);
    // Nothing is written yet, but the state already names the CR as let through.
    expect(kube.find("KnativeServing", "c1-serving")).toBeUndefined();
    expect(stored(kube)?.crs["KnativeServing knative-fleet/c1-serving"]?.released).toBeDefined();
    stage.stop();
  });

  it("a sync with nothing to change, once the rollout is complete, reads and writes nothing more", async () => {
    const { kube, stage, sync } = setup();
    const policy = { ...POLICY, soak: "0s" };
    const files = fleetFiles(["c1", "c2"], policy, () => "1.21");
    await sync(files, "a");
    healthy(kube, "c1-serving");
    await sync(files, "a");
    healthy(kube, "c2-serving");
    expect((await sync(files, "a")).report?.phase).toBe("Complete");
    await new Promise((resolve) => setTimeout(resolve, 20)); // the completion's Event, recorded in the background
    kube.resetCounts();
    await sync(files, "b"); // a commit that changes no CR (the status write-back's)
    await sync(files, "b");
    // The mirror's 3 reads and the state's one, twice; no write at all.
    expect(kube.requests()).toEqual({ reads: 8, writes: 0 });
    stage.stop();
  });

  it("deletions go in reverse wave order and are looked at again without a commit", async () => {
    let due = 0;
    const { kube, stage, sync } = setup(() => due++);
    const policy = { ...POLICY, soak: "0s", maxUnavailable: "100%" };
    const all = fleetFiles(["c1", "c2", "c3", "c4"], policy, () => "1.21");
    // Install: canary c1 first, then the remaining c2, c3 and c4 once c1 reports healthy.
    await sync(all, "a");
    healthy(kube, "c1-serving");
    await sync(all, "a");
    expect(kube.find("KnativeServing", "c4-serving")).toBeDefined();
    // c1 (canary) and c4 (remaining) leave: c4 first; c1 waits, and the stage asks to be called again.
    due = 0;
    const { result } = await sync(
      fleetFiles(["c2", "c3"], policy, () => "1.21"),
      "b",
    );
    expect(result.prune.candidates.map((c) => [c.name, c.waiting ?? "deleted"])).toEqual([
      ["c1-serving", "deletions go in reverse wave order: wave remaining first"],
      ["c4-serving", "deleted"],
    ]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(due).toBeGreaterThan(0);
    const { result: next } = await sync(
      fleetFiles(["c2", "c3"], policy, () => "1.21"),
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
      fleetFiles(["c1"], undefined, () => "1.21"),
      "a",
    );
    const { report, result } = await sync(
      fleetFiles(["c1"], { waves: [] }, () => "1.22"),
      "b",
    );
    expect(report?.phase).toBe("Invalid");
    expect(result.resources.map((r) => r.action)).toEqual(["waiting"]);
    const cr = kube.find("KnativeServing", "c1-serving")!;
    expect((cr.spec as { version: string }).version).toBe("1.21");
    expect(cr.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION]).toBe(
      "the rollout policy (rollout.yaml) cannot be read; changes wait until it is fixed",
    );
    stage.stop();
  });

  it("seals the state under a key it keeps in a Secret, and refuses a state it did not write", async () => {
    let due = 0;
    const { kube, stage, sync } = setup(() => due++);
    const policy = { ...POLICY, soak: "0s" };
    await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.21"),
      "a",
    );
    const secret = kube.find("Secret", ROLLOUT_KEY_SECRET);
    expect(Buffer.from((secret!.data as { key: string }).key, "base64")).toHaveLength(32);
    const configMap = kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!;
    expect(Object.keys(configMap.data as object).sort()).toEqual(["mac", "previous", "state"]);

    // Someone who may write ConfigMaps marks the rollout complete: the HMAC no longer matches.
    const data = configMap.data as Record<string, string>;
    const forged = { ...JSON.parse(data.state!), phase: "Complete" };
    data.state = JSON.stringify(forged);
    const { report, result } = await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(report?.phase).toBe("Refused");
    expect(report?.message).toMatch(/HMAC does not match/);
    expect(result.resources.map((r) => r.action)).toEqual(["waiting", "waiting"]);
    // Not overwritten: the forged state stays for people to look at, and every change waits.
    expect(
      JSON.parse((kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data as Record<string, string>).state!),
    ).toEqual(forged);
    const refusals = () =>
      kube.objects().filter((o) => o.kind === "Event" && o.reason === "RolloutStateRefused");
    expect(refusals()).toHaveLength(1);
    await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(refusals()).toHaveLength(1); // one Event per refused content, not one a sync
    // Refused, it looks again after the check interval: nothing else would notice the ConfigMap deleted.
    due = 0;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(due).toBeGreaterThan(0);

    // A person starts the state over: the annotation says why, and the rollout starts again, canary first.
    const refused = kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!;
    refused.metadata.annotations = {
      ...refused.metadata.annotations,
      [ROLLOUT_START_OVER_ANNOTATION]: "INC-42",
    };
    const after = await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(after.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "update"],
      ["c2-serving", "waiting"],
    ]);
    // Acted on once: the annotation and the refusal mark are gone, and the state is sealed again.
    const annotations = kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.metadata.annotations ?? {};
    expect(annotations[ROLLOUT_START_OVER_ANNOTATION]).toBeUndefined();
    expect(annotations[ROLLOUT_REFUSED_ANNOTATION]).toBeUndefined();
    expect(
      (
        await sync(
          fleetFiles(["c1", "c2"], policy, () => "1.22"),
          "b",
        )
      ).report?.phase,
    ).toBe("Progressing");
    await new Promise((resolve) => setTimeout(resolve, 20)); // Events are recorded in the background
    expect(
      kube
        .objects()
        .filter((o) => o.kind === "Event" && o.reason === "RolloutStateStartedOver")
        .map((e) => e.message),
    ).toEqual([expect.stringMatching(/starts over \(INC-42\); it was refused: its HMAC does not match/)]);
    stage.stop();
  });

  it("a deleted or emptied state, once one was stored, holds every change instead of starting over, for any leader", async () => {
    const { kube, sync, stage, restart, policy } = await completedWithRevert();
    const files = fleetFiles(["c1", "c2"], policy, () => "1.22");
    // The canary takes the change and fails; before its time limit runs out the state is deleted.
    await sync(files, "b");
    expect((kube.find("KnativeServing", "c1-serving")!.spec as { version: string }).version).toBe("1.22");
    kube.remove("ConfigMap", ROLLOUT_STATE_CONFIGMAP);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const held = await sync(files, "b");
    expect(held.report?.phase).toBe("Refused");
    expect(held.report?.message).toMatch(/it is missing, though knative-fleet stored one/);
    expect(held.report?.message).toMatch(new RegExp(ROLLOUT_START_OVER_ANNOTATION));
    expect(held.result.resources.map((r) => r.action)).toEqual(["unchanged", "waiting"]);
    // A new leader reads the record in the key Secret: held too. So is an emptied or unsealed state.
    restart();
    expect((await sync(files, "b")).report?.phase).toBe("Refused");
    kube.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: "knative-fleet" },
      data: { state: JSON.stringify({ revision: "abc", phase: "Complete" }) },
    });
    restart();
    const legacy = await sync(files, "b");
    expect(legacy.report?.message).toMatch(/holds no sealed state, though knative-fleet stored one/);
    expect(
      kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.metadata.annotations?.[ROLLOUT_REFUSED_ANNOTATION],
    ).toMatch(/holds no sealed state/);
    stage.stop();
  });

  it("a start-over keeps HaltAndRevert: each healthy CR's content is its baseline again, re-derived from Git", async () => {
    const { kube, sync, restart, policy } = await completedWithRevert();
    kube.remove("ConfigMap", ROLLOUT_STATE_CONFIGMAP);
    kube.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: ROLLOUT_STATE_CONFIGMAP,
        namespace: "knative-fleet",
        annotations: { [ROLLOUT_START_OVER_ANNOTATION]: "state lost in a restore" },
      },
    });
    restart();
    expect(
      (
        await sync(
          fleetFiles(["c1", "c2"], policy, () => "1.21"),
          "a",
        )
      ).report?.phase,
    ).toBe("Complete");
    expect(stored(kube)?.crs["KnativeServing knative-fleet/c1-serving"]?.baseline?.commit).toBe("a");
    // A change that fails on the canary halts and goes back to commit a, as before the state was lost.
    await haltsAndRevertsTheCanary(sync, policy);
  });

  /** A canary rollout (c1 first, no soak) of Serving 1.21 on c1 and c2; `syncAt` syncs a version at a commit. */
  const canaryAt121 = () => {
    const hub = setup();
    const policy = { ...POLICY, soak: "0s" };
    return {
      kube: hub.kube,
      restart: hub.restart,
      syncAt: (version = "1.21", commit = "a") =>
        hub.sync(
          fleetFiles(["c1", "c2"], policy, () => version),
          commit,
        ),
    };
  };

  it("refuses an older state of its own put back, while it leads and after a leader change", async () => {
    const { kube, syncAt, restart } = canaryAt121();
    await syncAt();
    const earlier = structuredClone(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data);
    healthy(kube, "c1-serving");
    await syncAt();
    const latest = structuredClone(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data);
    // A replay of the leader's own earlier (validly sealed) state.
    kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data = earlier;
    const { report } = await syncAt();
    expect(report?.phase).toBe("Refused");
    expect(report?.message).toMatch(/not the last state this knative-fleet stored/);
    // A new leader knows nothing this one wrote; the key Secret records the last state stored.
    restart();
    const after = await syncAt("1.22", "b");
    expect(after.report?.phase).toBe("Refused");
    expect(after.report?.message).toMatch(/not the last state this knative-fleet stored/);
    expect(after.result.resources.map((r) => r.action)).toEqual(["waiting", "waiting"]);
    // Put back as it was, the last state is accepted again.
    restart();
    kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data = latest;
    expect((await syncAt()).report?.phase).toBe("Progressing");
  });

  it("a leader that stopped between storing the state and recording it: its successor accepts that state", async () => {
    const { kube, syncAt, restart } = canaryAt121();
    await syncAt();
    const secret = kube.find("Secret", ROLLOUT_KEY_SECRET)!;
    const recorded = structuredClone(secret.data);
    healthy(kube, "c1-serving");
    await syncAt();
    // The newer state is stored; the Secret still records the one before (the leader died in between).
    secret.data = recorded;
    restart();
    const { report, result } = await syncAt();
    expect(report?.phase).not.toBe("Refused");
    expect(result.resources.map((r) => r.action)).toEqual(["unchanged", "unchanged"]); // progress kept
    const stored = (kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data as Record<string, string>).mac;
    const last = (kube.find("Secret", ROLLOUT_KEY_SECRET)!.data as Record<string, string>).last!;
    expect(Buffer.from(last, "base64").toString()).toBe(stored);
  });

  it("accepts a state sealed before the chain (no predecessor) once, then records it", async () => {
    const { kube, syncAt, restart } = canaryAt121();
    await syncAt();
    // What the previous release stored: the HMAC over the binding and the text alone, nothing recorded.
    const configMap = kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!;
    const data = configMap.data as Record<string, string>;
    const key = Buffer.from((kube.find("Secret", ROLLOUT_KEY_SECRET)!.data as { key: string }).key, "base64");
    const binding = `knative-fleet/${ROLLOUT_STATE_CONFIGMAP}\n${REPOSITORY}`;
    configMap.data = {
      state: data.state!,
      mac: createHmac("sha256", key).update(binding).update("\n").update(data.state!).digest("hex"),
    };
    delete (kube.find("Secret", ROLLOUT_KEY_SECRET)!.data as Record<string, string>).last;
    restart();
    expect((await syncAt()).report?.phase).toBe("Progressing");
    expect((kube.find("Secret", ROLLOUT_KEY_SECRET)!.data as Record<string, string>).last).toBeDefined();
  });

  it("starts over from a state an older knative-fleet wrote (no HMAC), canary first", async () => {
    const kube = hubWithKnativeKinds();
    kube.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: "knative-fleet" },
      data: { state: JSON.stringify({ revision: "abc", phase: "Complete", released: {}, lastHealthy: {} }) },
    });
    const { sync, stage } = setup(() => {}, kube);
    const { report, result } = await sync(
      fleetFiles(["c1", "c2"], POLICY, () => "1.21"),
      "a",
    );
    expect(report?.phase).toBe("Progressing");
    expect(result.resources.map((r) => r.action)).toEqual(["create", "waiting"]);
    stage.stop();
  });

  it("reverts from Git: the baseline's commit is read again and must give the same digest", async () => {
    const { kube, sync, stage, policy } = await completedWithRevert();
    // A change the canary never runs: it halts (time limit 0s) and the canary goes back to commit a.
    await haltsAndRevertsTheCanary(sync, policy);
    const c1 = kube.find("KnativeServing", "c1-serving")!;
    expect((c1.spec as { version: string }).version).toBe("1.21");
    expect(c1.metadata.annotations?.["fleet.knative.dev/source-commit"]).toBe("a");
    // Reverted once: the next sync reverts nothing, and its report says nothing of reverts.
    const after = await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(after.report?.phase).toBe("Halted");
    expect(after.report).not.toHaveProperty("reverted");
    stage.stop();
  });

  it("does not revert to content it cannot re-derive, and says so once", async () => {
    const { kube, sync, stage, models, policy } = await completedWithRevert();
    await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    // Commit a now reads differently (as a placement's override would after a relabel).
    models.set(
      "a",
      fleetModel(["c1", "c2"], policy, () => "1.20"),
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    const failures = () =>
      kube.objects().filter((o) => o.kind === "Event" && o.reason === "RolloutRevertFailed");
    const { result, report } = await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect(result.resources.find((r) => r.name === "c1-serving")?.action).toBe("unchanged");
    // A revert that could not be made is no revert.
    expect(report).not.toHaveProperty("reverted");
    expect((kube.find("KnativeServing", "c1-serving")!.spec as { version: string }).version).toBe("1.22");
    await new Promise((resolve) => setTimeout(resolve, 20)); // Events are recorded in the background
    expect(failures().map((e) => e.message)).toEqual([
      expect.stringMatching(
        /cannot go back to a: what commit a gives it today differs from what was healthy/,
      ),
    ]);
    await sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(failures()).toHaveLength(1);
    stage.stop();
  });
});

describe("an upgrade chain through the rollout stage", () => {
  const version = (kube: FakeKube, name: string) =>
    (kube.find("KnativeServing", name)?.spec as { version?: string } | undefined)?.version;

  it("takes 1.20 to 1.23 one minor per rollout, canary first, and a halt reverts exactly one step", async () => {
    const hub = setup();
    const { kube, sync } = hub;
    const policy = { ...POLICY, soak: "0s", timeLimit: "0s", onFailure: "HaltAndRevert" };
    const at = (v: string) => fleetFiles(["c1", "c2"], policy, () => v);
    await sync(at("1.20"), "a");
    healthy(kube, "c1-serving");
    await sync(at("1.20"), "a");
    healthy(kube, "c2-serving");
    expect((await sync(at("1.20"), "a")).report?.phase).toBe("Complete");

    const seen: string[] = [];
    const record = () => seen.push(`${version(kube, "c1-serving")}/${version(kube, "c2-serving")}`);
    // Step 1.21: the canary, then the rest; the rollout completes before 1.22 opens anywhere.
    await sync(at("1.23"), "b");
    record();
    expect(kube.find("KnativeServing", "c1-serving")?.metadata.annotations?.[UPGRADE_TARGET_ANNOTATION]).toBe(
      "1.23",
    );
    healthy(kube, "c1-serving");
    await sync(at("1.23"), "b");
    record();
    healthy(kube, "c2-serving");
    expect((await sync(at("1.23"), "b")).report?.phase).toBe("Complete");
    expect(stored(kube)?.upgrades).toEqual({ "KnativeServing 1.23": "1.21" });
    // Step 1.22 opens on the canary only.
    expect((await sync(at("1.23"), "b")).report).toMatchObject({ phase: "Progressing", wave: "canary" });
    record();
    expect(seen).toEqual(["1.21/1.20", "1.21/1.21", "1.22/1.21"]);
    // The canary never becomes healthy on 1.22: halted, and it goes back to 1.21, not to 1.20.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const halted = await sync(at("1.23"), "b");
    expect(halted.report?.phase).toBe("Halted");
    expect(version(kube, "c1-serving")).toBe("1.21");
    expect(version(kube, "c2-serving")).toBe("1.21");
    expect(stored(kube)?.crs["KnativeServing knative-fleet/c1-serving"]?.baseline?.version).toBe("1.21");
    hub.stage.stop();
  });

  it("without a policy, moves a step once every CR of the chain is Ready on it, and syncs again to see", async () => {
    let due = 0;
    const hub = setup(() => due++);
    const { kube, sync } = hub;
    const at = (v: string) => fleetFiles(["c1", "c2"], undefined, () => v);
    await sync(at("1.21"), "a");
    const installed = (name: string) => {
      healthy(kube, name);
      const cr = kube.find("KnativeServing", name)!;
      (cr.status as Record<string, unknown>).version = version(kube, name);
    };
    installed("c1-serving");
    installed("c2-serving");
    await sync(at("1.23"), "b");
    expect([version(kube, "c1-serving"), version(kube, "c2-serving")]).toEqual(["1.22", "1.22"]);
    // c1 is Ready on 1.22, c2 not yet: no 1.23 anywhere.
    installed("c1-serving");
    const { result } = await sync(at("1.23"), "b");
    expect([version(kube, "c1-serving"), version(kube, "c2-serving")]).toEqual(["1.22", "1.22"]);
    expect(result.upgrades?.map((cr) => cr.step)).toEqual(["1.22", "1.22"]);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(due).toBeGreaterThan(0);
    installed("c2-serving");
    await sync(at("1.23"), "b");
    expect([version(kube, "c1-serving"), version(kube, "c2-serving")]).toEqual(["1.23", "1.23"]);
    hub.stage.stop();
  });
});

describe("the rollout stage asks the spokes", () => {
  it("a verification gate failing on the Ready canary halts the rollout with the gate's result, and says what it cost", async () => {
    const probe = createServer((req, res) => {
      res.statusCode = req.url === "/c1" ? 503 : 200;
      res.end();
    });
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const { port } = probe.address() as AddressInfo;
    const { logger: log, lines } = capturingLogger();
    const hub = setup(undefined, undefined, { log, prometheusUrl: "http://127.0.0.1:1" });
    const gates = [
      {
        name: "probe",
        waves: ["canary"],
        http: {
          url: `http://127.0.0.1:${port}/{{ .cluster.name }}`,
          successes: 1,
          maxLatency: "1s",
          timeout: "2s",
        },
      },
    ];
    const files = fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s", timeLimit: "0s", gates }, () => "1.21");
    try {
      await hub.sync(files, "a");
      // Nothing Ready on a change yet: no gate is checked.
      expect(lines().filter((line) => line.msg === "verification gates evaluated")).toEqual([]);
      healthy(hub.kube, "c1-serving");
      await hub.sync(files, "a");
      await new Promise((resolve) => setTimeout(resolve, 5));
      const { report } = await hub.sync(files, "a");
      expect(report?.phase).toBe("Halted");
      expect(report?.halt?.reason).toMatch(new RegExp(`^gate probe: GET http://127.0.0.1:${port}/c1: .*503`));
      expect(hub.kube.find("KnativeServing", "c2-serving")).toBeUndefined();
      const checks = lines().filter((line) => line.msg === "verification gates evaluated");
      expect(checks[0]).toMatchObject({
        crs: 1,
        requests: 1,
        failing: { "KnativeServing knative-fleet/c1-serving": expect.stringContaining("gate probe") },
      });
    } finally {
      hub.stage.stop();
      probe.closeAllConnections();
      await new Promise((resolve) => probe.close(resolve));
    }
  });

  it("a cluster the preflight finds unready waits with its error findings; warnings hold nothing", async () => {
    const asked: string[] = [];
    const preflight: Preflight = {
      async check(cluster, desired) {
        asked.push(`${cluster?.name}:${desired.spec.version}`);
        return cluster?.name === "c1"
          ? {
              passed: false,
              findings: [
                { severity: "error", reason: "GatewayAPIMissing", message: "no Gateway API CRDs" },
                { severity: "error", reason: "CertManagerMissing", message: "no cert-manager" },
                {
                  severity: "warning",
                  reason: "KnativeVersionEndOfSupport",
                  message: "1.21 is out of support",
                },
              ],
            }
          : {
              passed: true,
              findings: [{ severity: "warning", reason: "KnativeVersionEndOfSupport", message: "old" }],
            };
      },
      forget() {},
    };
    const hub = setup(undefined, undefined, { preflight });
    const files = fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s" }, () => "1.21");
    await hub.sync(files, "a");
    expect(asked.sort()).toEqual(["c1:1.21", "c2:1.21"]);
    // c1 (the canary) is not ready: its wave goes on without it, and c2 is created.
    expect(hub.kube.find("KnativeServing", "c1-serving")).toBeUndefined();
    healthy(hub.kube, "c2-serving");
    const { result } = await hub.sync(files, "a");
    expect(hub.kube.find("KnativeServing", "c2-serving")).toBeDefined();
    expect(result.resources.find((r) => r.name === "c1-serving")).toMatchObject({
      action: "waiting",
      reason:
        "rollout of a: its cluster is not ready for it: GatewayAPIMissing: no Gateway API CRDs; CertManagerMissing: no cert-manager",
    });
    hub.stage.stop();
  });

  it("looks again after the check interval while a rollout runs or a chain has a step to go, and not when all is done", async () => {
    let due = 0;
    const hub = setup(() => due++);
    const dueAfter = async () => {
      due = 0;
      await new Promise((resolve) => setTimeout(resolve, 40));
      return due;
    };
    const policy = { ...POLICY, soak: "0s" };
    const at = (version: string, rollout?: Record<string, unknown>) =>
      fleetFiles(["c1"], rollout, () => version);
    await hub.sync(at("1.21"), "a");
    expect(await dueAfter()).toBe(0); // no policy, no chain
    /** Syncs `version` until the rollout is complete, the CR made healthy on what it has each time. */
    const complete = async (version: string, commit: string) => {
      for (let attempt = 0; attempt < 5; attempt++) {
        healthy(hub.kube, "c1-serving");
        const { report } = await hub.sync(at(version, policy), commit);
        if (report?.phase === "Complete") return report;
      }
      throw new Error("the rollout did not complete");
    };
    await complete("1.21", "b");
    expect(await dueAfter()).toBe(0); // complete, nothing to go
    await hub.sync(at("1.23", policy), "c");
    expect(await dueAfter()).toBeGreaterThan(0); // a rollout runs (step 1.22)
    await complete("1.23", "c");
    expect((hub.kube.find("KnativeServing", "c1-serving")!.spec as { version: string }).version).toBe("1.22");
    expect(await dueAfter()).toBeGreaterThan(0); // step 1.22 done: 1.23 opens at the next check
    hub.stage.stop();
  });
});
