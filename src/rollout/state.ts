import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { ROLLOUT_START_OVER_ANNOTATION } from "../api/labels.ts";
import { canonicalJson } from "../apply/compare.ts";
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
/** The ConfigMap's data keys: the state (JSON), the HMAC of the state it replaced, and its own HMAC. */
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
 * The state's stored text: JSON with sorted keys, so the same state is the same text whatever order its
 * fields were set in (a state read back comes in schema order), and an unchanged state is never rewritten.
 */
export const stateText = (state: RolloutState): string => canonicalJson(state);

/** The ConfigMap data that stores `state` in place of the state whose HMAC is `previous` ("" for none). */
export function sealState(
  state: RolloutState,
  key: Uint8Array,
  binding: string,
  previous: string,
): Record<string, string> {
  const text = stateText(state);
  return {
    [ROLLOUT_STATE_KEY]: text,
    [ROLLOUT_STATE_PREVIOUS_KEY]: previous,
    [ROLLOUT_STATE_MAC_KEY]: mac(key, binding, text, previous),
  };
}

/**
 * What the stored data says: no state (none stored, or one written by an older version of knative-fleet,
 * which the rollout starts over from, safely); a state whose HMAC checks out and that is the last one stored
 * (`mac`, to record as such); or a refusal, with why, for data this reconciler did not write or that it
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
  const parsed = parseJson(text);
  const state = RolloutStateSchema.safeParse(parsed);
  // A valid HMAC over an unreadable state: written by a version of knative-fleet this one cannot read.
  if (!state.success) return { kind: "none", legacy: "unreadable" };
  return { kind: "valid", state: state.data, text, mac: sealedMac };
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
 * The state as `knative-fleet status` shows it, read without the key (the CLI has none): the same JSON, not
 * checked. Undefined when there is none or it cannot be read.
 */
export function peekRolloutState(
  data: Readonly<Record<string, unknown>> | undefined,
): RolloutState | undefined {
  const text = data?.[ROLLOUT_STATE_KEY];
  if (typeof text !== "string") return undefined;
  const parsed = RolloutStateSchema.safeParse(parseJson(text));
  return parsed.success ? parsed.data : undefined;
}

/** The completed waves of the state's rollout, in the order they were done. */
export function historyOf(state: RolloutState): { wave: string; opened?: string; completed: string }[] {
  return Object.entries(state.waves)
    .flatMap(([wave, times]) => (times.completed ? [{ wave, ...times, completed: times.completed }] : []))
    .sort((a, b) => a.completed.localeCompare(b.completed));
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
