import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  openState,
  peekRolloutState,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_STATE_CONFIGMAP,
  ROLLOUT_STATE_MAC_KEY,
  ROLLOUT_STATE_PREVIOUS_KEY,
  type RolloutState,
  RolloutStateSchema,
  sealState,
  stateBinding,
  stateText,
} from "../../../src/rollout/state.ts";
import { SealedStateStore } from "../../../src/rollout/state-store.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { syncInto } from "../../support/sync.ts";
import { macOf, midRolloutState, sealedByPreviousRelease } from "./state-fleet.ts";
import { cluster, fleetFiles, hubWithKnativeKinds, REPOSITORY, stageOn } from "./support.ts";

// A big rollout state is stored with its CRs packed (state.ts, storedText): the state the code works with is
// the same, a state stored by the previous release (its JSON) still reads, an unchanged state is still not
// rewritten, and the seal keeps every guarantee it gave the JSON.

const key = randomBytes(32);
const binding = stateBinding("knative-fleet", REPOSITORY);

const packed = (data: Record<string, string>) => "packedCrs" in JSON.parse(data.state!);

/** A state of `n` CRs mid-rollout, its commit `commit`: big enough to be packed from 40 CRs on. */
const stateAt = (commit: string, n = 200): RolloutState => ({ ...midRolloutState(n), commit });

describe("the rollout state's stored form", () => {
  const hash = fc.oneof(
    fc.constantFrom("ab", "0123456789abcdef0123456789abcdef"),
    fc.stringMatching(/^[0-9a-f]{1,64}$/),
  );
  const commit = fc.oneof(
    fc.constantFrom("", "a", "0".repeat(40)),
    fc.stringMatching(/^[0-9A-Za-z._-]{1,64}$/),
  );
  const time = fc
    .date({ min: new Date("2020-01-01"), max: new Date("2030-01-01"), noInvalidDate: true })
    .map((d) => d.toISOString());
  const content = fc.record(
    { hash, commit, version: fc.constantFrom("1.21", "1.22.3") },
    { requiredKeys: ["hash", "commit"] },
  );
  const label = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?$/);
  const cr = fc
    .tuple(fc.constantFrom("KnativeServing", "KnativeEventing"), label, label)
    .chain(([kind, namespace, name]) =>
      fc
        .record(
          {
            target: content,
            // The cluster is often the end of the CR's name, as a placement names its CRs.
            cluster: fc.record({
              namespace: fc.constantFrom("fleet-system", namespace),
              name: fc.oneof(fc.constant(name), fc.constant(name.slice(-8)), label),
            }),
            baseline: content,
            released: fc.record({ hash, at: time }),
            health: fc.record({ hash, healthy: fc.boolean(), since: time }),
            revertFailed: hash,
          },
          { requiredKeys: [] },
        )
        .map((record) => [`${kind} ${namespace}/${name}`, record] as const),
    );
  const state = fc
    .tuple(
      fc.array(cr, { maxLength: 30 }),
      fc.boolean(),
      fc.constantFrom("Progressing", "Complete", "Halted"),
    )
    .map(([crs, big, phase]) =>
      RolloutStateSchema.parse({
        ...stateAt("c-1", big ? 60 : 0),
        phase,
        crs: { ...(big ? midRolloutState(60).crs : {}), ...Object.fromEntries(crs) },
      }),
    );

  it("reads back every state as it was stored, packed or not, with or without the key", () => {
    let packings = 0;
    fc.assert(
      fc.property(state, (s) => {
        const data = sealState(s, key, binding, "");
        if (packed(data)) packings++;
        const opened = openState(data, key, binding, undefined);
        expect(opened).toMatchObject({ kind: "valid", text: stateText(s) });
        expect(opened.kind === "valid" && opened.state).toEqual(s);
        expect(peekRolloutState(data)).toEqual(s);
      }),
      { numRuns: 200 },
    );
    expect(packings).toBeGreaterThan(50);
    // 200 seals and opens of states up to 60+ CRs: over 5 s under a mutation run's coverage on a loaded machine.
  }, 60_000);

  it("packs the CRs alone: the rest of the state stays JSON, readable without unpacking", () => {
    const s = stateAt("c-1");
    const text = JSON.parse(sealState(s, key, binding, "").state!) as Record<string, unknown>;
    const { crs: _crs, ...rest } = s;
    expect(text).toEqual({ ...rest, packedCrs: expect.stringMatching(/^[A-Za-z0-9+/]+=*$/) });
  });
});

describe("a state stored by the previous release (its JSON)", () => {
  for (const previous of ["f".repeat(64), undefined]) {
    it(`reads as the same state, the same text (${previous ? "chained" : "sealed before the chain"})`, () => {
      const s = stateAt("c-1");
      const data = sealedByPreviousRelease(s, key, binding, previous);
      expect(openState(data, key, binding, previous)).toEqual({
        kind: "valid",
        state: s,
        text: stateText(s),
        mac: data[ROLLOUT_STATE_MAC_KEY],
      });
      expect(peekRolloutState(data)).toEqual(s);
    });
  }

  it("is carried on by a new leader: not rewritten while unchanged, its successor stored packed", async () => {
    const kube = hubWithKnativeKinds();
    const store = storeOn(kube);
    expect(await store.open(undefined)).toMatchObject({ kind: "ready" }); // makes the key
    const stateKey = keyOf(kube);
    const old = stateAt("c-1");
    kube.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: "knative-fleet" },
      data: sealedByPreviousRelease(old, stateKey, binding, ""),
    });
    const leader = storeOn(kube);
    const opened = await leader.open(configMapOf(kube));
    expect(opened).toEqual({ kind: "ready", state: old, text: stateText(old) });
    const next = stateAt("c-2");
    await leader.store(next, stateText(next));
    expect(packed(configMapOf(kube)!.data as Record<string, string>)).toBe(true);
    expect(await storeOn(kube).open(configMapOf(kube))).toEqual({
      kind: "ready",
      state: next,
      text: stateText(next),
    });
  });
});

describe("an unchanged packed state is not written again", () => {
  it("by the leader that wrote it, nor by a new one", async () => {
    const names = Array.from({ length: 300 }, (_, i) => `c${i + 1}`);
    const policy = {
      waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
      soak: "0s",
    };
    const files = fleetFiles(names, policy, () => "1.21");
    const kube = hubWithKnativeKinds();
    const newStage = () => stageOn(kube, { inventory: () => names.map((name) => cluster(name)) });
    let stage = newStage();
    const writes = stateWrites(kube);
    const sync = () =>
      syncInto(kube.client, {
        files,
        namespace: "knative-fleet",
        commit: "a",
        repository: REPOSITORY,
        rollout: stage,
      });
    await sync();
    await sync();
    expect(packed(configMapOf(kube)!.data as Record<string, string>)).toBe(true);
    const stored = structuredClone(configMapOf(kube)!.data);
    writes.length = 0;
    await sync();
    stage.stop();
    stage = newStage();
    await sync();
    expect(writes).toEqual([]);
    expect(configMapOf(kube)!.data).toEqual(stored);
    stage.stop();
  });
});

describe("the seal of a packed state", () => {
  /** Three packed states stored one after the other, the first by the previous release. */
  function chain() {
    const first = sealedByPreviousRelease(stateAt("c-1"), key, binding, "");
    const second = sealState(stateAt("c-2"), key, binding, first[ROLLOUT_STATE_MAC_KEY]!);
    const third = sealState(stateAt("c-3"), key, binding, second[ROLLOUT_STATE_MAC_KEY]!);
    expect([second, third].every(packed)).toBe(true);
    return { first, second, third, last: third[ROLLOUT_STATE_MAC_KEY]! };
  }

  it("refuses packed CRs changed by someone without the key", () => {
    const { third, last } = chain();
    const forged = stateAt("c-3");
    for (const record of Object.values(forged.crs)) {
      if (record.health)
        record.health = { ...record.health, healthy: true, since: "2000-01-01T00:00:00.000Z" };
    }
    const repacked = sealState(forged, randomBytes(32), binding, "").state!;
    expect(openState({ ...third, state: repacked }, key, binding, last)).toEqual({
      kind: "refused",
      reason: "its HMAC does not match: it was not written by this knative-fleet for this repository",
    });
  });

  it("refuses an older state put back, packed or not, as it was or with `previous` rewritten or removed", () => {
    const { first, second, last } = chain();
    for (const old of [first, second]) {
      expect(openState(old, key, binding, last)).toMatchObject({
        kind: "refused",
        reason: expect.stringContaining("it is not the last state this knative-fleet stored"),
      });
      expect(openState({ ...old, [ROLLOUT_STATE_PREVIOUS_KEY]: last }, key, binding, last)).toMatchObject({
        kind: "refused",
        reason: expect.stringContaining("its HMAC does not match"),
      });
      const { [ROLLOUT_STATE_PREVIOUS_KEY]: _previous, ...removed } = old;
      expect(openState(removed, key, binding, last)).toMatchObject({ kind: "refused" });
    }
  });

  it("takes a sealed packing it cannot read for another release's format: it starts over", () => {
    const text = JSON.stringify({ ...stateAt("c-1"), crs: undefined, packedCrs: packing({ packing: 2 }) });
    const data = { state: text, previous: "", mac: macOf(key, binding, text, "") };
    expect(openState(data, key, binding, undefined)).toEqual({ kind: "none", legacy: "unreadable" });
  });
});

describe("a packed state read without the key (knative-fleet status)", () => {
  const withCrs = (packedCrs: string) => ({
    state: JSON.stringify({ ...stateAt("c-1"), crs: undefined, packedCrs }),
  });
  /** The cells of the one CR `KnativeServing a/b`, its cluster's name and namespace. */
  const packingOf = (cells: unknown[], change: Record<string, unknown> = {}) =>
    packing({
      packing: 1,
      keys: ["KnativeServing a/b"],
      fields: [
        ["cluster", "name"],
        ["cluster", "namespace"],
      ],
      columns: cells.map((cell) => [cell]),
      ...change,
    });
  const crsIn = (packedCrs: string) => peekRolloutState(withCrs(packedCrs))?.crs;

  it("reads none that unpacks past its limit, without unpacking it", () => {
    const bomb = gzipSync(Buffer.alloc(200 * 1024 * 1024), { level: 9 }).toString("base64");
    const started = performance.now();
    expect(peekRolloutState(withCrs(bomb))).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("reads a packing of its own, and none that is not", () => {
    const clusterIs = (name: string, namespace: string) => ({
      "KnativeServing a/b": { cluster: { name, namespace } },
    });
    expect(crsIn(packingOf(["b", "fleet-system"]))).toEqual(clusterIs("b", "fleet-system"));
    expect(crsIn(packingOf(["b", 0]))).toEqual(clusterIs("b", "b")); // repeats the CR's first field
    expect(crsIn(packingOf([-3, "ns"]))).toEqual(clusterIs("a/b", "ns")); // the end of the CR's key
    for (const bad of [
      "not base64 of gzip",
      packing("not an object"),
      packingOf(["b", "ns"], { packing: 2 }),
      packingOf(["b", "ns"], { keys: [] }), // ragged
      packingOf(["b", "ns"], { extra: true }),
      packingOf(["b", 1]), // repeats itself
      packingOf([{ b: "b" }, 0]), // repeats no string
      packingOf([-99, "ns"]), // the end of a longer key
      packingOf(["b", 0.5]),
      packingOf(["b", "ns"], {
        fields: [
          ["__proto__", "name"],
          ["cluster", "namespace"],
        ],
      }),
    ]) {
      expect(crsIn(bad), bad).toBeUndefined();
    }
  });
});

/** `value` as JSON, gzipped, base64: a packing as someone else would write it. */
const packing = (value: unknown) => gzipSync(JSON.stringify(value)).toString("base64");

const configMapOf = (kube: FakeKube) => kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP);

const keyOf = (kube: FakeKube) =>
  Buffer.from((kube.find("Secret", ROLLOUT_KEY_SECRET)!.data as { key: string }).key, "base64");

function storeOn(kube: FakeKube): SealedStateStore {
  return new SealedStateStore({
    hub: kube.client,
    namespace: "knative-fleet",
    keyNamespace: "knative-fleet",
    repository: REPOSITORY,
    events: new EventRecorder({ client: kube.client, component: "test", log: silentLogger }),
    log: silentLogger,
  });
}

/** Each write of the state ConfigMap from now on, as `method`. */
function stateWrites(kube: FakeKube): string[] {
  const writes: string[] = [];
  const { apply, mergePatch } = kube.client;
  vi.spyOn(kube.client, "apply").mockImplementation((object, ...rest) => {
    if (object.kind === "ConfigMap" && object.metadata.name === ROLLOUT_STATE_CONFIGMAP) writes.push("apply");
    return apply.call(kube.client, object, ...rest);
  });
  vi.spyOn(kube.client, "mergePatch").mockImplementation((apiVersion, kind, namespace, name, ...rest) => {
    if (kind === "ConfigMap" && name === ROLLOUT_STATE_CONFIGMAP) writes.push("mergePatch");
    return mergePatch.call(kube.client, apiVersion, kind, namespace, name, ...rest);
  });
  return writes;
}
