import type { TargetResolver } from "../access/target.ts";
import { type KnativeResource, type KnativeStatus, OPERATOR_API_VERSION } from "../api/knative.ts";
import type { ApplyResult, ApplyState } from "../apply/engine.ts";
import { clusterLabel } from "../fleet/identity.ts";
import { applyInstall, dryRunOver, readInstallState } from "../install/apply.ts";
import { installNamespace } from "../install/identity.ts";
import { locateInstall } from "../install/layout.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject, ObjectRef } from "../kube/object.ts";
import type { PlanSource } from "./report.ts";

/** The hub and, through its ClusterProfiles, the spokes: what a live plan reads. */
export interface LiveClusters {
  hub: KubeClient;
  targets: TargetResolver;
}

/**
 * One CR's cluster as the plan sees it: live (the engine runs its pass with dryRun=All), or offline (the
 * engine runs over base's converged state, held in memory). Nothing is written either way.
 */
export interface ClusterView {
  source: PlanSource;
  /** The version the hub CR reports installed; offline, base's. */
  installedVersion: string | undefined;
  /** Where the install is on the cluster: live, located (layout.ts); offline, the canonical namespace. */
  namespace: string;
  /** Live, when the install was found in the older upstream layout and is adopted where it is. */
  adopted: boolean;
  /** The engine's dry pass of these rendered objects. */
  dryRun(
    resource: KnativeResource,
    rendered: readonly KubeObject[],
    concurrency: number,
  ): Promise<ApplyResult>;
  /** The install's state, for a removal: anchor, inventory, namespace and its objects of these kinds. */
  state(
    resource: KnativeResource,
    kinds: readonly Pick<ObjectRef, "apiVersion" | "kind">[],
  ): Promise<ApplyState>;
}

/** A CR's cluster could not be read; its plan falls back to offline and says why. */
class ClusterUnreachable extends Error {
  override name = "ClusterUnreachable";
}

/** A view that reads no cluster: `state` stands in for it (base's rendering, as if applied). */
export function offlineView(
  resource: KnativeResource,
  state: ApplyState,
  installedVersion: string | undefined,
): ClusterView {
  return {
    source: "offline",
    installedVersion,
    namespace: installNamespace(resource),
    adopted: false,
    dryRun: async (resource, rendered) => dryRunOver(state, resource, rendered),
    state: async () => state,
  };
}

/**
 * The CR's cluster, live: its target client, and its hub CR (the installed version; for a hub install the
 * uid that owns the install's objects). A CR not on the hub yet (the mirror lags) is taken to be at base's
 * version.
 */
export async function liveView(
  clusters: LiveClusters,
  resource: KnativeResource,
  baseVersion: string | undefined,
): Promise<ClusterView> {
  const ref = resource.spec.clusterProfileRef;
  const target = await clusters.targets.resolve(ref);
  if (!target.ok) throw new ClusterUnreachable(`${clusterLabel(ref)}: ${target.reason}: ${target.message}`);
  const { kind, metadata } = resource;
  const [hubResource, location] = await Promise.all([
    clusters.hub.get(OPERATOR_API_VERSION, kind, metadata.namespace, metadata.name),
    locateInstall(target.client, resource),
  ]);
  const { namespace } = location;
  const withHubUid = (r: KnativeResource): KnativeResource => ({
    ...r,
    metadata: { ...r.metadata, uid: hubResource?.metadata.uid ?? "" },
  });
  return {
    source: "live",
    installedVersion: hubResource ? (hubResource.status as KnativeStatus | undefined)?.version : baseVersion,
    ...location,
    dryRun: (r, rendered, concurrency) =>
      applyInstall(target.client, withHubUid(r), rendered, { mode: "dry-run", concurrency, namespace }),
    state: (r, kinds) => readInstallState(target.client, r, kinds, namespace),
  };
}
