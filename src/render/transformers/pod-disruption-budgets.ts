import type { CommonSpec } from "../../api/knative.ts";
import { type Transformer, unchanged, updateWhere } from "../manifest.ts";

/**
 * Upstream's PodDisruptionBudgetsTransform: spec.podDisruptionBudgets[].minAvailable replaces the named PDB's.
 * Upstream applies no other field of the override.
 */
export function applyPodDisruptionBudgetOverrides(
  overrides: CommonSpec["podDisruptionBudgets"],
): Transformer {
  const minAvailable = new Map(
    (overrides ?? []).flatMap((override) =>
      override.minAvailable === undefined ? [] : [[override.name, override.minAvailable] as const],
    ),
  );
  if (minAvailable.size === 0) return unchanged;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.kind === "PodDisruptionBudget" && minAvailable.has(manifest.metadata.name ?? ""),
      (pdb) => {
        const spec = (pdb.spec ?? {}) as Record<string, unknown>;
        spec.minAvailable = minAvailable.get(pdb.metadata.name ?? "");
        pdb.spec = spec;
      },
    );
}
