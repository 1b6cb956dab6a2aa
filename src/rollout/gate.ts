import { createHash } from "node:crypto";
import { findCondition, readinessOf } from "../api/conditions.ts";
import type { KnativeStatus } from "../api/knative.ts";
import {
  DESIRED_HASH_ANNOTATION,
  isManagedByFleet,
  ROLLOUT_WAITING_ANNOTATION,
  SOURCE_COMMIT_ANNOTATION,
} from "../api/labels.ts";
import { canonicalJson } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import type { DesiredResource } from "../fleet/model.ts";
import { formatIdentity } from "../fleet/parse.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeObject } from "../kube/object.ts";
import { type ApplyStep, identityOf, type PruneCandidate } from "../mirror/plan.ts";
import { clusterKey, type InventoryCluster } from "../placement/inventory.ts";
import type { HubContent, RolloutState } from "./state.ts";
import {
  type ClusterRef,
  maxUnavailableCount,
  type PlannedWave,
  plannedWaves,
  waveIndexOf,
} from "./waves.ts";
import { windowOpen } from "./windows.ts";

// The rollout gate, pure: from the policy, the state kept on the hub, the mirror's planned steps and the hub's
// CRs, which changes go out now, which wait (and why), and the next state. Level-based: every sync recomputes
// the whole decision from those inputs, so a new leader that reads the same state decides the same.

export interface GateInput {
  spec: RolloutSpec;
  /** Paused on the hub (the state ConfigMap's annotation), beside the file's `paused`. */
  hubPaused: boolean;
  /** The digest of every desired CR (`revisionOf`). */
  revision: string;
  commit: string;
  clusters: readonly InventoryCluster[];
  state: RolloutState | undefined;
  now: Date;
}

export interface RolloutEvent {
  /** The hub CR it is about, as `Kind namespace/name`. */
  resource: string;
  type: "Normal" | "Warning";
  reason: "RolloutWaveOpened" | "RolloutHalted" | "RolloutReverted" | "RolloutCompleted";
  message: string;
}

export interface GateOutcome {
  steps: ApplyStep[];
  state: RolloutState;
  /** Each hub CR that keeps its last applied spec this sync, by `Kind namespace/name`, and why. */
  waiting: Map<string, string>;
  events: RolloutEvent[];
  /** The wave that is open, for plan, status and metrics. */
  openWave?: string;
}

/** A CR's health as the gate reads it: Ready=True on the current generation and DeploymentsAvailable=True. */
export function healthOf(cr: KubeObject): { healthy: boolean; reason: string } {
  const status = cr.status as KnativeStatus | undefined;
  const read = readinessOf({ metadata: cr.metadata, status });
  const deployments = findCondition(status?.conditions, "DeploymentsAvailable");
  if (read.deleting) return { healthy: false, reason: "the CR is being deleted" };
  if (read.stale || status?.observedGeneration === undefined) {
    return {
      healthy: false,
      reason: `not reconciled yet (observedGeneration ${status?.observedGeneration ?? "unset"}, generation ${String(cr.metadata.generation)})`,
    };
  }
  if (read.ready === "True" && deployments?.status === "True") return { healthy: true, reason: "" };
  const blocking =
    read.blocking ??
    (deployments && deployments.status !== "True"
      ? deployments
      : { type: "DeploymentsAvailable", status: "Unknown" });
  const why = [blocking.reason, blocking.message].filter(Boolean).join(": ");
  return { healthy: false, reason: `${blocking.type}=${blocking.status}${why ? ` (${why})` : ""}` };
}

interface Member {
  key: string;
  wave: number;
  cluster: string;
  step?: ApplyStep;
  live?: KubeObject;
}

const clusterOf = (object: KubeObject | undefined): ClusterRef | undefined => {
  const ref = (object?.spec as { clusterProfileRef?: ClusterRef } | undefined)?.clusterProfileRef;
  return ref && typeof ref.name === "string" ? { namespace: ref.namespace ?? "", name: ref.name } : undefined;
};

const clusterLabel = (ref: ClusterRef | undefined): string => (ref ? clusterKey(ref) : "the hub");

/** The digest of every desired CR: what a revision is. A commit that changes no CR is no new revision. */
export function revisionOf(resources: readonly DesiredResource[]): string {
  const contents = resources.map(({ resource }) => canonicalJson(resource)).sort(compareStrings);
  return createHash("sha256").update(contents.join("\n")).digest("hex").slice(0, 16);
}

/** Which changes of one sync go out now. */
export function gateApplies(
  input: GateInput,
  steps: readonly ApplyStep[],
  live: readonly KubeObject[],
): GateOutcome {
  const { spec, now } = input;
  const at = now.toISOString();
  const waves = plannedWaves(spec);
  const inventory = new Map(input.clusters.map((cluster) => [clusterKey(cluster), cluster]));
  const liveByKey = new Map(live.map((object) => [formatIdentity(identityOf(object)), object]));
  const events: RolloutEvent[] = [];

  let state: RolloutState =
    input.state?.revision === input.revision
      ? structuredClone(input.state)
      : {
          revision: input.revision,
          commit: input.commit,
          startedAt: at,
          phase: "Progressing",
          wave: 0,
          released: {},
          lastHealthy: input.state?.lastHealthy ?? {},
          history: [],
        };

  const members: Member[] = steps.map((step) => {
    const key = formatIdentity(step);
    const current = liveByKey.get(key);
    const ref = clusterOf("object" in step ? step.object : current);
    return { key, wave: waveIndexOf(spec, ref, inventory), cluster: clusterLabel(ref), step, live: current };
  });
  const isPending = (m: Member) => m.step?.action === "create" || m.step?.action === "update";
  const isCurrent = (m: Member) => m.step?.action === "unchanged" && m.live !== undefined;
  const health = (m: Member) =>
    isCurrent(m) ? healthOf(m.live!) : { healthy: false, reason: "not applied yet" };

  // What each cluster last ran healthily, for halt-and-revert.
  for (const m of members) {
    if (!isCurrent(m) || !health(m).healthy) continue;
    const hash = m.live!.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
    if (hash !== undefined && state.lastHealthy[m.key]?.hash !== hash) {
      state.lastHealthy[m.key] = {
        commit: m.live!.metadata.annotations?.[SOURCE_COMMIT_ANNOTATION] ?? "",
        hash,
        content: hubContentOf(m.live!),
      };
    }
  }
  const desiredKeys = new Set(members.map((m) => m.key));
  for (const key of Object.keys(state.lastHealthy)) if (!desiredKeys.has(key)) delete state.lastHealthy[key];

  const release = new Set<string>();
  const waiting = new Map<string, string>();
  const reverts: ApplyStep[] = [];
  const revision = `revision ${state.commit.slice(0, 12)}`;
  const paused = spec.paused || input.hubPaused;

  if (spec.allAtOnce) {
    // The emergency path: every change now, no waves, soak or windows; a pause still holds.
    for (const m of members.filter(isPending)) {
      if (paused) waiting.set(m.key, `${revision} is paused (allAtOnce, but paused)`);
      else release.add(m.key);
    }
    if (!paused) state = { ...state, phase: "Complete", wave: waves.length, halt: undefined };
  } else if (state.phase === "Halted") {
    const halt = state.halt!;
    for (const m of members.filter(isPending)) {
      waiting.set(
        m.key,
        `${revision} halted in wave ${halt.wave}: ${halt.resource} on ${halt.cluster}: ${halt.reason}; a newer commit supersedes it`,
      );
    }
  } else {
    state = advance(state, members, waves, {
      at,
      now,
      paused,
      windows: spec.windows,
      revision,
      isPending,
      health,
      release,
      waiting,
      events,
    });
  }
  if (!spec.allAtOnce && state.phase === "Halted" && spec.onFailure === "HaltAndRevert") {
    reverts.push(...revertsOf(state, members, revision, waiting, events));
  }

  const gated = steps.map((step): ApplyStep => {
    const key = formatIdentity(step);
    if ((step.action !== "create" && step.action !== "update") || release.has(key)) return step;
    const reason = waiting.get(key) ?? `${revision} waits`;
    const { object: _held, ...outcome } = step;
    return { ...outcome, action: "waiting", reason };
  });
  for (const key of release) state.released[key] ??= at;
  const openWave = state.phase === "Progressing" ? waves[state.wave]?.name : undefined;
  if (openWave === undefined) delete state.waveName;
  else state.waveName = openWave;
  const revertKeys = new Set(reverts.map((step) => formatIdentity(step)));
  return {
    steps: [...gated.filter((step) => !revertKeys.has(formatIdentity(step))), ...reverts],
    state,
    waiting,
    events,
    ...(openWave ? { openWave } : {}),
  };
}

/** The halted wave's CRs that were changed by this revision go back to what was last healthy on them. */
function revertsOf(
  state: RolloutState,
  members: readonly Member[],
  revision: string,
  waiting: Map<string, string>,
  events: RolloutEvent[],
): ApplyStep[] {
  const halt = state.halt!;
  return members.flatMap((m): ApplyStep[] => {
    if (m.wave !== halt.waveIndex || state.released[m.key] === undefined || m.live === undefined) return [];
    const last = state.lastHealthy[m.key];
    if (last === undefined || m.live.metadata.annotations?.[DESIRED_HASH_ANNOTATION] === last.hash) return [];
    waiting.delete(m.key);
    events.push({
      resource: m.key,
      type: "Warning",
      reason: "RolloutReverted",
      message: `${revision} halted; ${m.key} on ${m.cluster} goes back to ${last.commit.slice(0, 12)}`,
    });
    return [
      {
        ...identityOf(m.live),
        path: m.step?.path ?? "",
        action: "update",
        reason: `reverted to ${last.commit.slice(0, 12)}, the last revision healthy on ${m.cluster}`,
        object: revertObject(m.live, last.content),
      },
    ];
  });
}

interface AdvanceContext {
  at: string;
  now: Date;
  paused: boolean;
  windows: RolloutSpec["windows"];
  revision: string;
  isPending(m: Member): boolean;
  health(m: Member): { healthy: boolean; reason: string };
  release: Set<string>;
  waiting: Map<string, string>;
  events: RolloutEvent[];
}

/** Opens, fills, checks and closes waves in order until one has to wait. */
function advance(
  start: RolloutState,
  members: readonly Member[],
  waves: readonly PlannedWave[],
  ctx: AdvanceContext,
): RolloutState {
  let state = start;
  const nowMs = ctx.now.getTime();
  // A wave already passed lets its CRs through at once (a drift repaired, a new cluster of that wave).
  for (const m of members) if (ctx.isPending(m) && m.wave < state.wave) ctx.release.add(m.key);

  while (state.wave < waves.length) {
    const wave = waves[state.wave]!;
    const inWave = members.filter((m) => m.wave === state.wave);
    const pending = inWave.filter(ctx.isPending);
    const released = inWave.filter((m) => state.released[m.key] !== undefined && !ctx.isPending(m));

    if (pending.length === 0 && released.every((m) => ctx.health(m).healthy)) {
      // Nothing left to change: soak, unless nothing changed in the wave at all.
      if (released.length > 0) {
        const since = state.healthySince ?? ctx.at;
        state = { ...state, healthySince: since };
        const soakEnds = Date.parse(since) + wave.soakMs;
        if (nowMs < soakEnds) {
          holdLater(members, waves, state.wave, "", ctx);
          return state;
        }
      }
      if (released.length > 0 || state.waveOpenedAt !== undefined) {
        state.history = [
          ...state.history,
          { wave: wave.name, opened: state.waveOpenedAt, completed: ctx.at },
        ];
      }
      state = { ...state, wave: state.wave + 1, waveOpenedAt: undefined, healthySince: undefined };
      continue;
    }
    state = { ...state, healthySince: undefined };

    // A CR let through that is not healthy within the time limit halts the rollout.
    const failed = released.find(
      (m) => !ctx.health(m).healthy && nowMs - Date.parse(state.released[m.key]!) > wave.timeLimitMs,
    );
    if (failed) {
      const reason = ctx.health(failed).reason;
      state = {
        ...state,
        phase: "Halted",
        halt: {
          wave: wave.name,
          waveIndex: state.wave,
          resource: failed.key,
          cluster: failed.cluster,
          reason,
          at: ctx.at,
        },
      };
      ctx.events.push({
        resource: failed.key,
        type: "Warning",
        reason: "RolloutHalted",
        message: `${ctx.revision} halted in wave ${wave.name}: ${failed.key} on ${failed.cluster} not healthy within ${wave.timeLimitMs / 1000}s: ${reason}`,
      });
      for (const m of members.filter(ctx.isPending)) {
        ctx.waiting.set(m.key, `${ctx.revision} halted in wave ${wave.name}: ${failed.cluster}: ${reason}`);
      }
      return state;
    }

    if (state.waveOpenedAt === undefined) {
      const closed = ctx.paused
        ? "the rollout is paused"
        : !windowOpen(ctx.windows, ctx.now)
          ? "outside the rollout windows"
          : undefined;
      if (closed) {
        holdLater(members, waves, state.wave - 1, `: ${closed}`, ctx);
        return state;
      }
      state = { ...state, waveOpenedAt: ctx.at };
      ctx.events.push({
        resource: pending[0]?.key ?? released[0]?.key ?? "",
        type: "Normal",
        reason: "RolloutWaveOpened",
        message: `${ctx.revision}: wave ${wave.name} opened (${pending.length} CR(s) to change)`,
      });
    }

    // Within the open wave, at most maxUnavailable CRs change at once; a pause stops new ones.
    const unavailable = released.filter((m) => !ctx.health(m).healthy).length;
    const budget = ctx.paused
      ? 0
      : Math.max(0, maxUnavailableCount(wave.maxUnavailable, inWave.length) - unavailable);
    pending.forEach((m, index) => {
      if (index < budget) ctx.release.add(m.key);
      else
        ctx.waiting.set(
          m.key,
          ctx.paused
            ? `${ctx.revision}: wave ${wave.name} is paused`
            : `${ctx.revision}: waits for its turn in wave ${wave.name} (maxUnavailable ${wave.maxUnavailable})`,
        );
    });
    holdLater(members, waves, state.wave, "", ctx);
    return state;
  }
  if (state.phase !== "Complete") {
    ctx.events.push({
      resource: "",
      type: "Normal",
      reason: "RolloutCompleted",
      message: `${ctx.revision} reached every wave`,
    });
  }
  return { ...state, phase: "Complete" };
}

/**
 * Every pending CR of a wave after `wave` waits for its own wave, and says so. The note names no progress
 * (which wave is open, how many are done) on purpose: it is an annotation, and a note that changed with
 * every step would patch every waiting CR (and write an Event) at each one.
 */
function holdLater(
  members: readonly Member[],
  waves: readonly PlannedWave[],
  wave: number,
  why: string,
  ctx: AdvanceContext,
): void {
  for (const m of members) {
    if (ctx.isPending(m) && m.wave > wave) {
      ctx.waiting.set(m.key, `${ctx.revision} waits for its wave, ${waves[m.wave]!.name}${why}`);
    }
  }
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
  const waveOf = (key: string) => waveIndexOf(spec, clusterOf(liveByKey.get(key)), inventory);
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

/** What a hub CR holds of the fleet's content: what a revert writes back. */
function hubContentOf(object: KubeObject): HubContent {
  const { labels, annotations } = object.metadata;
  return {
    ...(labels ? { labels } : {}),
    ...(annotations ? { annotations: mirroredAnnotations(annotations) } : {}),
    spec: (object.spec ?? {}) as Record<string, unknown>,
  };
}

/** The annotations the mirror writes (the fleet file's and ours), without the gate's own or kubectl's. */
function mirroredAnnotations(annotations: Record<string, string>): Record<string, string> {
  const foreign = new Set([ROLLOUT_WAITING_ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration"]);
  return Object.fromEntries(Object.entries(annotations).filter(([key]) => !foreign.has(key)));
}

function revertObject(live: KubeObject, content: HubContent): KubeObject {
  return {
    apiVersion: live.apiVersion,
    kind: live.kind,
    metadata: {
      name: live.metadata.name,
      namespace: live.metadata.namespace,
      ...(content.labels ? { labels: content.labels } : {}),
      ...(content.annotations ? { annotations: content.annotations } : {}),
    },
    spec: content.spec,
  };
}
