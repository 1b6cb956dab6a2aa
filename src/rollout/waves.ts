import { durationMs } from "../fleet/duration.ts";
import { type ClusterRef, clusterKey } from "../fleet/identity.ts";
import {
  type MaxUnavailable,
  REMAINING_WAVE,
  type RolloutSpec,
  type RolloutWave,
} from "../fleet/rollout-schema.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { matchesTerm } from "../placement/select.ts";

/** One wave as the gate runs it: the policy's defaults filled in, durations in milliseconds. */
export interface PlannedWave {
  name: string;
  maxUnavailable: MaxUnavailable;
  soakMs: number;
  timeLimitMs: number;
  /** It opens only once approved in Git for the rollout's commit (the remaining wave never needs one). */
  approval: boolean;
}

/** The one wave of an `allAtOnce` policy (an emergency change): every CR, no soak, no limit. */
export const ALL_AT_ONCE_WAVE = "all-at-once";

/** The policy's waves in order, then the implicit `remaining` wave of the clusters no wave selects. */
export function plannedWaves(spec: RolloutSpec): PlannedWave[] {
  const planned = (wave: Partial<RolloutWave> & { name: string }): PlannedWave => ({
    name: wave.name,
    maxUnavailable: wave.maxUnavailable ?? spec.maxUnavailable,
    soakMs: durationMs(wave.soak ?? spec.soak)!,
    timeLimitMs: durationMs(wave.timeLimit ?? spec.timeLimit)!,
    approval: wave.approval === "Required",
  });
  return [...spec.waves.map(planned), planned({ name: REMAINING_WAVE })];
}

/**
 * The index of the first wave that selects the cluster (by name, or by a term over its ClusterProfile's
 * labels and properties); the remaining wave when none does. A cluster the inventory does not know can only
 * be chosen by name; the hub itself is always in the remaining wave.
 */
export function waveIndexOf(
  spec: RolloutSpec,
  cluster: ClusterRef | undefined,
  inventory: ReadonlyMap<string, InventoryCluster>,
): number {
  if (cluster === undefined) return spec.waves.length;
  const known = inventory.get(clusterKey(cluster));
  const index = spec.waves.findIndex((wave) => selects(wave, cluster, known));
  return index === -1 ? spec.waves.length : index;
}

/** Whether a selection of the policy (a wave, a cluster's windows) picks the cluster: by name, or by a term. */
export function selects(
  selection: Pick<RolloutWave, "clusterProfiles" | "clusterSelectorTerms">,
  cluster: ClusterRef,
  known: InventoryCluster | undefined,
): boolean {
  return (
    (selection.clusterProfiles ?? []).some(
      (ref) => ref.namespace === cluster.namespace && ref.name === cluster.name,
    ) ||
    (known !== undefined && (selection.clusterSelectorTerms ?? []).some((term) => matchesTerm(term, known)))
  );
}

/** How many CRs of a wave of `size` may be changing at once: a count, or a percentage rounded down, at least 1. */
export function maxUnavailableCount(maxUnavailable: MaxUnavailable, size: number): number {
  if (typeof maxUnavailable === "number") return maxUnavailable;
  const percent = Number(maxUnavailable.slice(0, -1));
  return Math.max(1, Math.floor((size * percent) / 100));
}

/** The wave of each cluster (by `namespace/name`), as the gate places it: what a commit status names. */
export function clusterWaves(
  spec: RolloutSpec,
  clusters: readonly ClusterRef[],
  inventory: readonly InventoryCluster[],
): Record<string, string> {
  const known = new Map(inventory.map((cluster) => [clusterKey(cluster), cluster]));
  const names = plannedWaves(spec).map((wave) => wave.name);
  return Object.fromEntries(
    clusters.map((ref) => [
      clusterKey(ref),
      spec.allAtOnce ? ALL_AT_ONCE_WAVE : names[waveIndexOf(spec, ref, known)]!,
    ]),
  );
}
