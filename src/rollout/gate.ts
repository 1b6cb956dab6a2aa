import { isManagedByFleet } from "../api/labels.ts";
import { approvalKey } from "../fleet/approval-document.ts";
import {
  clusterKey,
  formatIdentity,
  identityOf,
  type ResourceIdentity,
  targetOf,
} from "../fleet/identity.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeObject } from "../kube/object.ts";
import type { ApplyStep, PruneCandidate } from "../mirror/decide.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { count } from "../text/count.ts";
import {
  approvalVerdict,
  type Content,
  type Halt,
  type RolloutState,
  rolloutName,
  rolloutVerdict,
  rolloutViewOf,
} from "./state.ts";
import { maxUnavailableCount, type PlannedWave, plannedWaves, waveIndexOf } from "./waves.ts";
import {
  contentOf,
  type GateInput,
  inEpoch,
  isBlocked,
  isGated,
  isPending,
  isSafe,
  isUnavailable,
  isWrite,
  type Member,
  openWaveIndex,
  type Weighing,
  weigh,
} from "./weigh.ts";
import { windowOpen } from "./windows.ts";

// The model test (test/unit/rollout/model.test.ts) reads the gate's verdict on health from here, as it did
// before the weighing had a file of its own.
export { healthOf } from "./weigh.ts";

// The rollout gate, pure: from the policy, the state kept on the hub, the mirror's planned steps and the hub's
// CRs, which changes go out now, which wait (and why), what is reverted, and the next state. Level-based:
// every sync recomputes the whole decision from those inputs, so a new leader that reads the same state
// decides the same.
//
// Progress is kept per CR, by content digest, never per "revision of the whole fleet": which other CRs exist
// (a relabel, a cluster joining or leaving, a file that fails validation) never resets what is known about
// a CR, and never counts as a release. The guarantees (docs/rollout.md, checked over random interleavings by
// test/unit/rollout/model.test.ts):
//   1. a CR gets content other than its baseline (the content of the last completed rollout) only once every
//      CR of every earlier wave is on the content Git wants, and each one that changed since the baseline
//      has been healthy on it for its wave's soak;
//   2. a wave lets a CR change only while fewer than maxUnavailable of its changed CRs are unhealthy (on
//      whatever content: one Git has moved on from counts until its new content went out); a CR already
//      counted may take new content in its own place, so a fix for a failing change is never held by itself;
//   3. after a halt, HaltAndRevert puts every CR whose content is not its baseline back on its baseline, in
//      every wave; the baseline is kept while the hub CR exists;
//   4. inventory changes and failed files never lift a halt or finish a wave: a failed file's CR keeps the
//      content Git last wanted for it as its target;
//   5. a CR the fleet no longer wants (a cluster that left, a removed file) is no member: it blocks no wave.

export interface RolloutEvent {
  /** The hub CR it is about; undefined for the rollout as a whole. */
  resource?: ResourceIdentity;
  type: "Normal" | "Warning";
  reason:
    | "RolloutWaveOpened"
    | "RolloutHalted"
    | "RolloutHaltLifted"
    | "RolloutReverted"
    | "RolloutRevertFailed"
    | "RolloutCompleted";
  message: string;
}

/** A CR to put back on its baseline: the stage re-derives that content from Git at `to.commit`. */
export interface RevertRequest {
  resource: ResourceIdentity;
  cluster: string;
  path: string;
  to: Content;
  live: KubeObject;
}

export interface GateOutcome {
  /** The mirror's steps, a held create or update turned `waiting`; see `withReverts` for the reverts. */
  steps: ApplyStep[];
  reverts: RevertRequest[];
  state: RolloutState;
  /** Each hub CR that keeps its last applied spec this sync, by `Kind namespace/name`, and why. */
  waiting: Map<string, string>;
  events: RolloutEvent[];
  /** The wave that is open (or next to open), for plan, status and metrics. */
  openWave?: string;
  /** The open wave waits for an approval in Git of the rollout's commit. */
  awaitingApproval?: { wave: string; commit: string };
}

/** The CRs let through this sync, and why each held one waits. */
interface Release {
  release: Set<string>;
  waiting: Map<string, string>;
}

/** A phase's result: the state so far and the Events it adds. */
interface Phase {
  state: RolloutState;
  events: RolloutEvent[];
}

/**
 * Which changes of one sync go out now, which are reverted, and the next state: the weighing, then each
 * phase on the state the previous one left.
 */
export function gateApplies(
  input: GateInput,
  steps: readonly ApplyStep[],
  live: readonly KubeObject[],
): GateOutcome {
  const w = weigh(input, steps, live);
  if (input.startedOver && input.state === undefined) seedBaselines(w);
  const events: RolloutEvent[] = [];
  const phase = (next: Phase): RolloutState => {
    events.push(...next.events);
    return next.state;
  };
  const open = openWaveIndex(w);
  let state = startOrName(w, open);
  state = phase(liftHalt(w, state));
  state = phase(haltOnFailure(w, state));
  const paused = input.spec.paused || input.hubPaused;
  const released = releaseSafe(w, state, paused);
  holdBlocked(w, state, released);
  if (state.phase === "Halted") holdForHalt(w, state, released);
  else if (open !== -1 && !paused) state = phase(releaseWave(w, state, open, released));
  if (state.phase !== "Halted") state = phase(completeWaves(w, state, open));
  const reverts = revertRequests(w, state, released.release);
  const stillOpen = openWaveIndex(w);
  const openWave = state.phase === "Progressing" && stillOpen !== -1 ? w.waves[stillOpen]!.name : undefined;
  const awaitingApproval =
    openWave !== undefined && !paused && awaitedApproval(w, state, w.waves[stillOpen]!) !== undefined
      ? { wave: openWave, commit: state.commit }
      : undefined;
  if (openWave === undefined) delete state.waveName;
  else state.waveName = openWave;
  if (Object.keys(input.upgrades ?? {}).length > 0) state.upgrades = { ...input.upgrades };
  else delete state.upgrades;
  const gated = steps.map((step) =>
    !isWrite(step) || released.release.has(formatIdentity(step))
      ? step
      : holdStep(step, released.waiting.get(formatIdentity(step)) ?? `${rolloutName(state)} waits`),
  );
  return {
    steps: gated,
    reverts,
    state,
    waiting: released.waiting,
    events,
    ...(openWave ? { openWave } : {}),
    ...(awaitingApproval && { awaitingApproval }),
  };
}

/** A create or update held back: `waiting`, with why, and without the object it would have written. */
export function holdStep(step: ApplyStep, reason: string): ApplyStep {
  if (!isWrite(step)) return step;
  const { object: _held, ...outcome } = step;
  return { ...outcome, action: "waiting", reason };
}

/**
 * After a start-over: each CR healthy on the content it has takes it as its baseline, with the commit the
 * hub CR names. Safe as a revert target: a revert re-derives the content from Git at that commit and
 * applies it only if it hashes the same.
 */
function seedBaselines(w: Weighing): void {
  for (const m of w.members) {
    if (m.live === undefined || m.liveHash === undefined || !m.health.healthy) continue;
    w.crs[m.key]!.baseline = contentOf(m.live);
  }
}

/**
 * The state this sync starts from: a new rollout when something changes after a completed one; a commit
 * that changes content during one gives it its name (the rollout goes on: what is known of each CR stays).
 */
function startOrName(w: Weighing, open: number): RolloutState {
  const { input, crs, at } = w;
  const stored = input.state;
  const state: RolloutState = stored
    ? { ...structuredClone(stored), crs }
    : { schema: 2, phase: "Complete", commit: input.commit, startedAt: at, waves: {}, crs };
  if (state.phase === "Complete" && open !== -1) {
    for (const entry of Object.values(crs)) delete entry.released;
    return { ...state, phase: "Progressing", commit: input.commit, startedAt: at, waves: {} };
  }
  if (state.phase !== "Complete" && w.changedByCommit) return { ...state, commit: input.commit };
  return state;
}

/** A halt is lifted by allAtOnce, or by a newer commit that wants other content for the CR that failed. */
function liftHalt(w: Weighing, state: RolloutState): Phase {
  if (state.phase !== "Halted") return { state, events: [] };
  if (w.input.spec.allAtOnce) return lifted(state, "allAtOnce is set");
  if (state.halt && haltLifted(state.halt, w.input, w.members)) {
    return lifted(state, `Git wants another content for ${state.halt.resource}`);
  }
  return { state, events: [] };
}

/** A CR let through that is not healthy on its change within the time limit halts the rollout. */
function haltOnFailure(w: Weighing, state: RolloutState): Phase {
  if (state.phase !== "Progressing" || w.input.spec.allAtOnce) return { state, events: [] };
  const { crs, waves, nowMs, at } = w;
  const failed = w.members.find((m) => {
    const entry = crs[m.key];
    // A change Git has moved on from (a fix pushed) no longer counts: its CR gets the new content instead.
    return (
      entry?.released !== undefined &&
      entry.released.hash === m.liveHash &&
      m.target === m.liveHash &&
      entry.health?.healthy === false &&
      nowMs - Date.parse(entry.health.since) > waves[m.wave]!.timeLimitMs
    );
  });
  if (failed === undefined) return { state, events: [] };
  const wave = waves[failed.wave]!;
  const halt: Halt = {
    wave: wave.name,
    waveIndex: failed.wave,
    resource: failed.key,
    cluster: failed.cluster,
    hash: failed.liveHash!,
    commit: w.input.commit,
    reason: failed.health.reason,
    at,
  };
  return {
    state: { ...state, phase: "Halted", halt },
    events: [
      {
        resource: failed.identity,
        type: "Warning",
        reason: "RolloutHalted",
        message: `${rolloutName(state)} halted in wave ${wave.name}: ${failed.key} on ${failed.cluster} not healthy within ${wave.timeLimitMs / 1000}s: ${failed.health.reason}`,
      },
    ],
  };
}

/** Lets a member's content through: its health starts over on it, and new content counts as released. */
function letThrough(w: Weighing, m: Member, released: Release): void {
  released.release.add(m.key);
  const entry = w.crs[m.key]!;
  entry.health = { hash: m.target!, healthy: false, since: w.at };
  if (!isSafe(w, m)) entry.released = { hash: m.target!, at: w.at };
}

/**
 * What goes out whatever the waves say: back to the baseline, or drift repaired, never new content. A
 * paused rollout holds every change instead.
 */
function releaseSafe(w: Weighing, state: RolloutState, paused: boolean): Release {
  const released: Release = { release: new Set(), waiting: new Map() };
  const rollout = rolloutName(state);
  for (const m of w.members) {
    if (!isPending(m)) continue;
    if (paused) released.waiting.set(m.key, `${rollout} is paused`);
    else if (isSafe(w, m)) letThrough(w, m, released);
  }
  return released;
}

/** A change its cluster is not ready for waits, whatever wave is open, saying why (the preflight's finding). */
function holdBlocked(w: Weighing, state: RolloutState, released: Release): void {
  for (const m of w.members) {
    if (isBlocked(w, m))
      released.waiting.set(m.key, `${rolloutName(state)}: its cluster is not ready for it: ${m.blocked}`);
  }
}

/** While halted every gated change waits, saying where and what lifts it. */
function holdForHalt(w: Weighing, state: RolloutState, released: Release): void {
  const why = rolloutVerdict(rolloutViewOf(state)).message;
  for (const m of w.members) if (isGated(w, m)) released.waiting.set(m.key, why);
}

/**
 * The open wave lets its gated CRs through within maxUnavailable (in a rollout window, once it opened);
 * later waves' changes wait for theirs.
 */
function releaseWave(w: Weighing, state: RolloutState, open: number, released: Release): Phase {
  const { spec, now } = w.input;
  const wave = w.waves[open]!;
  const rollout = rolloutName(state);
  state.waves[wave.name] ??= {};
  const times = state.waves[wave.name]!;
  const closed = spec.allAtOnce || windowOpen(spec.windows, now) ? undefined : "outside the rollout windows";
  const verdict = (opened: boolean) =>
    rolloutVerdict({ phase: "Progressing", commit: state.commit, wave: wave.name, opened }).message;
  if (times.opened === undefined && closed) {
    for (const m of w.members) {
      if (isGated(w, m) && m.wave === open) released.waiting.set(m.key, `${verdict(false)}: ${closed}`);
      else if (isGated(w, m) && m.wave > open) {
        released.waiting.set(m.key, waitsForWave(rollout, w.waves[m.wave]!, closed));
      }
    }
    return { state, events: [] };
  }
  const approval = awaitedApproval(w, state, wave);
  if (approval !== undefined) {
    for (const m of w.members) {
      if (!isGated(w, m) || m.wave < open) continue;
      released.waiting.set(m.key, m.wave === open ? approval : waitsForWave(rollout, w.waves[m.wave]!));
    }
    return { state, events: [] };
  }
  const inWave = w.members.filter((m) => m.wave === open);
  let budget = spec.allAtOnce
    ? Number.POSITIVE_INFINITY
    : maxUnavailableCount(wave.maxUnavailable, inWave.length) -
      inWave.filter((m) => isUnavailable(w, m)).length;
  for (const m of inWave.filter((m) => isGated(w, m))) {
    if (isBlocked(w, m)) continue; // holdBlocked said why
    if (m.outsideWindow !== undefined) {
      released.waiting.set(m.key, `${rollout}: ${m.cluster} is ${m.outsideWindow}`);
      continue;
    }
    // A CR already counted takes its new content in its own place: the count does not grow.
    const ownPlace = isUnavailable(w, m);
    if ((ownPlace || budget > 0) && isWrite(m.step)) {
      letThrough(w, m, released);
      if (!ownPlace) budget--;
    } else {
      released.waiting.set(
        m.key,
        m.frozen
          ? `${rollout}: its file fails validation, so its change waits`
          : `${rollout}: waits for its turn in wave ${wave.name} (maxUnavailable ${wave.maxUnavailable})`,
      );
    }
  }
  const events: RolloutEvent[] = [];
  if (times.opened === undefined && inWave.some((m) => released.release.has(m.key))) {
    times.opened = w.at;
    delete times.completed;
    events.push({
      type: "Normal",
      reason: "RolloutWaveOpened",
      message: `${verdict(true)} (${count(inWave.filter((m) => isGated(w, m)).length, "CR")} to change)`,
    });
  }
  for (const m of w.members) {
    if (isGated(w, m) && m.wave > open) released.waiting.set(m.key, waitsForWave(rollout, w.waves[m.wave]!));
  }
  return { state, events };
}

/**
 * Why a wave that needs an approval waits for it: none in Git names the rollout's commit and the wave (an
 * approval of an earlier commit of the same rollout does not count for content a later one brought).
 * Undefined when it needs none, has one, or allAtOnce is set (an emergency commit is itself reviewed).
 */
function awaitedApproval(w: Weighing, state: RolloutState, wave: PlannedWave): string | undefined {
  if (!wave.approval || w.input.spec.allAtOnce) return undefined;
  if (w.input.approvals?.has(approvalKey(state.commit, wave.name))) return undefined;
  return approvalVerdict({ commit: state.commit, wave: wave.name });
}

/**
 * Waves done in this rollout, for people; the rollout completes when every wave is, and each healthy CR's
 * content (and the commit it came from) becomes its baseline.
 */
function completeWaves(w: Weighing, state: RolloutState, open: number): Phase {
  const { waves, members, crs, at } = w;
  const doneUpTo = open === -1 ? waves.length : open;
  for (let index = 0; index < doneUpTo; index++) {
    const name = waves[index]!.name;
    const times = state.waves[name];
    const changed = members.some((m) => m.wave === index && inEpoch(w, m));
    if ((times?.opened !== undefined || changed) && times?.completed === undefined) {
      state.waves[name] = { ...times, completed: at };
    }
  }
  for (let index = doneUpTo; index < waves.length; index++) {
    const times = state.waves[waves[index]!.name];
    if (times?.completed !== undefined) delete times.completed;
  }
  if (open !== -1 || state.phase !== "Progressing") return { state, events: [] };
  for (const m of members) {
    if (m.live === undefined || !m.health.healthy) continue;
    crs[m.key]!.baseline = contentOf(m.live);
  }
  for (const entry of Object.values(crs)) delete entry.released;
  const complete: RolloutState = { ...state, phase: "Complete" };
  return {
    state: complete,
    events: [
      {
        type: "Normal",
        reason: "RolloutCompleted",
        message: rolloutVerdict(rolloutViewOf(complete)).message,
      },
    ],
  };
}

/**
 * With HaltAndRevert, a halted rollout puts every changed CR back on its baseline (those it cannot be
 * reverted to again aside); a reverted CR is not also let through.
 */
function revertRequests(w: Weighing, state: RolloutState, release: Set<string>): RevertRequest[] {
  if (state.phase !== "Halted" || w.input.spec.onFailure !== "HaltAndRevert") return [];
  return w.members.flatMap((m): RevertRequest[] => {
    const baseline = w.crs[m.key]?.baseline;
    if (!inEpoch(w, m) || baseline === undefined || w.crs[m.key]?.revertFailed === baseline.hash) return [];
    release.delete(m.key);
    return [{ resource: m.identity, cluster: m.cluster, path: m.path, to: baseline, live: m.live! }];
  });
}

function waitsForWave(rollout: string, wave: PlannedWave, why?: string): string {
  return `${rollout} waits for its wave, ${wave.name}${why ? `: ${why}` : ""}`;
}

/**
 * A halt holds until a newer commit wants other content for the CR that failed, or no longer declares it
 * at all. A cluster that left its placement (held for its grace period) or a file that fails validation is
 * no such change: the content that failed may still be what Git wants.
 */
function haltLifted(halt: Halt, input: GateInput, members: readonly Member[]): boolean {
  if (input.commit === halt.commit) return false;
  const failed = members.find((m) => m.key === halt.resource);
  if (failed) return !failed.frozen && failed.target !== halt.hash;
  return !input.held.some((identity) => formatIdentity(identity) === halt.resource);
}

function lifted(state: RolloutState, why: string): Phase {
  const { halt: _halt, ...rest } = state;
  return {
    state: { ...rest, phase: "Progressing" },
    events: [
      {
        type: "Normal",
        reason: "RolloutHaltLifted",
        message: `the halt in wave ${state.halt?.wave} (${state.halt?.resource}) is lifted: ${why}`,
      },
    ],
  };
}

/**
 * Deletions follow the waves in reverse: the CRs of the last wave first; a wave's are deleted once no CR of
 * a later wave is left or being deleted. A paused rollout deletes nothing.
 */
export function gatePrunes(
  spec: RolloutSpec,
  clusters: readonly InventoryCluster[],
  paused: boolean,
  candidates: readonly PruneCandidate[],
  live: readonly KubeObject[],
): PruneCandidate[] {
  if (spec.allAtOnce && !paused) return [...candidates];
  const inventory = new Map(clusters.map((cluster) => [clusterKey(cluster), cluster]));
  const liveByKey = new Map(live.map((object) => [formatIdentity(identityOf(object)), object]));
  const waveOf = (key: string) => waveIndexOf(spec, targetOf(liveByKey.get(key)), inventory);
  const waves = plannedWaves(spec);
  const candidateKeys = candidates.map((candidate) => formatIdentity(candidate));
  const terminating = live
    .filter(
      (object) => object.metadata.deletionTimestamp && isManagedByFleet(object) && candidateKeys.length > 0,
    )
    .map((object) => waveOf(formatIdentity(identityOf(object))));
  const last = Math.max(-1, ...candidateKeys.map(waveOf), ...terminating);
  return candidates.map((candidate, index) => {
    const wave = waveOf(candidateKeys[index]!);
    if (paused) return { ...candidate, waiting: "the rollout is paused" };
    if (wave === last) return candidate;
    return { ...candidate, waiting: `deletions go in reverse wave order: wave ${waves[last]!.name} first` };
  });
}
