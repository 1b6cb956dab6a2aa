import { field, type Manifest } from "../manifest.ts";

// A workload an autoscaler manages must not get spec.replicas from the operator: the HPA owns it, and a
// replica count in every apply would fight it. Upstream keeps a list of names (pkg/reconciler/common/hpa.go);
// here the HPAs of the manifest set say it, which covers the same workloads of the bundled releases and also
// HPAs that come with spec.additionalManifests.

// Upstream's names for workloads scaled by something other than an HPA in the manifests (KEDA or the Kafka
// controller), which only their own manifests can bring.
const CUSTOM_AUTOSCALED = ["kafka-broker-dispatcher", "kafka-source-dispatcher", "kafka-channel-dispatcher"];

/** The workload (Deployment or StatefulSet) an HPA scales, by name. */
export function hpaTarget(manifest: Manifest): string | undefined {
  if (manifest.kind !== "HorizontalPodAutoscaler") return undefined;
  const name = field(manifest.spec, "scaleTargetRef", "name");
  return typeof name === "string" ? name : undefined;
}

/** The names of the workloads whose replicas an autoscaler owns. */
export function autoscaledWorkloads(manifests: readonly Manifest[]): Set<string> {
  const names = new Set(CUSTOM_AUTOSCALED);
  for (const manifest of manifests) {
    const target = hpaTarget(manifest);
    if (target !== undefined) names.add(target);
  }
  return names;
}

function minReplicasOf(hpa: Manifest): number {
  const minReplicas = field(hpa.spec, "minReplicas");
  return typeof minReplicas === "number" ? minReplicas : 0;
}

/** Whether raiseHpaMinimum would change `hpa`. */
export function hpaBelow(hpa: Manifest, replicas: number): boolean {
  return minReplicasOf(hpa) < replicas;
}

/**
 * Raises the HPA's minReplicas to `replicas` (never lowers it: an HPA that ships with more keeps them), and its
 * maxReplicas by as much, so min never exceeds max. Edits `hpa` in place: call it on a copy.
 */
export function raiseHpaMinimum(hpa: Manifest, replicas: number): void {
  const spec = hpa.spec as { minReplicas?: number; maxReplicas?: number };
  const minReplicas = minReplicasOf(hpa);
  if (minReplicas >= replicas) return;
  spec.minReplicas = replicas;
  if (typeof spec.maxReplicas === "number") spec.maxReplicas += replicas - minReplicas;
}
