import type { KnativeResource } from "../api/knative.ts";
import { DESIRED_HASH_ANNOTATION } from "../api/labels.ts";
import { selectorOf } from "../apply/engine.ts";
import type { KubeClient } from "../kube/client.ts";
import { type KubeObject, nameOf } from "../kube/object.ts";
import { isForbidden } from "../kube/rest.ts";
import { installNamespace, ownerOf, ownershipLabels } from "./identity.ts";
import { endpointSliceSelector, namespacesOf, unservedWebhooks, webhookServices } from "./webhooks.ts";

interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  conditions?: { type: string; status: string }[];
}

/**
 * A Deployment is available when its controller has seen the current generation and reports
 * Available=True with every replica updated, no old replica left and every updated one available (what
 * `kubectl rollout status` waits for): an old pod keeps Available=True while a new one never starts.
 */
export function isDeploymentAvailable(deployment: KubeObject): boolean {
  const status = (deployment.status ?? {}) as DeploymentStatus;
  const generation = Number(deployment.metadata.generation ?? 0);
  if ((status.observedGeneration ?? 0) < generation) return false;
  const want = Number((deployment.spec as { replicas?: number } | undefined)?.replicas ?? 1);
  const updated = status.updatedReplicas ?? 0;
  if (updated < want || (status.replicas ?? 0) > updated || (status.availableReplicas ?? 0) < updated) {
    return false;
  }
  return (status.conditions ?? []).some((c) => c.type === "Available" && c.status === "True");
}

/**
 * Names of the desired Deployments that are missing or not available yet, sorted. A desired Deployment
 * stamped for apply (its desired-hash) counts only once the live one carries the same hash: a live object
 * read from a watch cache before the pass's own write arrived is the previous version, whose generation
 * its status may well have caught up with.
 */
export function unavailableDeployments(
  desired: readonly KubeObject[],
  live: readonly KubeObject[],
): string[] {
  const byName = new Map(live.map((d) => [`${d.metadata.namespace}/${d.metadata.name}`, d]));
  const hashOf = (d: KubeObject) => d.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
  return desired
    .filter((d) => d.kind === "Deployment")
    .filter((d) => {
      const current = byName.get(`${d.metadata.namespace}/${d.metadata.name}`);
      if (!current) return true;
      if (hashOf(d) !== undefined && hashOf(current) !== hashOf(d)) return true;
      return !isDeploymentAvailable(current);
    })
    .map(nameOf)
    .sort();
}

/** The namespaces the install's desired Deployments live in, sorted. */
export function deploymentNamespaces(resource: KnativeResource, desired: readonly KubeObject[]): string[] {
  const fallback = installNamespace(resource);
  return [
    ...new Set(desired.filter((o) => o.kind === "Deployment").map((o) => o.metadata.namespace ?? fallback)),
  ].sort();
}

/** The install's live Deployments, listed in each namespace the desired ones live in. */
export async function readDeployments(
  client: KubeClient,
  resource: KnativeResource,
  desired: readonly KubeObject[],
): Promise<KubeObject[]> {
  const labelSelector = selectorOf(ownershipLabels(ownerOf(resource)));
  const lists = await Promise.all(
    deploymentNamespaces(resource, desired).map((namespace) =>
      client.list("apps/v1", "Deployment", { namespace, labelSelector }),
    ),
  );
  return lists.flatMap((list) => list.items);
}

/**
 * Whether every Service the desired objects' webhooks call has a ready endpoint: undefined when they all do
 * (or the release has no webhook), else the webhook Services with none (`unserved`), or the namespaces whose
 * EndpointSlices the spoke's credentials may not list (`forbidden`: nothing can be verified). One list of
 * EndpointSlices per namespace, selected by service name: run it once the Deployments are Available.
 */
export async function checkWebhooks(
  client: KubeClient,
  desired: readonly KubeObject[],
): Promise<{ unserved: string[] } | { forbidden: string[] } | undefined> {
  const services = webhookServices(desired);
  const forbidden: string[] = [];
  const lists = await Promise.all(
    namespacesOf(services).map((namespace) =>
      client
        .list("discovery.k8s.io/v1", "EndpointSlice", {
          namespace,
          labelSelector: endpointSliceSelector(
            services.filter((s) => s.namespace === namespace).map((s) => s.name),
          ),
        })
        .then((list) => list.items)
        .catch((err: unknown) => {
          if (!isForbidden(err)) throw err;
          forbidden.push(namespace);
          return [];
        }),
    ),
  );
  if (forbidden.length > 0) return { forbidden: forbidden.sort() };
  const unserved = unservedWebhooks(services, lists.flat());
  return unserved.length > 0 ? { unserved } : undefined;
}
