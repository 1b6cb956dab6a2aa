import { clusterKey, formatIdentity, identityOf, targetOf } from "../fleet/identity.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeObject } from "../kube/object.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { checksWave, type GateOptions, type GateResult } from "../verify/evaluate.ts";
import type { RolloutState } from "./state.ts";
import { plannedWaves, waveIndexOf } from "./waves.ts";
import { hashOf, healthOf } from "./weigh.ts";

// The policy's verification gates (src/verify) as the rollout reads them: which hub CRs they check this
// sync (those Ready on content the current rollout changed: before their wave counts them healthy, and on
// through the soak), and the failures as the gate's `failing` input. The gate then treats a failing CR as
// an unhealthy one: its wave stays open, and past the time limit the rollout halts with the gate's detail.

/** One hub CR a gate checks: its key, its cluster and its wave's name. */
interface Verified {
  key: string;
  cluster: InventoryCluster;
  wave: string;
}

/** What the gates cost in one sync, for the log and the note (requests made, time spent). */
interface VerificationCost {
  crs: number;
  requests: number;
  durationMs: number;
}

/** The hub CRs the gates check this sync: Ready, on content changed since their baseline, in a gated wave. */
export function crsToVerify(
  spec: RolloutSpec,
  clusters: readonly InventoryCluster[],
  state: RolloutState | undefined,
  live: readonly KubeObject[],
): Verified[] {
  if ((spec.gates ?? []).length === 0 || spec.allAtOnce || state?.phase !== "Progressing") return [];
  const inventory = new Map(clusters.map((cluster) => [clusterKey(cluster), cluster]));
  const waves = plannedWaves(spec);
  return live.flatMap((cr): Verified[] => {
    const key = formatIdentity(identityOf(cr));
    const ref = targetOf(cr);
    const cluster = ref && inventory.get(clusterKey(ref));
    const changed = hashOf(cr) !== state.crs[key]?.baseline?.hash;
    if (!cluster || !changed || cr.metadata.deletionTimestamp || !healthOf(cr).healthy) return [];
    const wave = waves[waveIndexOf(spec, ref, inventory)]!.name;
    return (spec.gates ?? []).some((gate) => checksWave(gate, wave)) ? [{ key, cluster, wave }] : [];
  });
}

/**
 * The gates evaluated for each CR (`evaluate` is src/verify's `evaluateGates`), the failing ones by key
 * with every failed gate's detail, and what it cost.
 */
export async function verify(
  crs: readonly Verified[],
  evaluate: (cluster: InventoryCluster, options: GateOptions) => Promise<GateResult[]>,
): Promise<{ failing: Map<string, string>; cost: VerificationCost }> {
  const failing = new Map<string, string>();
  const cost: VerificationCost = { crs: crs.length, requests: 0, durationMs: 0 };
  const started = performance.now();
  const results = await Promise.all(crs.map((cr) => evaluate(cr.cluster, { wave: cr.wave })));
  crs.forEach((cr, index) => {
    const failed = results[index]!.filter((result) => !result.passed);
    cost.requests += results[index]!.reduce((sum, result) => sum + result.requests, 0);
    if (failed.length > 0) failing.set(cr.key, failed.map((result) => result.detail).join("; "));
  });
  cost.durationMs = Math.round(performance.now() - started);
  return { failing, cost };
}
