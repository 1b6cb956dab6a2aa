import { randomBytes } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { ROLLOUT_REFUSED_ANNOTATION, ROLLOUT_START_OVER_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import {
  CONFIGMAP_DATA_LIMIT,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_STATE_CONFIGMAP,
  ROLLOUT_STATE_MAC_KEY,
  type RolloutState,
  sealedBytes,
  sealState,
  stateBinding,
  stateText,
} from "../../../src/rollout/state.ts";
import { SealedStateStore } from "../../../src/rollout/state-store.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { macOf } from "./state-fleet.ts";
import { hubWithKnativeKinds, REPOSITORY } from "./support.ts";

// What an operator reads of the rollout state's store (state-store.ts), and what the store leaves on the hub:
// the words of its refusals and start-overs in the log and in Events, the annotations a start-over takes
// off, a refusal noted once, the exact size a ConfigMap holds, a write that fails.

const NAMESPACE = "knative-fleet";
const binding = stateBinding(NAMESPACE, REPOSITORY);

const HMAC_REFUSAL = "its HMAC does not match: it was not written by this knative-fleet for this repository";
const CHANGED_REFUSAL = "it changed since this leader wrote it (an older state put back?)";
const OLDER_RELEASE = "the rollout state was written by an older knative-fleet; the rollout starts over";

const state = (commit: string, reason?: string): RolloutState => ({
  schema: 2,
  phase: reason === undefined ? "Progressing" : "Halted",
  commit,
  startedAt: "2026-03-02T15:00:00.000Z",
  waves: {},
  crs: {},
  ...(reason !== undefined && {
    halt: {
      wave: "canary",
      waveIndex: 0,
      resource: "KnativeServing knative-fleet/c1-serving",
      cluster: "fleet-system/c1",
      hash: "ab",
      commit,
      reason,
      at: "2026-03-02T15:10:00.000Z",
    },
  }),
});

/** A hub, a log and the Events recorded on it, and a new leader's store (nothing in memory) on each call. */
function hub() {
  const kube = hubWithKnativeKinds();
  const { logger, lines } = capturingLogger();
  const events = new EventRecorder({ client: kube.client, component: "test", log: logger });
  const recorded = vi.spyOn(events, "record");
  const leader = () =>
    new SealedStateStore({
      hub: kube.client,
      namespace: NAMESPACE,
      keyNamespace: NAMESPACE,
      repository: REPOSITORY,
      events,
      log: logger,
    });
  return {
    kube,
    leader,
    /** The state ConfigMap as the stage reads it. */
    configMap: () => structuredClone(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)),
    /** The log's lines of `level` (pino's: 30 info, 40 warn, 50 error), without pino's own fields. */
    logged: (level: number) =>
      lines()
        .filter((l) => l.level === level)
        .map(({ time: _t, pid: _p, hostname: _h, level: _l, ...rest }) => rest),
    /** The messages of the Events recorded for `reason`. */
    eventMessages: (reason: string) =>
      recorded.mock.calls.filter(([, , r]) => r === reason).map(([, , , message]) => message),
    recorded,
  };
}

const keyOf = (kube: FakeKube) =>
  Buffer.from((kube.find("Secret", ROLLOUT_KEY_SECRET)!.data as { key: string }).key, "base64");

/** Puts the state ConfigMap holding `data` (and `annotations`), as a person or another writer would. */
function putState(kube: FakeKube, data: Record<string, string>, annotations?: Record<string, string>): void {
  kube.put({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: NAMESPACE, ...(annotations && { annotations }) },
    data,
  });
}

/** A state sealed with a key that is not the hub's: someone without the key wrote it. */
const forged = (commit: string) => sealState(state(commit), randomBytes(32), binding, "");

const annotationsOf = (configMap: KubeObject | undefined) => configMap?.metadata.annotations ?? {};

describe("a refused rollout state, as an operator reads it", () => {
  it("is logged and recorded as an Event on the state ConfigMap once per refused content, with what to do", async () => {
    const { kube, leader, configMap, logged, eventMessages, recorded } = hub();
    const store = leader();
    expect(await store.open(undefined)).toMatchObject({ kind: "ready" }); // makes the key
    putState(kube, forged("c-1"));
    expect(await store.open(configMap())).toEqual({ kind: "refused", reason: HMAC_REFUSAL });
    const refusedLine = { reason: HMAC_REFUSAL, msg: "the rollout state is refused; every change waits" };
    expect(logged(50)).toEqual([refusedLine]);
    const refusedEvent =
      `the rollout state is refused: ${HMAC_REFUSAL}; every change waits until a person starts it over ` +
      `(annotation ${ROLLOUT_START_OVER_ANNOTATION})`;
    expect(eventMessages("RolloutStateRefused")).toEqual([refusedEvent]);
    // The Event is the state ConfigMap's: `kubectl describe configmap` lists it.
    expect(recorded.mock.calls[0]!.slice(0, 2)).toEqual([
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: NAMESPACE },
      },
      "Warning",
    ]);
    expect(annotationsOf(configMap())[ROLLOUT_REFUSED_ANNOTATION]).toBe(HMAC_REFUSAL);

    // The same content again: no second log line nor Event, and the mark on the ConfigMap is not rewritten.
    const patch = vi.spyOn(kube.client, "mergePatch");
    expect(await store.open(configMap())).toEqual({ kind: "refused", reason: HMAC_REFUSAL });
    expect(logged(50)).toEqual([refusedLine]);
    expect(eventMessages("RolloutStateRefused")).toEqual([refusedEvent]);
    expect(patch).not.toHaveBeenCalled();

    // Another refused content is another refusal, said again.
    putState(kube, forged("c-2"), annotationsOf(configMap()));
    expect(await store.open(configMap())).toEqual({ kind: "refused", reason: HMAC_REFUSAL });
    expect(logged(50)).toEqual([refusedLine, refusedLine]);
    expect(eventMessages("RolloutStateRefused")).toEqual([refusedEvent, refusedEvent]);
    expect(logged(40)).toEqual([]);
  });

  it("a missing state, once one was stored, is refused without a write to the ConfigMap that is not there", async () => {
    const { kube, leader, logged } = hub();
    const store = leader();
    await store.open(undefined);
    await store.store(state("c-1"), stateText(state("c-1")));
    kube.remove("ConfigMap", ROLLOUT_STATE_CONFIGMAP);
    const patch = vi.spyOn(kube.client, "mergePatch");
    const reason = "it is missing, though knative-fleet stored one (deleted?)";
    expect(await store.open(undefined)).toEqual({ kind: "refused", reason });
    expect(patch).not.toHaveBeenCalled();
    expect(logged(50)).toEqual([{ reason, msg: "the rollout state is refused; every change waits" }]);
    expect(logged(40)).toEqual([]); // no failed attempt to mark a ConfigMap that does not exist
  });

  it("a refusal that cannot be marked on the ConfigMap is logged, and the state still refused", async () => {
    const { kube, leader, configMap, logged, eventMessages } = hub();
    const store = leader();
    await store.open(undefined);
    putState(kube, forged("c-1"));
    vi.spyOn(kube.client, "mergePatch").mockRejectedValue(new Error("configmaps is forbidden"));
    expect(await store.open(configMap())).toEqual({ kind: "refused", reason: HMAC_REFUSAL });
    expect(logged(40)).toEqual([
      { err: "Error: configmaps is forbidden", msg: "cannot mark the rollout state as refused" },
    ]);
    expect(eventMessages("RolloutStateRefused")).toHaveLength(1);
  });

  it("a state another leader stored after this one's is refused: it changed since this leader wrote it", async () => {
    const { leader, configMap, eventMessages } = hub();
    const first = leader();
    await first.open(undefined);
    await first.store(state("c-1"), stateText(state("c-1")));
    // A second leader at once (a split brain): it reads that state and stores the next one, validly sealed.
    const second = leader();
    expect(await second.open(configMap())).toMatchObject({ kind: "ready", state: state("c-1") });
    await second.store(state("c-2"), stateText(state("c-2")));
    expect(await first.open(configMap())).toEqual({ kind: "refused", reason: CHANGED_REFUSAL });
    expect(eventMessages("RolloutStateRefused")).toEqual([
      expect.stringContaining(`the rollout state is refused: ${CHANGED_REFUSAL}; every change waits`),
    ]);
  });

  it("a leader that only read the state vouches for it too: another leader's next state is refused", async () => {
    const { leader, configMap } = hub();
    const writer = leader();
    await writer.open(undefined);
    await writer.store(state("c-1"), stateText(state("c-1")));
    const reader = leader();
    expect(await reader.open(configMap())).toMatchObject({ kind: "ready", state: state("c-1") });
    expect(await writer.open(configMap())).toMatchObject({ kind: "ready", state: state("c-1") });
    await writer.store(state("c-2"), stateText(state("c-2")));
    expect(await reader.open(configMap())).toEqual({ kind: "refused", reason: CHANGED_REFUSAL });
  });
});

describe("a start-over a person asks for", () => {
  /** A refused (forged) state on a hub with a key, its refusal marked; then annotated to start over. */
  async function refusedThenStartedOver(why: string) {
    const h = hub();
    const store = h.leader();
    await store.open(undefined);
    putState(h.kube, forged("c-1"));
    expect(await store.open(h.configMap())).toMatchObject({ kind: "refused" });
    expect(annotationsOf(h.configMap())[ROLLOUT_REFUSED_ANNOTATION]).toBe(HMAC_REFUSAL);
    const cm = h.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!;
    cm.metadata.annotations = { ...cm.metadata.annotations, [ROLLOUT_START_OVER_ANNOTATION]: why };
    const opened = await store.open(h.configMap());
    return { ...h, store, opened };
  }

  it("is said in the log and an Event, and acted on once: both annotations are taken off at once", async () => {
    const { store, opened, configMap, logged, eventMessages } = await refusedThenStartedOver("INC-42");
    expect(opened).toEqual({ kind: "ready", state: undefined, text: undefined, startedOver: "INC-42" });
    // Taken off by the start-over itself, before any state is stored (a state written later is applied
    // under its own field manager, which leaves a person's annotations alone).
    const annotations = annotationsOf(configMap());
    expect(annotations).not.toHaveProperty(ROLLOUT_START_OVER_ANNOTATION);
    expect(annotations).not.toHaveProperty(ROLLOUT_REFUSED_ANNOTATION);
    expect(logged(40)).toEqual([
      { refusal: HMAC_REFUSAL, why: "INC-42", msg: "the rollout state starts over, as a person asked" },
    ]);
    expect(eventMessages("RolloutStateStartedOver")).toEqual([
      `the rollout state starts over (INC-42); it was refused: ${HMAC_REFUSAL}`,
    ]);
    // Read again before a state is stored: the forged state is refused again, not started over again.
    expect(await store.open(configMap())).toEqual({ kind: "refused", reason: HMAC_REFUSAL });
    expect(eventMessages("RolloutStateStartedOver")).toHaveLength(1);
  });

  it("with an empty annotation, says that no reason was given", async () => {
    const { opened, eventMessages } = await refusedThenStartedOver("");
    expect(opened).toEqual({ kind: "ready", state: undefined, text: undefined, startedOver: "" });
    expect(eventMessages("RolloutStateStartedOver")).toEqual([
      `the rollout state starts over (no reason given); it was refused: ${HMAC_REFUSAL}`,
    ]);
  });
});

describe("a state of an older knative-fleet", () => {
  it("unsealed, on a hub that never stored one: the rollout starts over, and the log says why", async () => {
    const { kube, leader, configMap, logged } = hub();
    const store = leader();
    putState(kube, { state: JSON.stringify({ revision: "abc", phase: "Complete" }) });
    expect(await store.open(configMap())).toEqual({ kind: "ready", state: undefined, text: undefined });
    expect(logged(30)).toEqual([{ msg: OLDER_RELEASE }]);
  });

  it("is not what the log says of a hub with no state, nor of a state of this release", async () => {
    const { leader, configMap, logged } = hub();
    const store = leader();
    expect(await store.open(undefined)).toEqual({ kind: "ready", state: undefined, text: undefined });
    await store.store(state("c-1"), stateText(state("c-1")));
    expect(await leader().open(configMap())).toMatchObject({ kind: "ready", state: state("c-1") });
    expect(logged(30)).toEqual([]);
  });

  it("sealed by this knative-fleet in a format it cannot read, after a state it stored: it starts over", async () => {
    const { kube, leader, configMap, logged } = hub();
    const store = leader();
    await store.open(undefined);
    await store.store(state("c-1"), stateText(state("c-1")));
    const last = (configMap()!.data as Record<string, string>)[ROLLOUT_STATE_MAC_KEY]!;
    // What another release of knative-fleet stored next, with the same key and chain.
    const text = JSON.stringify({ ...state("c-2"), schema: 99 });
    putState(kube, { state: text, previous: last, mac: macOf(keyOf(kube), binding, text, last) });
    expect(await store.open(configMap())).toEqual({ kind: "ready", state: undefined, text: undefined });
    expect(logged(30)).toEqual([{ msg: OLDER_RELEASE }]);
    expect(annotationsOf(configMap())).not.toHaveProperty(ROLLOUT_REFUSED_ANNOTATION);
    // So does a new leader, which reads the last state recorded from the key Secret.
    expect(await leader().open(configMap())).toEqual({ kind: "ready", state: undefined, text: undefined });
    expect(logged(50)).toEqual([]);
    // This leader still knows what it wrote: a state another leader stored meanwhile is not its own.
    const other = leader();
    await other.open(configMap());
    await other.store(state("c-3"), stateText(state("c-3")));
    expect(await store.open(configMap())).toEqual({ kind: "refused", reason: CHANGED_REFUSAL });
  });
});

describe("the last state recorded in the key Secret", () => {
  it("a state the key Secret cannot record is not acted on: the error says so, and it is taken once it can", async () => {
    const { kube, leader, configMap } = hub();
    const store = leader();
    await store.open(undefined);
    await store.store(state("c-1"), stateText(state("c-1")));
    const recorded = structuredClone(kube.find("Secret", ROLLOUT_KEY_SECRET)!.data);
    await store.store(state("c-2"), stateText(state("c-2")));
    // The leader stopped between storing c-2 and recording it.
    kube.find("Secret", ROLLOUT_KEY_SECRET)!.data = recorded;
    const { mergePatch } = kube.client;
    const patch = vi
      .spyOn(kube.client, "mergePatch")
      .mockImplementation((apiVersion, kind, ...rest) =>
        kind === "Secret"
          ? Promise.reject(new Error("secrets is forbidden"))
          : mergePatch.call(kube.client, apiVersion, kind, ...rest),
      );
    const next = leader();
    expect(await next.open(configMap())).toEqual({
      kind: "error",
      reason: "the last state cannot be recorded (Error: secrets is forbidden)",
    });
    patch.mockRestore();
    expect(await next.open(configMap())).toMatchObject({ kind: "ready", state: state("c-2") });
  });

  it("the first state stored on a hub names no predecessor", async () => {
    const { kube, leader, configMap } = hub();
    const store = leader();
    await store.open(undefined);
    await store.store(state("c-1"), stateText(state("c-1")));
    expect(configMap()!.data).toEqual(sealState(state("c-1"), keyOf(kube), binding, ""));
  });
});

describe("the size a ConfigMap holds", () => {
  /**
   * A halted state whose sealed data after `previous` takes exactly `bytes`: its halt's reason grows it a
   * byte a character (past 32 KiB, as the state is then stored in its packed form, whose CRs take the same).
   */
  function stateOfSize(key: Uint8Array, previous: string, bytes: number): RolloutState {
    const reason = "x".repeat(64 * 1024);
    const size = (s: RolloutState) => sealedBytes(sealState(s, key, binding, previous));
    const sized = state("c-2", reason + "x".repeat(bytes - size(state("c-2", reason))));
    expect(size(sized)).toBe(bytes);
    return sized;
  }

  it("a state of exactly the limit is written; one byte more is not, and the error says what waits", async () => {
    const { kube, leader, configMap } = hub();
    const store = leader();
    await store.open(undefined);
    await store.store(state("c-1"), stateText(state("c-1")));
    const key = keyOf(kube);
    const previous = (configMap()!.data as Record<string, string>)[ROLLOUT_STATE_MAC_KEY]!;
    const tooBig = stateOfSize(key, previous, CONFIGMAP_DATA_LIMIT + 1);
    await expect(store.store(tooBig, stateText(tooBig))).rejects.toThrow(
      new Error(
        `the rollout state of 0 CRs takes ${CONFIGMAP_DATA_LIMIT + 1} bytes sealed, more than the ` +
          `${CONFIGMAP_DATA_LIMIT} a ConfigMap holds: it cannot be stored, and the changes it would let ` +
          "through wait (docs/scale.md, the rollout state)",
      ),
    );
    expect(configMap()!.data).toEqual(sealState(state("c-1"), key, binding, ""));
    const atLimit = stateOfSize(key, previous, CONFIGMAP_DATA_LIMIT);
    await store.store(atLimit, stateText(atLimit));
    expect(configMap()!.data).toEqual(sealState(atLimit, key, binding, previous));
  });
});

describe("a refused key", () => {
  it("is logged with its reason once", async () => {
    const { kube, leader, logged, eventMessages } = hub();
    kube.put({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: ROLLOUT_KEY_SECRET, namespace: NAMESPACE },
      data: { key: randomBytes(32).toString("base64") },
    });
    const store = leader();
    const opened = await store.open(undefined);
    expect(opened).toMatchObject({ kind: "keyRefused" });
    const reason = (opened as { reason: string }).reason;
    expect(reason).toMatch(/was not made by knative-fleet/);
    await store.open(undefined);
    expect(logged(50)).toEqual([{ reason, msg: "the rollout key is refused; every change waits" }]);
    expect(eventMessages("RolloutKeyRefused")).toEqual([reason]);
  });
});
