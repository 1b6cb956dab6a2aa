import { clusterLabel } from "../access/target.ts";
import { canonicalJson } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { formatIdentity, identityOf } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { clusterKey } from "../placement/inventory.ts";
import { markdownCell, markdownCode, markdownText } from "../text/markdown.ts";
import { type ClusterRef, plannedWaves, waveIndexOf } from "./waves.ts";

/** One wave of plan's rollout section: the CRs in it, and which of them the merge changes. */
export interface WavePlan {
  name: string;
  maxUnavailable: string;
  soak: string;
  timeLimit: string;
  /** `Kind namespace/name` on its cluster, for every CR of the head in this wave. */
  resources: { resource: string; cluster: string; change: "create" | "update" | "none" }[];
  /** CRs of this wave the merge deletes (they go in reverse wave order). */
  deletions: string[];
}

export interface RolloutPlan {
  /** Where the head's policy is, `path:line`; absent when the head has none. */
  policy?: string;
  /** The head's rollout files that failed validation: the merge would hold every change. */
  failedPaths: string[];
  allAtOnce: boolean;
  paused: boolean;
  /** Whether selectors could be read: without the hub (or a snapshot) only waves by name are known. */
  inventory: "known" | "unknown";
  waves: WavePlan[];
}

const seconds = (ms: number): string => (ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`);

/**
 * The waves the merge goes through: for each, the head's CRs in it and which the merge changes (created or
 * with other content than on the base). Undefined when neither side has a policy.
 */
export function planRollout(
  base: FleetModel,
  head: FleetModel,
  clusters: readonly InventoryCluster[] | undefined,
): RolloutPlan | undefined {
  const { policy, failedPaths } = head.rollout;
  if (policy === undefined && failedPaths.length === 0) return undefined;
  const plan: RolloutPlan = {
    failedPaths,
    allAtOnce: policy?.rollout.spec.allAtOnce ?? false,
    paused: policy?.rollout.spec.paused ?? false,
    inventory: clusters === undefined ? "unknown" : "known",
    waves: [],
  };
  if (policy === undefined) return plan;
  const { spec } = policy.rollout;
  const inventory = new Map((clusters ?? []).map((cluster) => [clusterKey(cluster), cluster]));
  const baseContent = new Map(
    base.resources.map(({ resource }) => [formatIdentity(identityOf(resource)), canonicalJson(resource)]),
  );
  const waves: WavePlan[] = plannedWaves(spec).map((wave) => ({
    name: wave.name,
    maxUnavailable: String(wave.maxUnavailable),
    soak: seconds(wave.soakMs),
    timeLimit: seconds(wave.timeLimitMs),
    resources: [],
    deletions: [],
  }));
  const headKeys = new Set<string>();
  for (const { resource } of head.resources) {
    const key = formatIdentity(identityOf(resource));
    headKeys.add(key);
    const ref = (resource.spec as { clusterProfileRef?: ClusterRef }).clusterProfileRef;
    const before = baseContent.get(key);
    waves[waveIndexOf(spec, ref, inventory)]!.resources.push({
      resource: key,
      cluster: clusterLabel(ref),
      change: before === undefined ? "create" : before === canonicalJson(resource) ? "none" : "update",
    });
  }
  for (const { resource } of base.resources) {
    const key = formatIdentity(identityOf(resource));
    if (headKeys.has(key)) continue;
    const ref = (resource.spec as { clusterProfileRef?: ClusterRef }).clusterProfileRef;
    waves[waveIndexOf(spec, ref, inventory)]!.deletions.push(key);
  }
  for (const wave of waves) wave.resources.sort((a, b) => compareStrings(a.resource, b.resource));
  return { ...plan, policy: `${policy.path}:${policy.position.line}`, waves };
}

/** plan's rollout section, in Markdown. */
export function renderRolloutPlan(plan: RolloutPlan): string {
  const lines = ["## Rollout", ""];
  if (plan.policy === undefined) {
    lines.push(
      `The rollout policy (${plan.failedPaths.map((p) => markdownCode(p)).join(", ")}) fails validation: after the merge every change waits until it is fixed.`,
    );
    return lines.join("\n");
  }
  const changing = plan.waves.filter((w) => w.resources.some((r) => r.change !== "none"));
  lines.push(
    `Policy ${markdownCode(plan.policy)}. ` +
      (plan.allAtOnce
        ? "`allAtOnce` is set: the merge goes to every cluster at once, without waves."
        : `The merge changes CRs in ${changing.length} of ${plan.waves.length} waves; each wave opens when the one before is healthy and has soaked.`) +
      (plan.paused ? " The policy is **paused**: no wave opens until it is resumed." : ""),
  );
  if (plan.inventory === "unknown") {
    lines.push(
      "",
      "Waves chosen by ClusterProfile labels or properties need the hub: run plan with `--kubeconfig`, or give `--cluster-profiles FILE`. Without them, such clusters are shown in the remaining wave.",
    );
  }
  lines.push(
    "",
    "| wave | CR | cluster | change | maxUnavailable | soak | time limit |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const wave of plan.waves) {
    const rows =
      wave.resources.length > 0 ? wave.resources : [{ resource: "", cluster: "", change: "none" as const }];
    for (const row of rows) {
      lines.push(
        `| ${markdownCell(wave.name)} | ${row.resource ? markdownCode(row.resource, { inTable: true }) : "(none)"} | ${markdownCell(row.cluster)} | ${row.resource ? row.change : ""} | ${markdownCell(wave.maxUnavailable)} | ${wave.soak} | ${wave.timeLimit} |`,
      );
    }
  }
  const deletions = [...plan.waves]
    .reverse()
    .flatMap((wave) => wave.deletions.map((d) => `${d} (wave ${wave.name})`));
  if (deletions.length > 0) {
    lines.push(
      "",
      `Deletions go in reverse wave order: ${deletions.map((d) => markdownText(d)).join(", ")}.`,
    );
  }
  return lines.join("\n");
}
