import type { CommonSpec } from "../../api/knative.ts";
import { isRecord, type Manifest, type Transformer, unchanged, updateWhere } from "../manifest.ts";
import { autoscaledWorkloads, hpaBelow, raiseHpaMinimum } from "./autoscaling.ts";
import { workloadOverrides } from "./workloads.ts";

// Upstream's HighAvailabilityTransform (pkg/reconciler/common/ha.go).

// Runs as a single instance whatever the HA setting: the PingSource controller owns its scale.
const HA_UNSUPPORTED = new Set(["pingsource-mt-adapter"]);

/**
 * spec.high-availability.replicas for every Deployment, except those an autoscaler scales (their HPA's
 * minimum is raised instead) and those a workload override gives replicas of their own.
 */
export function applyHighAvailability(spec: CommonSpec): Transformer {
  const replicas = spec["high-availability"]?.replicas;
  if (replicas === undefined) return unchanged;
  // An override's replicas win over high-availability for anything of that name, its HPA included.
  const pinned = new Set(
    workloadOverrides(spec)
      .filter((override) => override.replicas !== undefined)
      .map((override) => override.name),
  );
  return (manifests) => {
    const autoscaled = autoscaledWorkloads(manifests);
    const scalesDeployment = (manifest: Manifest) => {
      const name = manifest.metadata.name ?? "";
      return (
        manifest.kind === "Deployment" &&
        isRecord(manifest.spec) &&
        !HA_UNSUPPORTED.has(name) &&
        !autoscaled.has(name)
      );
    };
    return updateWhere(
      manifests,
      (manifest) =>
        !pinned.has(manifest.metadata.name ?? "") &&
        (scalesDeployment(manifest) ||
          (manifest.kind === "HorizontalPodAutoscaler" && hpaBelow(manifest, replicas))),
      (manifest) => {
        if (manifest.kind === "HorizontalPodAutoscaler") raiseHpaMinimum(manifest, replicas);
        else (manifest.spec as { replicas?: number }).replicas = replicas;
      },
    );
  };
}
