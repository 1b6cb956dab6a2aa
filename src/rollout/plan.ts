import { compareStrings } from "../fleet/diagnostic.ts";
import { formatDuration } from "../fleet/duration.ts";
import { type ClusterRef, clusterKey, clusterLabel } from "../fleet/identity.ts";
import type { FleetRolloutPolicy } from "../fleet/model.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { plannedWaves, waveIndexOf } from "./waves.ts";
import { clusterWindowClosed } from "./windows.ts";

// `plan`'s view of the rollout: the waves a merge goes through, every CR it changes in its wave.

/** A CR the merge changes, as the rollout sees it: in the wave of its cluster. */
export interface RolloutChange {
  /** `Kind namespace/name`. */
  resource: string;
  cluster: ClusterRef | undefined;
  change: "create" | "update" | "reinstall" | "delete";
}

/** One wave of plan's rollout section: the CRs the merge changes in it. */
interface WavePlan {
  name: string;
  maxUnavailable: string;
  soak: string;
  timeLimit: string;
  /** Every CR the merge creates, updates or reinstalls in this wave, on its cluster. */
  resources: { resource: string; cluster: string; change: "create" | "update" | "reinstall" }[];
  /** CRs of this wave the merge deletes (they go in reverse wave order). */
  deletions: string[];
  /** It opens only with an approval in Git of the rollout's commit (the merge's). */
  approval: boolean;
}

export interface RolloutPlan {
  /** Where the head's policy is, `path:line`; absent when the head has none. */
  policy?: string;
  /** Where base's policy was, when the merge removes it: the next change goes everywhere at once. */
  removed?: string;
  /** The head's rollout files that failed validation: the merge would hold every change. */
  failedPaths: string[];
  allAtOnce: boolean;
  paused: boolean;
  /** Whether selectors could be read: without the hub (or a snapshot) only waves by name are known. */
  inventory: "known" | "unknown";
  /** Clusters the merge changes that are outside their own maintenance windows now, with why. */
  outsideWindows: { cluster: string; why: string }[];
  waves: WavePlan[];
}

/**
 * The waves the merge goes through, each with the CRs it changes there. Undefined when neither base nor
 * head has a policy; one that base had and head removes is said, as what the next change then does.
 */
export function planRollout(
  base: FleetRolloutPolicy,
  head: FleetRolloutPolicy,
  changes: readonly RolloutChange[],
  clusters: readonly InventoryCluster[] | undefined,
  now: Date = new Date(),
): RolloutPlan | undefined {
  const { policy, failedPaths } = head;
  const hadPolicy = base.policy !== undefined || base.failedPaths.length > 0;
  if (policy === undefined && failedPaths.length === 0 && !hadPolicy) return undefined;
  const plan: RolloutPlan = {
    failedPaths,
    allAtOnce: policy?.rollout.spec.allAtOnce ?? false,
    paused: policy?.rollout.spec.paused ?? false,
    inventory: clusters === undefined ? "unknown" : "known",
    outsideWindows: [],
    waves: [],
  };
  if (policy === undefined) {
    const removed = base.policy ? `${base.policy.path}:${base.policy.position.line}` : base.failedPaths[0];
    return failedPaths.length === 0 && removed !== undefined ? { ...plan, removed } : plan;
  }
  const { spec } = policy.rollout;
  const inventory = new Map((clusters ?? []).map((cluster) => [clusterKey(cluster), cluster]));
  const waves: WavePlan[] = plannedWaves(spec).map((wave) => ({
    name: wave.name,
    maxUnavailable: String(wave.maxUnavailable),
    soak: formatDuration(wave.soakMs),
    timeLimit: formatDuration(wave.timeLimitMs),
    resources: [],
    deletions: [],
    approval: wave.approval && !spec.allAtOnce,
  }));
  const outside = new Map<string, string>();
  for (const { resource, cluster, change } of changes) {
    const wave = waves[waveIndexOf(spec, cluster, inventory)]!;
    if (change === "delete") wave.deletions.push(resource);
    else wave.resources.push({ resource, cluster: clusterLabel(cluster), change });
    const why = spec.allAtOnce
      ? undefined
      : clusterWindowClosed(spec, cluster, cluster && inventory.get(clusterKey(cluster)), now);
    if (change !== "delete" && why !== undefined) outside.set(clusterLabel(cluster), why);
  }
  plan.outsideWindows = [...outside].map(([cluster, why]) => ({ cluster, why }));
  plan.outsideWindows.sort((a, b) => compareStrings(a.cluster, b.cluster));
  for (const wave of waves) {
    wave.resources.sort((a, b) => compareStrings(a.resource, b.resource));
    wave.deletions.sort(compareStrings);
  }
  return { ...plan, policy: `${policy.path}:${policy.position.line}`, waves };
}
