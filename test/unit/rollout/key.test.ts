import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import {
  ADOPT_ROLLOUT_KEY_ANNOTATION,
  ROLLOUT_KEY_MARK_ANNOTATION,
  ROLLOUT_START_OVER_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import {
  openState,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_STATE_CONFIGMAP,
  stateBinding,
} from "../../../src/rollout/state.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { syncInto } from "../../support/sync.ts";
import { cluster, fleetFiles, hubWithKnativeKinds, REPOSITORY, stageOn } from "./support.ts";

// The rollout state's key (issue #43): who may read it can seal states knative-fleet obeys. It may live in a
// namespace of its own, and a key Secret knative-fleet did not make is not used until a person adopts it.

const POLICY = {
  waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
  soak: "0s",
};
const FILES = fleetFiles(["c1", "c2"], POLICY, () => "1.21");
const KEYS = "knative-fleet-keys";

function setup(keyNamespace?: string) {
  const kube = hubWithKnativeKinds();
  const logged: { msg: string; why?: string }[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => logged.push(JSON.parse(line)) });
  const newStage = () =>
    stageOn(kube, {
      ...(keyNamespace && { keyNamespace }),
      inventory: () => [cluster("c1"), cluster("c2")],
      log,
      checkIntervalMs: 60_000,
    });
  let stage = newStage();
  const sync = async (files: FleetFile[] = FILES, commit = "a") => {
    const result = await syncInto(kube.client, {
      files,
      namespace: "knative-fleet",
      commit,
      repository: REPOSITORY,
      rollout: stage,
    });
    return { actions: result.resources.map((r) => [r.name, r.action]), report: result.rollout };
  };
  /** A new leader: nothing in memory but what it reads from the hub. */
  const restart = () => {
    stage.stop();
    stage = newStage();
  };
  const secrets = (namespace: string) =>
    kube.objects().filter((o) => o.kind === "Secret" && o.metadata.namespace === namespace);
  const events = async (reason: string) => {
    await new Promise((resolve) => setTimeout(resolve, 20)); // Events are recorded in the background
    return kube
      .objects()
      .filter((o) => o.kind === "Event" && o.reason === reason)
      .map((e) => e.message);
  };
  return {
    kube,
    sync,
    restart,
    secrets,
    events,
    logged,
    stop: () => stage.stop(),
  };
}

/** A key Secret someone else wrote (with `kubectl create secret`, say): a real write, so it has a uid. */
async function precreate(kube: FakeKube, namespace: string, annotations?: Record<string, string>) {
  const key = randomBytes(32);
  await kube.client.apply({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: ROLLOUT_KEY_SECRET, namespace, ...(annotations && { annotations }) },
    data: { key: key.toString("base64") },
  });
  return key;
}

const keyOf = (secret: KubeObject) => Buffer.from((secret.data as { key: string }).key, "base64");

/** Whether the stored state is sealed under `key` (and is the last one the key Secret records). */
function sealedUnder(kube: FakeKube, key: Uint8Array, last?: string): boolean {
  const data = kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)?.data as Record<string, string>;
  return openState(data, key, stateBinding("knative-fleet", REPOSITORY), last).kind === "valid";
}

const lastOf = (secret: KubeObject) =>
  Buffer.from((secret.data as { last: string }).last, "base64").toString("utf8");

describe("the rollout state's key Secret", () => {
  it("makes the key and marks it with the Secret's uid; a new leader uses it as it is", async () => {
    const hub = setup();
    expect((await hub.sync()).actions).toEqual([
      ["c1-serving", "create"],
      ["c2-serving", "waiting"],
    ]);
    const [secret] = hub.secrets("knative-fleet");
    expect(secret!.metadata.annotations).toEqual({ [ROLLOUT_KEY_MARK_ANNOTATION]: secret!.metadata.uid });
    expect(keyOf(secret!)).toHaveLength(32);
    hub.restart();
    expect((await hub.sync()).report?.phase).toBe("Progressing");
    expect(sealedUnder(hub.kube, keyOf(hub.secrets("knative-fleet")[0]!), lastOf(secret!))).toBe(true);
    expect(await hub.events("RolloutKeyRefused")).toEqual([]);
    hub.stop();
  });

  it("refuses a key Secret made beforehand by someone else: every change waits, and it says why, once", async () => {
    const hub = setup();
    const planted = await precreate(hub.kube, "knative-fleet");
    const { actions, report } = await hub.sync();
    expect(actions).toEqual([
      ["c1-serving", "waiting"],
      ["c2-serving", "waiting"],
    ]);
    expect(report).toMatchObject({ phase: "Refused", waiting: 2 });
    expect(report?.message).toBe(
      "the rollout key Secret knative-fleet/knative-fleet-rollout-key was not made by knative-fleet (made " +
        `beforehand, copied or restored?): annotate it ${ADOPT_ROLLOUT_KEY_ANNOTATION}=<why> to use it as the ` +
        "key, or delete it; every change waits",
    );
    // Nothing was sealed with the planted key, and the Secret is left as it was found.
    expect(hub.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)).toBeUndefined();
    const [secret] = hub.secrets("knative-fleet");
    expect(keyOf(secret!)).toEqual(planted);
    expect(secret!.metadata.annotations).toBeUndefined();
    expect((await hub.sync()).report?.phase).toBe("Refused");
    expect(await hub.events("RolloutKeyRefused")).toEqual([
      report?.message?.replace(/; every change waits$/, ""),
    ]);
    expect(hub.logged.filter((l) => l.msg === "the rollout key is refused; every change waits")).toHaveLength(
      1,
    );
    hub.stop();
  });

  it("refuses a copy of a marked key Secret (its mark names another uid), and one with no uid", async () => {
    const hub = setup();
    await precreate(hub.kube, "knative-fleet", { [ROLLOUT_KEY_MARK_ANNOTATION]: "uid-of-the-original" });
    expect((await hub.sync()).report?.phase).toBe("Refused");
    hub.kube.put({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: ROLLOUT_KEY_SECRET, namespace: "knative-fleet" },
      data: { key: randomBytes(32).toString("base64") },
    });
    hub.restart();
    expect((await hub.sync()).report?.message).toMatch(/was not made by knative-fleet/);
    hub.stop();
  });

  it("uses a key Secret a person adopted: logged, an Event, marked, and the annotation taken off", async () => {
    const hub = setup();
    const planted = await precreate(hub.kube, "knative-fleet");
    expect((await hub.sync()).report?.phase).toBe("Refused");
    const secret = hub.secrets("knative-fleet")[0]!;
    secret.metadata.annotations = { [ADOPT_ROLLOUT_KEY_ANNOTATION]: "INC-7: the key restored from backup" };
    expect((await hub.sync()).actions).toEqual([
      ["c1-serving", "create"],
      ["c2-serving", "waiting"],
    ]);
    const adopted = hub.secrets("knative-fleet")[0]!;
    expect(adopted.metadata.annotations).toEqual({ [ROLLOUT_KEY_MARK_ANNOTATION]: adopted.metadata.uid });
    expect(sealedUnder(hub.kube, planted, lastOf(adopted))).toBe(true);
    expect(await hub.events("RolloutKeyAdopted")).toEqual([
      "the rollout key Secret knative-fleet/knative-fleet-rollout-key, which knative-fleet did not make, is " +
        "adopted (INC-7: the key restored from backup)",
    ]);
    expect(
      hub.logged.filter(
        (l) =>
          l.msg === "a rollout key Secret knative-fleet did not make is adopted, as a person asked" &&
          l.why === "INC-7: the key restored from backup",
      ),
    ).toHaveLength(1);
    // A new leader takes the adopted Secret as knative-fleet's own.
    hub.restart();
    expect((await hub.sync()).report?.phase).toBe("Progressing");
    expect(await hub.events("RolloutKeyAdopted")).toHaveLength(1);
    hub.stop();
  });

  it("an adoption without a reason says so; a key shorter than 16 bytes is not used", async () => {
    const hub = setup();
    await hub.kube.client.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: ROLLOUT_KEY_SECRET,
        namespace: "knative-fleet",
        annotations: { [ADOPT_ROLLOUT_KEY_ANNOTATION]: "" },
      },
      data: { key: randomBytes(15).toString("base64") },
    });
    const { report, actions } = await hub.sync();
    expect(report).toMatchObject({ phase: "Waiting" });
    expect(report?.message).toBe(
      "the rollout state's key cannot be read (Secret knative-fleet/knative-fleet-rollout-key has no key of " +
        "at least 16 bytes); changes wait for it",
    );
    expect(actions.map(([, action]) => action)).toEqual(["waiting", "waiting"]);
    expect(await hub.events("RolloutKeyAdopted")).toEqual([
      expect.stringMatching(/is adopted \(no reason given\)$/),
    ]);
    hub.stop();
  });

  it("with rollout.keyNamespace, makes, reads and records the key there and never in the service's namespace", async () => {
    const hub = setup(KEYS);
    // A key planted in the service's namespace, marked and all, is not even read.
    const planted = await precreate(hub.kube, "knative-fleet");
    const forged = hub.secrets("knative-fleet")[0]!;
    forged.metadata.annotations = { [ROLLOUT_KEY_MARK_ANNOTATION]: String(forged.metadata.uid) };
    await hub.sync();
    const [secret] = hub.secrets(KEYS);
    expect(secret!.metadata.annotations).toEqual({ [ROLLOUT_KEY_MARK_ANNOTATION]: secret!.metadata.uid });
    expect(sealedUnder(hub.kube, keyOf(secret!), lastOf(secret!))).toBe(true);
    expect(sealedUnder(hub.kube, planted)).toBe(false);
    expect(hub.secrets("knative-fleet")).toEqual([forged]);
    hub.restart();
    hub.kube.find("KnativeServing", "c1-serving")!.status = {
      observedGeneration: 1,
      conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
    };
    expect((await hub.sync()).actions).toEqual([
      ["c1-serving", "unchanged"],
      ["c2-serving", "create"],
    ]);
    const [after] = hub.secrets(KEYS);
    expect(lastOf(after!)).not.toBe(lastOf(secret!)); // the chain recorded where the key is
    expect(sealedUnder(hub.kube, keyOf(after!), lastOf(after!))).toBe(true);
    expect(hub.secrets("knative-fleet")).toEqual([forged]);
    hub.stop();
  });
});

describe("moving the key to rollout.keyNamespace", () => {
  /** A rollout under way with the key beside the state, then a leader configured with a key namespace. */
  async function movedLeader() {
    const before = setup();
    await before.sync();
    before.stop();
    const after = setup(KEYS);
    for (const object of before.kube.objects()) after.kube.put(structuredClone(object));
    return { after, old: before.secrets("knative-fleet")[0]! };
  }

  it("does not make a new key while the state is sealed: it waits for the old key, moved and adopted", async () => {
    const { after, old } = await movedLeader();
    const held = await after.sync();
    expect(held.report?.phase).toBe("Refused");
    expect(held.report?.message).toBe(
      `there is no rollout key Secret ${KEYS}/knative-fleet-rollout-key, though the state ConfigMap holds a ` +
        "sealed state (the key deleted, or moved by rollout.keyNamespace?): put the key Secret there and " +
        `annotate it ${ADOPT_ROLLOUT_KEY_ANNOTATION}=<why>, or annotate the state ConfigMap ` +
        `${ROLLOUT_START_OVER_ANNOTATION}=<why> to start over with a new key; every change waits`,
    );
    expect(held.actions).toEqual([
      ["c1-serving", "unchanged"],
      ["c2-serving", "waiting"],
    ]);
    expect(after.secrets(KEYS)).toEqual([]);
    // A copy keeps the old uid in its mark: adopted, it carries the chain on (no start-over).
    await after.kube.client.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: ROLLOUT_KEY_SECRET,
        namespace: KEYS,
        annotations: {
          ...old.metadata.annotations,
          [ADOPT_ROLLOUT_KEY_ANNOTATION]: "moved to its namespace",
        },
      },
      data: old.data as Record<string, string>,
    });
    expect((await after.sync()).report?.phase).toBe("Progressing");
    expect(await after.events("RolloutStateStartedOver")).toEqual([]);
    expect(sealedUnder(after.kube, keyOf(old), lastOf(old))).toBe(true);
    after.stop();
  });

  it("or starts over with a new key, when a person asks on the state ConfigMap", async () => {
    const { after, old } = await movedLeader();
    const configMap = after.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!;
    configMap.metadata.annotations = { [ROLLOUT_START_OVER_ANNOTATION]: "new key namespace" };
    const { report } = await after.sync();
    expect(report?.phase).toBe("Progressing");
    const [made] = after.secrets(KEYS);
    expect(keyOf(made!)).not.toEqual(keyOf(old));
    expect(made!.metadata.annotations).toEqual({ [ROLLOUT_KEY_MARK_ANNOTATION]: made!.metadata.uid });
    expect(await after.events("RolloutStateStartedOver")).toEqual([
      expect.stringMatching(/starts over \(new key namespace\); it was refused: its HMAC does not match/),
    ]);
    after.stop();
  });
});
