import { readinessOf } from "../api/conditions.ts";
import type { KnativeStatus } from "../api/knative.ts";
import { DESIRED_HASH_ANNOTATION, SOURCE_COMMIT_ANNOTATION } from "../api/labels.ts";
import { desiredHash } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import {
  type ClusterRef,
  clusterKey,
  clusterLabel,
  formatIdentity,
  identityOf,
  type ResourceIdentity,
  targetOf,
} from "../fleet/identity.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeObject } from "../kube/object.ts";
import type { ApplyStep } from "../mirror/decide.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { versionOf } from "../upgrade/chain.ts";
import type { Content, CrState, RolloutState } from "./state.ts";
import { ALL_AT_ONCE_WAVE, type PlannedWave, plannedWaves, waveIndexOf } from "./waves.ts";
import { clusterWindowClosed } from "./windows.ts";

// The gate's first step, pure: which CRs it weighs (its members), what is known of each (the content Git
// wants, its health on the content it has), and the questions the phases ask of a member (pending, safe,
// unavailable, soaked) and of a wave (done). The phases (gate.ts) read the same `crs` as they update it.

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
   * The state was started over by a person (it was refused or missing): each healthy CR's content is its
   * baseline again, so HaltAndRevert keeps something to go back to (a revert still re-derives it from Git).
   */
  startedOver?: boolean;
  /**
   * CRs declared by fleet files that failed validation (by `Kind namespace/name`): they keep their last
   * applied content, and the content Git last wanted for them stays their target.
   */
  frozen: readonly ResourceIdentity[];
  /** CRs no file declares that are kept anyway (a cluster within its departure grace period). */
  held: readonly ResourceIdentity[];
  now: Date;
  /** The step under way of each upgrade chain (src/upgrade), kept in the state for the next sync. */
  upgrades?: Readonly<Record<string, string>>;
  /**
   * CRs whose cluster is not ready for the change they wait for (the spoke preflight, src/preflight), by
   * `Kind namespace/name`, with why: they are not let through, and their wave does not wait for them.
   */
  blocked?: ReadonlyMap<string, string>;
  /**
   * CRs Ready on the content they have that a verification gate of the policy fails (src/verify), with the
   * gate, its query or URL and the value: the gate reads them as not healthy.
   */
  failing?: ReadonlyMap<string, string>;
  /** The approvals in Git, by `approvalKey(commit, wave)`: a wave that needs one opens only with it. */
  approvals?: ReadonlySet<string>;
}

/** One CR the gate weighs: wanted by the fleet (a step), or kept at its last state by a failed file. */
export interface Member {
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
  /** Why its cluster is not ready for its change (the spoke preflight). */
  blocked?: string;
  /** Why its cluster takes no new content now: outside its own maintenance windows. */
  outsideWindow?: string;
}

/** What one sync weighs: the members by wave then key, and what is known of each CR (updated in place). */
export interface Weighing {
  input: GateInput;
  waves: PlannedWave[];
  members: Member[];
  /** What is known of each CR by key; the phases go on updating it, and read it as they do. */
  crs: Record<string, CrState>;
  /** This commit changed what Git wants for a CR that already had a target: a running rollout takes its name. */
  changedByCommit: boolean;
  /** The sync's time, as stored and in milliseconds. */
  at: string;
  nowMs: number;
}

/** A CR's health as the gate reads it: the one readiness verdict, Current or not, and why not. */
export function healthOf(cr: KubeObject): { healthy: boolean; reason: string } {
  const readiness = readinessOf({ metadata: cr.metadata, status: cr.status as KnativeStatus | undefined });
  return { healthy: readiness.phase === "Current", reason: readiness.message ?? "" };
}

/** Its health, and a Ready CR that a verification gate fails is not healthy, for the gate's reason. */
function verifiedHealthOf(cr: KubeObject, failing: string | undefined): { healthy: boolean; reason: string } {
  const health = healthOf(cr);
  return health.healthy && failing !== undefined ? { healthy: false, reason: failing } : health;
}

export const hashOf = (object: KubeObject | undefined): string | undefined =>
  object?.metadata.annotations?.[DESIRED_HASH_ANNOTATION];

/**
 * What a hub CR has, as a baseline records it: its digest, the commit it came from, and its version (what an
 * upgrade chain steps from; a revert re-derives a step with it).
 */
export function contentOf(live: KubeObject): Content {
  const version = versionOf(live);
  return {
    hash: hashOf(live) ?? "",
    commit: live.metadata.annotations?.[SOURCE_COMMIT_ANNOTATION] ?? "",
    ...(version !== undefined && { version }),
  };
}

export const isWrite = (step: ApplyStep | undefined): step is ApplyStep & { object: KubeObject } =>
  step?.action === "create" || step?.action === "update";

/** The waves a sync gates by: the policy's, or with allAtOnce one wave of every CR without soak or limit. */
function wavesOf(spec: RolloutSpec): PlannedWave[] {
  if (!spec.allAtOnce) return plannedWaves(spec);
  return [
    {
      name: ALL_AT_ONCE_WAVE,
      maxUnavailable: "100%",
      soakMs: 0,
      timeLimitMs: Number.POSITIVE_INFINITY,
      approval: false,
    },
  ];
}

/** The members of one sync and what is known of each, from the stored state, the steps and the hub's CRs. */
export function weigh(input: GateInput, steps: readonly ApplyStep[], live: readonly KubeObject[]): Weighing {
  const { spec, now } = input;
  const at = now.toISOString();
  const inventory = new Map(input.clusters.map((cluster) => [clusterKey(cluster), cluster]));
  const waveOf = (ref: ClusterRef | undefined) => (spec.allAtOnce ? 0 : waveIndexOf(spec, ref, inventory));
  const liveByKey = new Map(live.map((object) => [formatIdentity(identityOf(object)), object]));
  const crs: Record<string, CrState> = structuredClone(input.state?.crs ?? {});

  // The members: every CR the fleet wants, and every CR a failed file keeps at its last state.
  const members: Member[] = [];
  const member = (key: string, identity: ResourceIdentity, path: string, step: ApplyStep | undefined) => {
    const current = liveByKey.get(key);
    const frozen = step === undefined || step.action === "refused";
    const ref = targetOf(isWrite(step) ? step.object : current) ?? crs[key]?.cluster;
    const target = frozen
      ? (crs[key]?.target?.hash ?? hashOf(current))
      : isWrite(step)
        ? (hashOf(step.object) ?? desiredHash(step.object))
        : hashOf(current);
    const outsideWindow = spec.allAtOnce
      ? undefined
      : clusterWindowClosed(spec, ref, ref && inventory.get(clusterKey(ref)), now);
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
      health: current
        ? verifiedHealthOf(current, input.failing?.get(key))
        : { healthy: false, reason: "not applied yet" },
      ...(input.blocked?.has(key) && { blocked: input.blocked.get(key) }),
      ...(outsideWindow !== undefined && { outsideWindow }),
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
  const changedByCommit = learn(members, crs, input.commit, at);
  for (const key of Object.keys(crs)) if (!wanted.has(key) && !liveByKey.has(key)) delete crs[key];
  return { input, waves: wavesOf(spec), members, crs, changedByCommit, at, nowMs: now.getTime() };
}

/**
 * What is known of each member: the content Git wants, its health on the content it has. A CR gone from the
 * hub and from Git is forgotten (by the caller); one still on the hub keeps its baseline, whatever Git says
 * now. Whether a commit other than the one a target was first wanted at changed one.
 */
function learn(
  members: readonly Member[],
  crs: Record<string, CrState>,
  commit: string,
  at: string,
): boolean {
  let changedByCommit = false;
  for (const m of members) {
    crs[m.key] ??= {};
    const entry = crs[m.key]!;
    if (!m.frozen && m.target !== undefined && entry.target?.hash !== m.target) {
      changedByCommit ||= entry.target !== undefined && entry.target.commit !== commit;
      entry.target = { hash: m.target, commit };
    }
    if (m.liveHash !== undefined && m.live !== undefined) {
      const healthy = m.health.healthy;
      if (entry.health?.hash !== m.liveHash || entry.health.healthy !== healthy) {
        entry.health = { hash: m.liveHash, healthy, since: at };
      }
    } else delete entry.health;
  }
  return changedByCommit;
}

const baselineOf = (w: Weighing, m: Member) => w.crs[m.key]?.baseline;

/** Changed since the baseline (the content of the last completed rollout). */
export const inEpoch = (w: Weighing, m: Member): boolean =>
  m.live !== undefined && m.liveHash !== baselineOf(w, m)?.hash;

/** Git wants content the CR does not have. */
export const isPending = (m: Member): boolean => m.target !== undefined && m.target !== m.liveHash;

/** Back to the content of the last completed rollout, or the same content rewritten (drift): safe now. */
export const isSafe = (w: Weighing, m: Member): boolean =>
  isWrite(m.step) && (m.target === m.liveHash || m.target === baselineOf(w, m)?.hash);

/** New content the waves decide on. */
export const isGated = (w: Weighing, m: Member): boolean => isPending(m) && !isSafe(w, m);

/**
 * Changed since the baseline and not healthy, on the content Git wants or on one it has moved on from:
 * what maxUnavailable counts.
 */
export const isUnavailable = (w: Weighing, m: Member): boolean => inEpoch(w, m) && !m.health.healthy;

/** Healthy on the content it has for its wave's soak. */
export function soaked(w: Weighing, m: Member): boolean {
  const health = w.crs[m.key]?.health;
  return (
    health?.healthy === true &&
    health.hash === m.liveHash &&
    w.nowMs - Date.parse(health.since) >= w.waves[m.wave]!.soakMs
  );
}

/**
 * A member whose cluster fails the preflight for a change it has not started: its wave goes on without it.
 */
export const isBlocked = (w: Weighing, m: Member): boolean =>
  m.blocked !== undefined && isGated(w, m) && !inEpoch(w, m);

/**
 * Every member of the wave is on the content Git wants and, if it changed, soaked on it; a member its
 * cluster's preflight holds back is not waited for, unless the policy says HoldWave.
 */
const waveDone = (w: Weighing, wave: number): boolean =>
  w.members.every(
    (m) =>
      m.wave !== wave ||
      (isBlocked(w, m) && w.input.spec.onPreflightFailure === "Wait") ||
      (!isPending(m) && (!inEpoch(w, m) || soaked(w, m))),
  );

/** The first wave that is not done, or -1. */
export const openWaveIndex = (w: Weighing): number => w.waves.findIndex((_, index) => !waveDone(w, index));
