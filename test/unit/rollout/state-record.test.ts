import { randomBytes } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import {
  openState,
  peekRolloutState,
  type RolloutState,
  sealedBytes,
  sealState,
  stateBinding,
  stateText,
} from "../../../src/rollout/state.ts";
import { macOf } from "./state-fleet.ts";
import { REPOSITORY } from "./support.ts";

// The CRs' records in the stored form (state.ts, storedText and packCrs): when a state is packed (its JSON
// over 32 KiB, to the byte), the packing as the comment of state.ts documents it (a column per field, sorted,
// a value that repeats an earlier field of its CR as that field's number, one of 8 characters or more that
// ends the CR's key as minus its length), and the packings a reader refuses: each a state nobody reads, with
// the key (it starts over) or without it (`knative-fleet status` shows none).

const key = randomBytes(32);
const binding = stateBinding("knative-fleet", REPOSITORY);
const T1 = "2026-11-29T10:01:00.000Z";
const T2 = "2026-11-29T10:02:00.000Z";
/** The most a packing unpacks to: 64 MiB (state.ts, UNPACKED_LIMIT). */
const UNPACKED_LIMIT = 64 * 1024 * 1024;
/** The most bytes of JSON stored as it is (state.ts, PLAIN_TEXT_LIMIT). */
const PLAIN_TEXT_LIMIT = 32 * 1024;

const base = (crs: RolloutState["crs"], waveName?: string): RolloutState => ({
  schema: 2,
  phase: "Progressing",
  commit: "c1",
  startedAt: "2026-11-29T10:00:00.000Z",
  ...(waveName !== undefined && { waveName }),
  waves: {},
  crs,
});

/** The stored text of the data, parsed. */
const storedOf = (data: Record<string, string>) => JSON.parse(data.state!) as Record<string, unknown>;

/** The packing in a stored text: its JSON, gunzipped from base64. */
const unpacked = (packedCrs: unknown) =>
  JSON.parse(gunzipSync(Buffer.from(packedCrs as string, "base64")).toString("utf8")) as unknown;

/** `value` as JSON, gzipped, base64: a packing as someone else would write it. */
const packing = (value: unknown) => gzipSync(JSON.stringify(value)).toString("base64");

describe("when the CRs are packed: a state's JSON over 32 KiB, to the byte", () => {
  /** A state with no CR whose JSON takes `bytes` bytes, padded with `pad` (one character, of 1 or 2 bytes). */
  function stateOfBytes(bytes: number, pad = "w"): RolloutState {
    const empty = Buffer.byteLength(stateText(base({}, "")));
    const padBytes = Buffer.byteLength(pad);
    const state = base({}, pad.repeat((bytes - empty) / padBytes));
    expect(Buffer.byteLength(stateText(state))).toBe(bytes);
    return state;
  }

  it("stores a state of 32 KiB as its JSON, and one of a byte more packed; each reads back the same", () => {
    const at = stateOfBytes(PLAIN_TEXT_LIMIT);
    const atData = sealState(at, key, binding, "");
    expect(atData.state).toBe(stateText(at));
    const over = stateOfBytes(PLAIN_TEXT_LIMIT + 1);
    const overData = sealState(over, key, binding, "");
    const { crs: _crs, ...rest } = over;
    const stored = storedOf(overData);
    expect(stored).toEqual({ ...rest, packedCrs: expect.any(String) });
    expect(unpacked(stored.packedCrs)).toEqual({ packing: 1, keys: [], fields: [], columns: [] });
    for (const [state, data] of [
      [at, atData],
      [over, overData],
    ] as const) {
      expect(openState(data, key, binding, undefined)).toEqual({
        kind: "valid",
        state,
        text: stateText(state),
        mac: data.mac,
      });
      expect(peekRolloutState(data)).toEqual(state);
    }
  });

  it("counts bytes, not characters: 32 KiB of two-byte characters is packed from one byte more", () => {
    // The padding of "é" takes an even count of bytes: the limit, or a byte under it.
    const empty = Buffer.byteLength(stateText(base({}, "")));
    const evenAt = (PLAIN_TEXT_LIMIT - empty) % 2 === 0 ? PLAIN_TEXT_LIMIT : PLAIN_TEXT_LIMIT - 1;
    const at = stateOfBytes(evenAt, "é");
    expect(stateText(at).length).toBeLessThan(PLAIN_TEXT_LIMIT);
    expect(sealState(at, key, binding, "").state).toBe(stateText(at));
    const over = stateOfBytes(evenAt + 2, "é");
    expect(stateText(over).length).toBeLessThan(PLAIN_TEXT_LIMIT);
    expect(storedOf(sealState(over, key, binding, ""))).toHaveProperty("packedCrs");
  });
});

describe("the packing of the CRs' records, as documented", () => {
  /** A 7-character cluster name at the end of its CR's key: kept as it is. */
  const SHORT = "KnativeEventing knative-eventing/c-seven";
  /** An 8-character one: written as minus its length. */
  const LONG = "KnativeServing knative-serving/cluster1";
  /** The two CRs, set in an order that is neither the keys' nor the fields', with undefined members. */
  const crs = (): RolloutState["crs"] => ({
    [LONG]: {
      target: { hash: "aa", commit: "c1", version: undefined },
      cluster: { namespace: "fleet-system", name: "cluster1" },
      released: { at: T2, hash: "aa" },
      revertFailed: undefined,
    },
    [SHORT]: {
      target: { commit: "c1", hash: "bb" },
      cluster: { name: "c-seven", namespace: "fleet-system" },
      health: { since: T1, healthy: false, hash: "bb" },
    },
  });
  /** Over 32 KiB with its padding: packed. */
  const state = (records = crs()) => base(records, "w".repeat(PLAIN_TEXT_LIMIT));

  it("writes the keys sorted, a column per field sorted, each value once a CR, a key's end as a number", () => {
    const stored = storedOf(sealState(state(), key, binding, ""));
    expect(stored.crs).toBeUndefined();
    expect(unpacked(stored.packedCrs)).toEqual({
      packing: 1,
      keys: [SHORT, LONG],
      fields: [
        ["cluster", "name"],
        ["cluster", "namespace"],
        ["health", "hash"],
        ["health", "healthy"],
        ["health", "since"],
        ["released", "at"],
        ["released", "hash"],
        ["target", "commit"],
        ["target", "hash"],
      ],
      columns: [
        ["c-seven", -8],
        ["fleet-system", "fleet-system"],
        ["bb", null],
        [false, null],
        [T1, null],
        [null, T2],
        [null, "aa"],
        ["c1", "c1"],
        [2, 6], // the health's hash of SHORT, the release's of LONG
      ],
    });
  });

  it("reads back every record as it was set, with or without the key", () => {
    const s = state();
    const data = sealState(s, key, binding, "");
    const opened = openState(data, key, binding, undefined);
    expect(opened).toEqual({ kind: "valid", state: s, text: stateText(s), mac: data.mac });
    if (opened.kind !== "valid") throw new Error("not valid");
    expect(opened.state.crs[LONG]).toEqual({
      target: { hash: "aa", commit: "c1" },
      cluster: { namespace: "fleet-system", name: "cluster1" },
      released: { at: T2, hash: "aa" },
    });
    expect(opened.state.crs[SHORT]?.health).toEqual({ since: T1, healthy: false, hash: "bb" });
    expect(peekRolloutState(data)).toEqual(s);
  });

  it("seals the same state to the same data whatever order its CRs and fields were set in", () => {
    const records = crs();
    const reordered: RolloutState["crs"] = {
      [SHORT]: {
        health: { hash: "bb", healthy: false, since: T1 },
        cluster: { namespace: "fleet-system", name: "c-seven" },
        target: { hash: "bb", commit: "c1" },
      },
      [LONG]: {
        released: records[LONG]!.released,
        cluster: records[LONG]!.cluster,
        target: records[LONG]!.target,
      },
    };
    const data = sealState(state(), key, binding, "");
    expect(sealState(state(reordered), key, binding, "")).toEqual(data);
  });

  it("packs an undefined member as an absent one", () => {
    const records = crs();
    const { revertFailed: _r, ...long } = records[LONG]!;
    const without = { ...records, [LONG]: { ...long, target: { hash: "aa", commit: "c1" } } };
    expect(Object.keys(records[LONG]!)).toContain("revertFailed");
    expect(Object.keys(records[LONG]!.target!)).toContain("version");
    expect(sealState(state(without), key, binding, "")).toEqual(sealState(state(), key, binding, ""));
  });
});

describe("a packing that is refused: no state, with the key or without it", () => {
  const KEY = "KnativeServing a/b"; // 18 characters
  /** The stored text of a state whose CRs are `packedCrs` (and `crs`, when given). */
  const textOf = (packedCrs: unknown, crs?: unknown) => JSON.stringify({ ...base({}), crs, packedCrs });
  /** The CRs read without the key, and what a sealed state of that text opens as. */
  function read(packedCrs: unknown, crs?: unknown) {
    const text = textOf(packedCrs, crs);
    const sealed = openState(
      { state: text, previous: "", mac: macOf(key, binding, text, "") },
      key,
      binding,
      "",
    );
    return { peeked: peekRolloutState({ state: text })?.crs, sealed };
  }
  /** The one CR `KnativeServing a/b`, its fields and cells. */
  const one = (fields: string[][], cells: unknown[], columns = cells.map((cell) => [cell])) =>
    packing({ packing: 1, keys: [KEY], fields, columns });
  const CLUSTER = [
    ["cluster", "name"],
    ["cluster", "namespace"],
  ];
  /** Refused both ways: the sealed state is taken for another release's (it starts over). */
  function expectRefused(packedCrs: unknown, crs?: unknown) {
    const { peeked, sealed } = read(packedCrs, crs);
    expect(peeked).toBeUndefined();
    expect(sealed).toEqual({ kind: "none", legacy: "unreadable" });
  }
  /** Read both ways as `crs`. */
  function expectRead(packedCrs: unknown, crs: unknown) {
    const { peeked, sealed } = read(packedCrs);
    expect(peeked).toEqual(crs);
    expect(sealed).toMatchObject({ kind: "valid", state: { crs } });
  }

  it("refuses packed CRs that are not a string", () => {
    for (const packedCrs of [5, true, { packing: 1, keys: [], fields: [], columns: [] }, null]) {
      expect(peekRolloutState({ state: textOf(packedCrs) }), JSON.stringify(packedCrs)).toBeUndefined();
    }
    expectRefused(5);
  });

  it("refuses a state with both its CRs and packed CRs", () => {
    const crs = { [KEY]: { cluster: { name: "b", namespace: "ns" } } };
    expectRead(one(CLUSTER, ["b", "ns"]), crs);
    expectRefused(one(CLUSTER, ["b", "ns"]), crs);
    expectRefused(one(CLUSTER, ["b", "ns"]), {});
  });

  it("refuses a column more than its fields, and a column longer than its keys", () => {
    expectRead(one(CLUSTER, ["b", "ns"]), { [KEY]: { cluster: { name: "b", namespace: "ns" } } });
    expectRefused(one(CLUSTER, [], [["b"], ["ns"], ["extra"]]));
    expectRefused(one(CLUSTER, [], [["b"], ["ns", "extra"]]));
    expectRefused(one(CLUSTER, [], [["b", "extra"], ["ns"]]));
  });

  it("refuses a member of a field that is no object", () => {
    const released = [
      ["released", "at"],
      ["released", "hash"],
    ];
    expectRead(one(released, [T1, "ab"]), { [KEY]: { released: { at: T1, hash: "ab" } } });
    expectRefused(one([["released"], ...released], [true, T1, "ab"]));
    expectRefused(one([["released"], ...released], [[""], T1, "ab"]));
  });

  it("reads the whole key as a key's end, and nothing longer", () => {
    expectRead(one(CLUSTER, [-18, "ns"]), { [KEY]: { cluster: { name: KEY, namespace: "ns" } } });
    expectRead(one(CLUSTER, [-1, "ns"]), { [KEY]: { cluster: { name: "b", namespace: "ns" } } });
    expectRefused(one(CLUSTER, [-19, "ns"]));
  });

  it("refuses a number that repeats no string of the CR's earlier fields", () => {
    // Each of these, read as it says, would make a record the schema takes.
    expectRead(one([["revertFailed"]], ["ab"]), { [KEY]: { revertFailed: "ab" } });
    expectRefused(one([["revertFailed"]], [0])); // itself
    expectRefused(one([["revertFailed"]], [3])); // a later field
    expectRefused(one([["baseline", "version"], ["revertFailed"]], [null, 0])); // an earlier field it has not
    expectRefused(one(CLUSTER, [-2.5, "ns"])); // no whole number: no key's end
    expectRefused(one(CLUSTER, ["b", 0.5]));
  });
});

describe("the most a packing unpacks to: 64 MiB, to the byte", () => {
  /** A packing of no CR whose JSON takes `bytes` bytes (padded with spaces, as JSON allows). */
  function packingOfBytes(bytes: number): string {
    const json = JSON.stringify({ packing: 1, keys: [], fields: [], columns: [] });
    return gzipSync(Buffer.from(json + " ".repeat(bytes - json.length)), { level: 9 }).toString("base64");
  }

  it("reads a packing of 64 MiB, and none of a byte more", () => {
    const state = base({});
    const { crs: _crs, ...rest } = state;
    for (const [bytes, read] of [
      [UNPACKED_LIMIT, true],
      [UNPACKED_LIMIT + 1, false],
    ] as const) {
      const text = JSON.stringify({ ...rest, packedCrs: packingOfBytes(bytes) });
      const data = { state: text, previous: "", mac: macOf(key, binding, text, "") };
      expect(peekRolloutState(data), `${bytes}`).toEqual(read ? state : undefined);
      expect(openState(data, key, binding, "")).toEqual(
        read
          ? { kind: "valid", state, text: stateText(state), mac: data.mac }
          : { kind: "none", legacy: "unreadable" },
      );
    }
  }, 60_000);
});

describe("the bytes sealed data takes", () => {
  it("counts each key and value in UTF-8", () => {
    expect(sealedBytes({})).toBe(0);
    expect(sealedBytes({ state: "abc" })).toBe(8);
    expect(sealedBytes({ state: "é", mac: "" })).toBe(10);
    expect(sealedBytes({ é: "ab", previous: "xyz" })).toBe(15);
  });
});
