import { type KubeObject, nameOf } from "../kube/object.ts";

interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  conditions?: { type: string; status: string }[];
}

/**
 * A Deployment is available when its controller has seen the current generation and reports
 * Available=True with every replica updated (what `kubectl rollout status` waits for).
 */
export function isDeploymentAvailable(deployment: KubeObject): boolean {
  const status = (deployment.status ?? {}) as DeploymentStatus;
  const generation = Number(deployment.metadata.generation ?? 0);
  if ((status.observedGeneration ?? 0) < generation) return false;
  const want = Number((deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1);
  if ((status.updatedReplicas ?? 0) < want) return false;
  return (status.conditions ?? []).some((c) => c.type === "Available" && c.status === "True");
}

/** Names of the desired Deployments that are missing or not available yet, sorted. */
export function unavailableDeployments(
  desired: readonly KubeObject[],
  live: readonly KubeObject[],
): string[] {
  const byName = new Map(live.map((d) => [`${d.metadata.namespace}/${d.metadata.name}`, d]));
  return desired
    .filter((d) => d.kind === "Deployment")
    .filter((d) => {
      const current = byName.get(`${d.metadata.namespace}/${d.metadata.name}`);
      return !current || !isDeploymentAvailable(current);
    })
    .map(nameOf)
    .sort();
}
