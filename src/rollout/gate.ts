import { clusterLabel } from "../access/target.ts";
import { readinessOf } from "../api/conditions.ts";
import type { KnativeStatus } from "../api/knative.ts";
import { DESIRED_HASH_ANNOTATION, isManagedByFleet, SOURCE_COMMIT_ANNOTATION } from "../api/labels.ts";
import { desiredHash } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeObject } from "../kube/object.ts";
import type { ApplyStep, PruneCandidate } from "../mirror/decide.ts";
import { clusterKey, type InventoryCluster } from "../placement/inventory.ts";
import type { Content, CrState, Halt, RolloutState } from "./state.ts";
import {
  type ClusterRef,
  maxUnavailableCount,
  type PlannedWave,
  plannedWaves,
  waveIndexOf,
} from "./waves.ts";
import { windowOpen } from "./windows.ts";

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

export interface GateInput {
  spec: RolloutSpec;
  /** Paused on the hub (the state ConfigMap's annotation), beside the file's `paused`. */
  hubPaused: boolean;
  /** The head commit of this sync. */
  commit: string;
  clusters: readonly InventoryCluster[];
  /** The stored state; undefined when there is none (a first rollout, or one started over). */
  state: RolloutState | undefined;
  /**
   * CRs declared by fleet files that failed validation (by `Kind namespace/name`): they keep their last
   * applied content, and the content Git last wanted for them stays their target.
   */
  frozen: readonly ResourceIdentity[];
  /** CRs no file declares that are kept anyway (a cluster within its departure grace period). */
  held: readonly ResourceIdentity[];
  now: Date;
}

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
}

/** A CR's health as the gate reads it: the one readiness verdict, Current or not, and why not. */
export function healthOf(cr: KubeObject): { healthy: boolean; reason: string } {
  const readiness = readinessOf({ metadata: cr.metadata, status: cr.status as KnativeStatus | undefined });
  return { healthy: readiness.phase === "Current", reason: readiness.message ?? "" };
}

/** One CR the gate weighs: wanted by the fleet (a step), or kept at its last state by a failed file. */
interface Member {
  key: string;
  identity: ResourceIdentity;
  path: string;
  wave: number;
  cluster: string;
  step?: ApplyStep;
  live?: KubeObject;
  liveHash?: string;
  /** The content Git wants; for a frozen CR the one it last wanted. */
  target?: string;
  frozen: boolean;
  health: { healthy: boolean; reason: string };
}

const hashOf = (object: KubeObject | undefined): string | undefined =>
  object?.metadata.annotations?.[DESIRED_HASH_ANNOTATION];

const clusterRefOf = (object: KubeObject | undefined): ClusterRef | undefined => {
  const ref = (object?.spec as { clusterProfileRef?: ClusterRef } | undefined)?.clusterProfileRef;
  return ref && typeof ref.name === "string" ? { namespace: ref.namespace ?? "", name: ref.name } : undefined;
};

const isWrite = (step: ApplyStep | undefined): step is ApplyStep & { object: KubeObject } =>
  step?.action === "create" || step?.action === "update";

/** The waves a sync gates by: the policy's, or with allAtOnce one wave of every CR without soak or limit. */
function wavesOf(spec: RolloutSpec): PlannedWave[] {
  if (!spec.allAtOnce) return plannedWaves(spec);
  return [{ name: "all-at-once", maxUnavailable: "100%", soakMs: 0, timeLimitMs: Number.POSITIVE_INFINITY }];
}

/** Which changes of one sync go out now, which are reverted, and the next state. */
export function gateApplies(
  input: GateInput,
  steps: readonly ApplyStep[],
  live: readonly KubeObject[],
): GateOutcome {
  const { spec, now } = input;
  const at = now.toISOString();
  const nowMs = now.getTime();
  const waves = wavesOf(spec);
  const inventory = new Map(input.clusters.map((cluster) => [clusterKey(cluster), cluster]));
  const waveOf = (ref: ClusterRef | undefined) => (spec.allAtOnce ? 0 : waveIndexOf(spec, ref, inventory));
  const liveByKey = new Map(live.map((object) => [formatIdentity(identityOf(object)), object]));
  const stored = input.state;
  const crs: Record<string, CrState> = structuredClone(stored?.crs ?? {});
  const events: RolloutEvent[] = [];

  // The members: every CR the fleet wants, and every CR a failed file keeps at its last state.
  const members: Member[] = [];
  const member = (key: string, identity: ResourceIdentity, path: string, step: ApplyStep | undefined) => {
    const current = liveByKey.get(key);
    const frozen = step === undefined || step.action === "refused";
    const ref = clusterRefOf(isWrite(step) ? step.object : current) ?? crs[key]?.cluster;
    const target = frozen
      ? (crs[key]?.target?.hash ?? hashOf(current))
      : isWrite(step)
        ? (hashOf(step.object) ?? desiredHash(step.object))
        : hashOf(current);
    if (ref) {
      crs[key] ??= {};
      crs[key].cluster = { namespace: ref.namespace, name: ref.name };
    }
    members.push({
      key,
      identity,
      path,
      wave: waveOf(ref),
      cluster: clusterLabel(ref),
      ...(step ? { step } : {}),
      ...(current ? { live: current, liveHash: hashOf(current) } : {}),
      ...(target !== undefined ? { target } : {}),
      frozen,
      health: current ? healthOf(current) : { healthy: false, reason: "not applied yet" },
    });
  };
  for (const step of steps) {
    if (step.action === "conflict" || step.action === "terminating") continue;
    const { kind, namespace, name } = step;
    member(formatIdentity(step), { kind, namespace, name }, step.path, step);
  }
  const wanted = new Set(members.map((m) => m.key));
  // A failed file's CR is weighed even before it was ever created: the content it was last wanted with waits.
  for (const identity of input.frozen) {
    const key = formatIdentity(identity);
    const current = liveByKey.get(key);
    if (wanted.has(key) || current?.metadata.deletionTimestamp) continue;
    if (current === undefined && crs[key]?.target === undefined) continue;
    wanted.add(key);
    member(key, identity, "", undefined);
  }
  members.sort((a, b) => a.wave - b.wave || compareStrings(a.key, b.key));

  // What is known of each CR: the content Git wants, its health on the content it has. A CR gone from the
  // hub and from Git is forgotten; one still on the hub keeps its baseline, whatever Git says now.
  let changedByCommit = false;
  for (const m of members) {
    crs[m.key] ??= {};
    const entry = crs[m.key]!;
    if (!m.frozen && m.target !== undefined && entry.target?.hash !== m.target) {
      changedByCommit ||= entry.target !== undefined && entry.target.commit !== input.commit;
      entry.target = { hash: m.target, commit: input.commit };
    }
    if (m.liveHash !== undefined && m.live !== undefined) {
      const healthy = m.health.healthy;
      if (entry.health?.hash !== m.liveHash || entry.health.healthy !== healthy) {
        entry.health = { hash: m.liveHash, healthy, since: at };
      }
    } else delete entry.health;
  }
  for (const key of Object.keys(crs)) if (!wanted.has(key) && !liveByKey.has(key)) delete crs[key];

  const baselineOf = (m: Member) => crs[m.key]?.baseline;
  const inEpoch = (m: Member) => m.live !== undefined && m.liveHash !== baselineOf(m)?.hash;
  const isPending = (m: Member) => m.target !== undefined && m.target !== m.liveHash;
  /** Back to the content of the last completed rollout, or the same content rewritten (drift): safe now. */
  const isSafe = (m: Member) =>
    isWrite(m.step) && (m.target === m.liveHash || m.target === baselineOf(m)?.hash);
  const isGated = (m: Member) => isPending(m) && !isSafe(m);
  /**
   * Changed since the baseline and not healthy, on the content Git wants or on one it has moved on from:
   * what maxUnavailable counts.
   */
  const isUnavailable = (m: Member) => inEpoch(m) && !m.health.healthy;
  const soaked = (m: Member) => {
    const health = crs[m.key]?.health;
    return (
      health?.healthy === true &&
      health.hash === m.liveHash &&
      nowMs - Date.parse(health.since) >= waves[m.wave]!.soakMs
    );
  };
  const waveDone = (wave: number) =>
    members.every((m) => m.wave !== wave || (!isPending(m) && (!inEpoch(m) || soaked(m))));

  let state: RolloutState = stored
    ? { ...structuredClone(stored), crs }
    : { schema: 2, phase: "Complete", commit: input.commit, startedAt: at, waves: {}, crs };
  const rollout = () => `rollout of ${state.commit.slice(0, 12)}`;
  const paused = spec.paused || input.hubPaused;
  let open = waves.findIndex((_, index) => !waveDone(index));

  // A new rollout starts when something changes after a completed one; a commit that changes content
  // during one gives it its name (the rollout goes on: what is known of each CR stays).
  if (state.phase === "Complete" && open !== -1) {
    state = { ...state, phase: "Progressing", commit: input.commit, startedAt: at, waves: {} };
    for (const entry of Object.values(crs)) delete entry.released;
  } else if (state.phase !== "Complete" && changedByCommit) {
    state = { ...state, commit: input.commit };
  }

  if (state.phase === "Halted" && spec.allAtOnce) state = lifted(state, "allAtOnce is set", events);
  if (state.phase === "Halted" && state.halt && haltLifted(state.halt, input, members)) {
    state = lifted(state, `Git wants another content for ${state.halt.resource}`, events);
  }

  // A CR let through that is not healthy on its change within the time limit halts the rollout.
  if (state.phase === "Progressing" && !spec.allAtOnce) {
    const failed = members.find((m) => {
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
    if (failed) {
      const wave = waves[failed.wave]!;
      const halt: Halt = {
        wave: wave.name,
        waveIndex: failed.wave,
        resource: failed.key,
        cluster: failed.cluster,
        hash: failed.liveHash!,
        commit: input.commit,
        reason: failed.health.reason,
        at,
      };
      state = { ...state, phase: "Halted", halt };
      events.push({
        resource: failed.identity,
        type: "Warning",
        reason: "RolloutHalted",
        message: `${rollout()} halted in wave ${wave.name}: ${failed.key} on ${failed.cluster} not healthy within ${wave.timeLimitMs / 1000}s: ${failed.health.reason}`,
      });
    }
  }

  const release = new Set<string>();
  const waiting = new Map<string, string>();
  const letThrough = (m: Member) => {
    release.add(m.key);
    const entry = crs[m.key]!;
    entry.health = { hash: m.target!, healthy: false, since: at };
    if (!isSafe(m)) entry.released = { hash: m.target!, at };
  };

  if (paused) {
    for (const m of members.filter(isPending)) waiting.set(m.key, `${rollout()} is paused`);
  } else {
    // Back to the baseline, or drift repaired: never new content, so it goes at once.
    for (const m of members) if (isPending(m) && isSafe(m)) letThrough(m);
  }

  if (state.phase === "Halted") {
    const halt = state.halt!;
    const why = `${rollout()} halted in wave ${halt.wave}: ${halt.resource} on ${halt.cluster}: ${halt.reason}; a commit that changes ${halt.resource} lifts the halt`;
    for (const m of members) if (isGated(m)) waiting.set(m.key, why);
  } else if (open !== -1 && !paused) {
    const wave = waves[open]!;
    state.waves[wave.name] ??= {};
    const times = state.waves[wave.name]!;
    const closed =
      spec.allAtOnce || windowOpen(spec.windows, now) ? undefined : "outside the rollout windows";
    if (times.opened === undefined && closed) {
      for (const m of members) {
        if (isGated(m) && m.wave >= open) waiting.set(m.key, waitsForWave(rollout(), waves[m.wave]!, closed));
      }
    } else {
      const inWave = members.filter((m) => m.wave === open);
      let budget = spec.allAtOnce
        ? Number.POSITIVE_INFINITY
        : maxUnavailableCount(wave.maxUnavailable, inWave.length) - inWave.filter(isUnavailable).length;
      for (const m of inWave.filter(isGated)) {
        // A CR already counted takes its new content in its own place: the count does not grow.
        const ownPlace = isUnavailable(m);
        if ((ownPlace || budget > 0) && isWrite(m.step)) {
          letThrough(m);
          if (!ownPlace) budget--;
        } else {
          waiting.set(
            m.key,
            m.frozen
              ? `${rollout()}: its file fails validation, so its change waits`
              : `${rollout()}: waits for its turn in wave ${wave.name} (maxUnavailable ${wave.maxUnavailable})`,
          );
        }
      }
      if (times.opened === undefined && inWave.some((m) => release.has(m.key))) {
        times.opened = at;
        delete times.completed;
        events.push({
          type: "Normal",
          reason: "RolloutWaveOpened",
          message: `${rollout()}: wave ${wave.name} opened (${inWave.filter(isGated).length} CR(s) to change)`,
        });
      }
      for (const m of members)
        if (isGated(m) && m.wave > open) waiting.set(m.key, waitsForWave(rollout(), waves[m.wave]!));
    }
  }

  // Waves done in this rollout, for people; the rollout completes when every wave is.
  if (state.phase !== "Halted") {
    const doneUpTo = open === -1 ? waves.length : open;
    for (let index = 0; index < doneUpTo; index++) {
      const name = waves[index]!.name;
      const times = state.waves[name];
      const changed = members.some((m) => m.wave === index && inEpoch(m));
      if ((times?.opened !== undefined || changed) && times?.completed === undefined) {
        state.waves[name] = { ...times, completed: at };
      }
    }
    for (let index = doneUpTo; index < waves.length; index++) {
      const times = state.waves[waves[index]!.name];
      if (times?.completed !== undefined) delete times.completed;
    }
    if (open === -1 && state.phase === "Progressing") {
      for (const m of members) {
        if (m.live === undefined || !m.health.healthy) continue;
        crs[m.key]!.baseline = {
          hash: m.liveHash ?? "",
          commit: m.live.metadata.annotations?.[SOURCE_COMMIT_ANNOTATION] ?? "",
        };
      }
      for (const entry of Object.values(crs)) delete entry.released;
      state = { ...state, phase: "Complete" };
      events.push({ type: "Normal", reason: "RolloutCompleted", message: `${rollout()} reached every wave` });
    }
  }

  const reverts: RevertRequest[] =
    state.phase === "Halted" && spec.onFailure === "HaltAndRevert"
      ? members.flatMap((m): RevertRequest[] => {
          const baseline = baselineOf(m);
          if (!inEpoch(m) || baseline === undefined || crs[m.key]?.revertFailed === baseline.hash) return [];
          release.delete(m.key);
          return [{ resource: m.identity, cluster: m.cluster, path: m.path, to: baseline, live: m.live! }];
        })
      : [];

  open = waves.findIndex((_, index) => !waveDone(index));
  const openWave = state.phase === "Progressing" && open !== -1 ? waves[open]!.name : undefined;
  if (openWave === undefined) delete state.waveName;
  else state.waveName = openWave;
  const gated = steps.map((step): ApplyStep => {
    const key = formatIdentity(step);
    if (!isWrite(step) || release.has(key)) return step;
    const { object: _held, ...outcome } = step;
    return { ...outcome, action: "waiting", reason: waiting.get(key) ?? `${rollout()} waits` };
  });
  return { steps: gated, reverts, state, waiting, events, ...(openWave ? { openWave } : {}) };
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

function lifted(state: RolloutState, why: string, events: RolloutEvent[]): RolloutState {
  events.push({
    type: "Normal",
    reason: "RolloutHaltLifted",
    message: `the halt in wave ${state.halt?.wave} (${state.halt?.resource}) is lifted: ${why}`,
  });
  const { halt: _halt, ...rest } = state;
  return { ...rest, phase: "Progressing" };
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
  const waveOf = (key: string) => waveIndexOf(spec, clusterRefOf(liveByKey.get(key)), inventory);
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
