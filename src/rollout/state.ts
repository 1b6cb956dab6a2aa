import { createHmac, timingSafeEqual } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import { z } from "zod";
import { ROLLOUT_START_OVER_ANNOTATION } from "../api/labels.ts";
import { canonicalJson } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { isRecord } from "../kube/object.ts";
import { commitInMessage } from "../text/commit.ts";

// The rollout's state, kept on the hub (a ConfigMap in knative-fleet's namespace) so a new leader carries on
// where the last one stopped. It holds progress per CR, by content digest (the desired hash the mirror writes
// on every hub CR): the content Git wants, the content of the last completed rollout (what halt-and-revert
// goes back to, re-read from Git at its commit), what was let through and when, and since when it has been
// healthy. It never holds CR content: nothing in it is ever applied as it is. It is sealed with an HMAC
// under a key only the reconciler holds (a Secret), so a state written by anyone else is refused. Each sealed
// state names the one it replaced, and the key Secret records the last one stored, so an older state of the
// reconciler's own put back (a replay, valid HMAC and all) is refused too, by every leader.

export const ROLLOUT_STATE_CONFIGMAP = "knative-fleet-rollout";
/**
 * The ConfigMap's data keys: the state (JSON, its CRs packed once it is large: `storedText`), the HMAC of the
 * state it replaced, and its own HMAC.
 */
const ROLLOUT_STATE_KEY = "state";
export const ROLLOUT_STATE_PREVIOUS_KEY = "previous";
export const ROLLOUT_STATE_MAC_KEY = "mac";
/**
 * The Secret (same namespace) holding the HMAC key, which knative-fleet creates when it is missing, and the
 * HMAC of the last state it stored.
 */
export const ROLLOUT_KEY_SECRET = "knative-fleet-rollout-key";
export const ROLLOUT_KEY_SECRET_KEY = "key";
export const ROLLOUT_KEY_SECRET_LAST = "last";

const HashSchema = z.string().regex(/^[0-9a-f]{1,64}$/);
/** A commit id, or "" for a hub CR that carries none (written by an older version, or by hand). */
const CommitSchema = z.string().regex(/^[0-9A-Za-z._-]{0,64}$/);
const TimeSchema = z.iso.datetime();

/** A Knative version, as an upgrade chain's step writes it (src/upgrade). */
const VersionSchema = z.string().regex(/^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,4})?$/);

/**
 * A content of one CR (its desired hash) and the commit it is read from; `version` when it was a step of an
 * upgrade chain, the spec.version the step gave the commit's CR.
 */
const ContentSchema = z.strictObject({
  hash: HashSchema,
  commit: CommitSchema,
  version: VersionSchema.optional(),
});
export type Content = z.infer<typeof ContentSchema>;

const CrStateSchema = z.strictObject({
  /**
   * The content Git last wanted for the CR and the first commit that wanted it. Kept while the CR's file
   * fails validation, so a broken file holds the CR's change instead of hiding it.
   */
  target: ContentSchema.optional(),
  /** The CR's cluster as last seen (its wave), for a CR a failed file holds before it was ever created. */
  cluster: z.strictObject({ namespace: z.string().max(63), name: z.string().max(253) }).optional(),
  /**
   * The content the CR had, healthy, when the last rollout completed: what HaltAndRevert puts it back on (the
   * hub CR is re-derived from Git at that commit and must hash to the same digest). Kept while the CR exists.
   */
  baseline: ContentSchema.optional(),
  /** The content let through in the current rollout, and when. */
  released: z.strictObject({ hash: HashSchema, at: TimeSchema }).optional(),
  /** The CR's health on the content it has (`hash`), unbroken since `since`. */
  health: z.strictObject({ hash: HashSchema, healthy: z.boolean(), since: TimeSchema }).optional(),
  /** A revert to this baseline digest could not be made (reported once, not at every sync). */
  revertFailed: HashSchema.optional(),
});
export type CrState = z.infer<typeof CrStateSchema>;

const HaltSchema = z.strictObject({
  wave: z.string(),
  waveIndex: z.number().int().min(0),
  /** The first CR that failed, as `Kind namespace/name`, and its cluster. */
  resource: z.string(),
  cluster: z.string(),
  /** The content that failed on it: the halt holds until Git wants another content for that CR. */
  hash: HashSchema,
  /** The head commit at the halt: only a newer commit can lift it. */
  commit: CommitSchema,
  /** The first failing reason: the CR's blocking condition. */
  reason: z.string(),
  at: TimeSchema,
});
export type Halt = z.infer<typeof HaltSchema>;

const WaveTimesSchema = z.strictObject({
  opened: TimeSchema.optional(),
  completed: TimeSchema.optional(),
});

export const RolloutStateSchema = z.strictObject({
  schema: z.literal(2),
  /** `Complete`: every CR is on the content Git wants and was healthy for its wave's soak. */
  phase: z.enum(["Progressing", "Complete", "Halted"]),
  /** The commit the current (or last) rollout started at, and when: the first to change a CR after a completion. */
  commit: CommitSchema,
  startedAt: TimeSchema,
  /** The first wave that is not done (open, or next to open), for people reading the state. */
  waveName: z.string().optional(),
  /** The current rollout's waves: when each first let a CR through and when it was done. */
  waves: z.record(z.string(), WaveTimesSchema),
  halt: HaltSchema.optional(),
  /** Per hub CR, by `Kind namespace/name`. */
  crs: z.record(z.string(), CrStateSchema),
  /** The step under way of each upgrade chain (`Kind major.minor` it goes to): moved on once a rollout completes it. */
  upgrades: z.record(z.string().max(64), VersionSchema).optional(),
});
export type RolloutState = z.infer<typeof RolloutStateSchema>;

/** Binds a sealed state to where it lives and to the repository it rolls out, so it cannot be moved. */
export const stateBinding = (namespace: string, repository: string): string =>
  `${namespace}/${ROLLOUT_STATE_CONFIGMAP}\n${repository}`;

/** The HMAC over the binding, the predecessor's HMAC (none in states sealed before the chain) and the text. */
function mac(key: Uint8Array, binding: string, text: string, previous: string | undefined): string {
  const hmac = createHmac("sha256", key).update(binding).update("\n");
  if (previous !== undefined) hmac.update(`previous ${previous}\n`);
  return hmac.update(text).digest("hex");
}

/**
 * The state's text: JSON with sorted keys, so the same state is the same text whatever order its fields were
 * set in (a state read back comes in schema order), and an unchanged state is never rewritten (the stage
 * compares it with the text `openState` gives back, whatever form the state is stored in).
 */
export const stateText = (state: RolloutState): string => canonicalJson(state);

/** The ConfigMap data that stores `state` in place of the state whose HMAC is `previous` ("" for none). */
export function sealState(
  state: RolloutState,
  key: Uint8Array,
  binding: string,
  previous: string,
): Record<string, string> {
  const text = storedText(state);
  return {
    [ROLLOUT_STATE_KEY]: text,
    [ROLLOUT_STATE_PREVIOUS_KEY]: previous,
    [ROLLOUT_STATE_MAC_KEY]: mac(key, binding, text, previous),
  };
}

/** The most data a ConfigMap holds: the API server refuses an object whose data takes more. */
export const CONFIGMAP_DATA_LIMIT = 1_048_576;

/** The bytes sealed data takes against CONFIGMAP_DATA_LIMIT: its keys and values, in UTF-8. */
export const sealedBytes = (data: Readonly<Record<string, string>>): number =>
  Object.entries(data).reduce((bytes, [k, v]) => bytes + Buffer.byteLength(k) + Buffer.byteLength(v), 0);

// The stored form. The state's JSON takes ~870 bytes a CR mid-rollout (its key and cluster, two digests of
// 64 digits written five times, commits, versions, times): 1 MiB holds 1,200 of them. Up to PLAIN_TEXT_LIMIT
// it is stored as it is, readable with kubectl; above, the CRs' records are packed and the rest of the state
// left as it is: a column per field, so that like values sit together (names with names, the commits and
// times that repeat from CR to CR), a value that repeats another field of the same CR or ends its key (a
// placement CR's cluster name) written as a number, then gzip and base64: ~140 bytes a CR at the worst, mostly
// its two digests (docs/scale.md). Only the text is packed: the schema the code works with is the same, and a
// state stored in either form (or by an earlier release) reads back the same. The HMAC covers the stored
// text, so nothing is unpacked before it checks out, but by peekRolloutState, which holds no key and unpacks
// at most UNPACKED_LIMIT.

/** A state whose JSON takes up to this many bytes is stored as it is: about 40 CRs mid-rollout. */
const PLAIN_TEXT_LIMIT = 32 * 1024;
/** The field of a stored state that holds its CRs packed, in place of `crs`. */
const PACKED_CRS = "packedCrs";
/** The packing's version, written in the packed text: a packing this version does not know is not read. */
const PACKING = 1;
/** The most a packed state unpacks to (some 150,000 CRs): more is refused, not inflated. */
const UNPACKED_LIMIT = 64 * 1024 * 1024;

/** The text stored for `state`: its JSON, or, over PLAIN_TEXT_LIMIT, its JSON with the CRs packed. */
function storedText(state: RolloutState): string {
  const text = stateText(state);
  if (Buffer.byteLength(text) <= PLAIN_TEXT_LIMIT) return text;
  const { crs, ...rest } = state;
  return canonicalJson({ ...rest, [PACKED_CRS]: packCrs(crs) });
}

/**
 * One CR's value of a field, packed: null when it has none; a string or boolean as it is, but a string that
 * repeats one of the CR's earlier fields is that field's number, and one of 8 characters or more that ends
 * the CR's key (a placement CR's cluster name) is minus its length; any other value in an array of one.
 */
type Cell = string | boolean | number | null | [unknown];

/**
 * A field of the CRs' records: `[name]`, or `[name, member]` for a member of an object. A name is a word so
 * that no `__proto__` can become a record's prototype; any other name is refused by the record's strict schema.
 */
const FieldName = z.string().regex(/^[A-Za-z][A-Za-z0-9]*$/);
const PackedCrsSchema = z.strictObject({
  packing: z.literal(PACKING),
  keys: z.array(z.string()),
  fields: z.array(z.union([z.tuple([FieldName]), z.tuple([FieldName, FieldName])])),
  columns: z.array(z.array(z.unknown())),
});

/** The CRs' records in columns, JSON, gzipped, base64. */
function packCrs(crs: RolloutState["crs"]): string {
  const keys = Object.keys(crs).sort();
  const rows = keys.map((key) => fieldsOf(crs[key]!));
  const names = [...new Set(rows.flatMap((row) => [...row.keys()]))].sort();
  const columns: Cell[][] = names.map(() => []);
  rows.forEach((row, r) => {
    const seen = new Map<string, number>();
    names.forEach((name, f) => {
      const value = row.get(name);
      columns[f]!.push(value === undefined ? null : packCell(value, f, keys[r]!, seen));
    });
  });
  const fields = names.map((name) => JSON.parse(name) as unknown);
  return gzipSync(JSON.stringify({ packing: PACKING, keys, fields, columns })).toString("base64");
}

/** The cell of field `f`'s value in the row of the CR `key`, whose strings so far are `seen`. */
function packCell(value: unknown, f: number, key: string, seen: Map<string, number>): Cell {
  if (typeof value !== "string") return typeof value === "boolean" ? value : [value];
  const earlier = seen.get(value);
  if (earlier !== undefined) return earlier;
  seen.set(value, f);
  return value.length >= 8 && key.endsWith(value) ? -value.length : value;
}

/** A CR's record by field, each named by its JSON: an object's members are fields of their own. */
function fieldsOf(record: CrState): Map<string, unknown> {
  const fields = new Map<string, unknown>();
  for (const [name, value] of Object.entries(record)) {
    const members = isRecord(value) ? Object.entries(value).filter(([, v]) => v !== undefined) : [];
    for (const [member, leaf] of members) fields.set(JSON.stringify([name, member]), leaf);
    if (members.length === 0 && value !== undefined) fields.set(JSON.stringify([name]), value);
  }
  return fields;
}

/** The CRs' records from their packed text (throws when it is not one this version packs). */
function unpackCrs(packed: unknown): Record<string, unknown> {
  if (typeof packed !== "string") throw new Error("not packed");
  const unzipped = gunzipSync(Buffer.from(packed, "base64"), { maxOutputLength: UNPACKED_LIMIT });
  const { keys, fields, columns } = PackedCrsSchema.parse(JSON.parse(unzipped.toString("utf8")));
  if (columns.length !== fields.length || columns.some((column) => column.length !== keys.length)) {
    throw new Error("ragged columns");
  }
  return Object.fromEntries(keys.map((key, r) => [key, unpackRecord(key, fields, columns, r)]));
}

/** The record of the CR `key`, in row `r`. */
function unpackRecord(key: string, fields: readonly string[][], columns: readonly unknown[][], r: number) {
  const record: Record<string, unknown> = {};
  const values: unknown[] = [];
  fields.forEach(([name, member], f) => {
    const value = unpackCell(columns[f]![r], f, key, values);
    values.push(value);
    if (value === undefined) return;
    if (member === undefined) record[name!] = value;
    else {
      const object = record[name!] ?? {};
      if (!isRecord(object)) throw new Error(`${name} is no object`);
      record[name!] = Object.assign(object, { [member]: value });
    }
  });
  return record;
}

/** The value of field `f` in its cell, the CR's key and its values of the fields before. */
function unpackCell(cell: unknown, f: number, key: string, values: readonly unknown[]): unknown {
  if (Array.isArray(cell)) return cell[0];
  if (typeof cell !== "number") return cell ?? undefined;
  const value = cell < 0 ? (-cell <= key.length ? key.slice(cell) : undefined) : values[cell];
  if (!Number.isInteger(cell) || cell >= f || typeof value !== "string") {
    throw new Error(`field ${f} repeats no string of the CR`);
  }
  return value;
}

/** The state in a stored text of either form, unchecked: undefined when it cannot be read. */
function storedState(text: string): unknown {
  const parsed = parseJson(text);
  if (!isRecord(parsed) || parsed[PACKED_CRS] === undefined || "crs" in parsed) return parsed;
  const { [PACKED_CRS]: packed, ...rest } = parsed;
  try {
    return { ...rest, crs: unpackCrs(packed) };
  } catch {
    return undefined;
  }
}

/**
 * What the stored data says: no state (none stored, or one written by an older version of knative-fleet,
 * which the rollout starts over from, safely); a state whose HMAC checks out and that is the last one stored
 * (`mac`, to record as such; `text` is its stateText, whatever form it is stored in); or a refusal, with why, for data this reconciler did not write or that it
 * replaced since. A refused state is never obeyed.
 *
 * `last` is the HMAC the key Secret records as the last state stored (undefined before any was recorded).
 * The state must be that one, or the one stored right after it (the reconciler stopped between writing the
 * state and recording it): any older one is a replay.
 */
export type OpenedState =
  | { kind: "none"; legacy?: "unsealed" | "unreadable" }
  | { kind: "valid"; state: RolloutState; text: string; mac: string }
  | { kind: "refused"; reason: string };

export function openState(
  data: Readonly<Record<string, unknown>> | undefined,
  key: Uint8Array,
  binding: string,
  last: string | undefined,
): OpenedState {
  const text = data?.[ROLLOUT_STATE_KEY];
  const sealedMac = data?.[ROLLOUT_STATE_MAC_KEY];
  const previous = data?.[ROLLOUT_STATE_PREVIOUS_KEY];
  if (text === undefined && sealedMac === undefined) return { kind: "none" };
  if (typeof text !== "string") return { kind: "refused", reason: "it holds no state text" };
  if (sealedMac === undefined && isLegacy(text)) return { kind: "none", legacy: "unsealed" };
  if (
    typeof sealedMac !== "string" ||
    (previous !== undefined && typeof previous !== "string") ||
    !sameMac(sealedMac, mac(key, binding, text, previous))
  ) {
    return {
      kind: "refused",
      reason: "its HMAC does not match: it was not written by this knative-fleet for this repository",
    };
  }
  if (last !== undefined && sealedMac !== last && previous !== last) {
    return {
      kind: "refused",
      reason:
        "it is not the last state this knative-fleet stored (an older state put back?); the key Secret records another",
    };
  }
  const state = RolloutStateSchema.safeParse(storedState(text));
  // A valid HMAC over an unreadable state: written by a version of knative-fleet this one cannot read.
  if (!state.success) return { kind: "none", legacy: "unreadable" };
  return { kind: "valid", state: state.data, text: stateText(state.data), mac: sealedMac };
}

/** The state of knative-fleet before it was sealed: a JSON object with no schema number. */
function isLegacy(text: string): boolean {
  const parsed = parseJson(text);
  return typeof parsed === "object" && parsed !== null && !("schema" in parsed) && "revision" in parsed;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function sameMac(a: string, b: string): boolean {
  const left = Buffer.from(a, "utf8");
  const right = Buffer.from(b, "utf8");
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * The state as `knative-fleet status` shows it, read without the key (the CLI has none): the same JSON (its
 * CRs unpacked), not checked. Undefined when there is none or it cannot be read.
 */
export function peekRolloutState(
  data: Readonly<Record<string, unknown>> | undefined,
): RolloutState | undefined {
  const text = data?.[ROLLOUT_STATE_KEY];
  if (typeof text !== "string") return undefined;
  const parsed = RolloutStateSchema.safeParse(storedState(text));
  return parsed.success ? parsed.data : undefined;
}

/** The completed waves of the state's rollout, in the order they were done. */
export function historyOf(state: RolloutState): { wave: string; opened?: string; completed: string }[] {
  return Object.entries(state.waves)
    .flatMap(([wave, times]) => (times.completed ? [{ wave, ...times, completed: times.completed }] : []))
    .sort((a, b) => compareStrings(a.completed, b.completed));
}

/** The rollout's name in messages: `rollout of <commit>`, the first commit that changed a CR's content. */
export const rolloutName = (rollout: { commit: string }): string =>
  `rollout of ${commitInMessage(rollout.commit)}`;

/** The rollout's phase as its readers see it: the stored state's, or why no state decides anything yet. */
export type RolloutPhase = RolloutState["phase"] | "Invalid" | "Waiting" | "Refused";

/**
 * What a reader knows of the rollout: the stored state (`rolloutViewOf`), as `knative-fleet status` and the
 * gate read it, or the sync's report (edge.ts RolloutReport is one), as the status file reads it.
 */
export interface RolloutView {
  phase: RolloutPhase;
  /** The commit the rollout started at. */
  commit?: string;
  /** The first wave that is not done, and whether it has let a CR through yet (false: it waits to open). */
  wave?: string;
  opened?: boolean;
  paused?: boolean;
  halt?: Pick<Halt, "wave" | "resource" | "cluster" | "reason">;
  /** The open wave waits for an approval in Git (known to the sync's report, not to the stored state). */
  approval?: { wave: string; commit: string };
  /** Refused: the state ConfigMap (`namespace/name`) and why it is refused. */
  refused?: { configMap: string; reason: string };
  /** Invalid, Waiting (or a Refused one already worded): why every change waits. */
  message?: string;
}

/** The view of a stored state. */
export function rolloutViewOf(state: RolloutState): RolloutView {
  const wave = state.waveName;
  return {
    phase: state.phase,
    commit: state.commit,
    ...(wave !== undefined && { wave, opened: state.waves[wave]?.opened !== undefined }),
    ...(state.halt && { halt: state.halt }),
  };
}

/** The rollout's phase, and the sentence that says where it is. */
export interface RolloutVerdict {
  phase: RolloutPhase;
  message: string;
}

/**
 * The rollout's verdict: its phase and the one sentence that says it, which the status file's Rollout
 * section, `knative-fleet status` and the gate (a halted CR's waiting reason, a refused state's, the wave and
 * completion Events) all show. As kstatus's Compute: this function words it, its callers do not.
 */
export function rolloutVerdict(r: RolloutView): RolloutVerdict {
  const sentence = verdictSentence(r);
  return { phase: r.phase, message: r.paused ? `${sentence}; the rollout is paused` : sentence };
}

function verdictSentence(r: RolloutView): string {
  const name = r.commit ? rolloutName({ commit: r.commit }) : "the rollout";
  switch (r.phase) {
    case "Halted": {
      if (r.halt === undefined) return `${name} halted`;
      const { wave, resource, cluster, reason } = r.halt;
      return (
        `${name} halted in wave ${wave}: ${resource} on ${cluster}: ${reason}; a commit that changes ` +
        `${resource} (a fix, or a revert of the change) lifts the halt`
      );
    }
    case "Complete":
      return `${name} has reached every wave`;
    case "Progressing":
      if (r.wave === undefined) return `${name} in progress`;
      if (r.approval?.wave === r.wave) return approvalVerdict(r.approval);
      return `${name} in progress: wave ${r.wave} ${r.opened === false ? "waits to open" : "is open"}`;
    case "Refused":
      if (r.refused === undefined) return r.message ?? "the rollout state is refused; every change waits";
      return (
        `the rollout state ConfigMap ${r.refused.configMap} is refused: ${r.refused.reason}. Every change ` +
        `waits; annotate it ${ROLLOUT_START_OVER_ANNOTATION}=<why> (create it first if it is missing) to start ` +
        "the rollout state over"
      );
    case "Invalid":
    case "Waiting":
      return r.message ?? "every change waits";
  }
}

/**
 * What a wave that needs an approval waits for, with the whole commit id an approval must name and the
 * command that writes one.
 */
export function approvalVerdict(approval: { commit: string; wave: string }): string {
  const { commit, wave } = approval;
  return (
    `${rolloutName({ commit })} waits for approval of wave ${wave}: a KnativeRolloutApproval of commit ` +
    `${commit} and wave ${wave} on the tracked branch opens it (knative-fleet approve --wave ${wave} ` +
    `--commit ${commit})`
  );
}

/** The line of `knative-fleet status`: the rollout's verdict. */
export const describeRollout = (view: RolloutView): string => `Rollout: ${rolloutVerdict(view).message}`;
