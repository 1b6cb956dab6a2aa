import { type KnativeResource, type KnativeStatus, OPERATOR_API_VERSION } from "../api/knative.ts";
import { inParallel } from "../apply/apply.ts";
import { type KubeObject, type ObjectRef, objectKey } from "../apply/objects.ts";
import { anchorName, decodeInventory, type Owner, selectorFor } from "../apply/ownership.ts";
import type { KubeClient } from "../kube/client.ts";
import { isNotFound } from "../kube/rest.ts";
import { locateInstall } from "../reconcile/layout.ts";
import { clusterLabel, installNamespace, type TargetResolver } from "../reconcile/target.ts";
import { type InstallState, ownerOf } from "./install.ts";
import type { PlanSource } from "./report.ts";

/** The hub and, through its ClusterProfiles, the spokes: what a live plan reads. */
export interface LiveClusters {
  hub: KubeClient;
  targets: TargetResolver;
}

/** One CR's cluster as the plan sees it: live, or base's rendering standing in for it. */
export interface ClusterView {
  source: PlanSource;
  state: InstallState;
  /** The uid of what owns the install's objects (the anchor, or the hub CR for a hub install); "" if none. */
  ownerUid: string;
  /** The version the hub CR reports installed; offline, base's. */
  installedVersion: string | undefined;
  /** The object as the cluster will hold it once applied: the server's dry run, or offline the object itself. */
  afterApply(desired: KubeObject): Promise<KubeObject>;
  /** Live, when the install was found in the older upstream layout: the namespace it is adopted in. */
  adoptedNamespace?: string;
}

/** A CR's cluster could not be read; its plan falls back to offline and says why. */
class ClusterUnreachable extends Error {
  override name = "ClusterUnreachable";
}

const LIST_CONCURRENCY = 4;

/** A view that reads no cluster: `state` stands in for it (base's rendering, as if applied). */
export function offlineView(state: InstallState, installedVersion: string | undefined): ClusterView {
  return { source: "offline", state, ownerUid: "", installedVersion, afterApply: async (desired) => desired };
}

/**
 * Reads the CR's install from its cluster (anchor, inventory, install namespace, and the objects of
 * `kinds` and of the inventory that carry the CR's ownership labels) and the installed version from its
 * hub CR. Nothing is written: changes are worked out by server-side dry runs.
 */
export async function liveView(
  clusters: LiveClusters,
  resource: KnativeResource,
  kinds: readonly Pick<ObjectRef, "apiVersion" | "kind">[],
  baseVersion: string | undefined,
): Promise<ClusterView> {
  const ref = resource.spec.clusterProfileRef;
  const target = await clusters.targets.resolve(ref);
  if (!target.ok) throw new ClusterUnreachable(`${clusterLabel(ref)}: ${target.reason}: ${target.message}`);
  const { client } = target;
  const owner = ownerOf(resource);
  const namespace = installNamespace(resource);
  const location = await locateInstall(client, resource);
  const { kind, metadata } = resource;
  const [anchor, hubResource, installNamespaceObject] = await Promise.all([
    client.get("v1", "ConfigMap", namespace, anchorName(owner)),
    clusters.hub.get(OPERATOR_API_VERSION, kind, metadata.namespace, metadata.name),
    client.get("v1", "Namespace", undefined, namespace),
  ]);
  const inventory = decodeInventory(anchor);
  const owning = target.local ? hubResource : anchor;
  return {
    source: "live",
    state: {
      inventory,
      objects: await listInstallObjects(client, owner, [...kinds, ...inventory]),
      anchorExists: anchor !== undefined,
      namespaceExists: installNamespaceObject !== undefined,
    },
    ownerUid: String(owning?.metadata.uid ?? ""),
    // A CR not on the hub yet (the mirror lags) is taken to be at base's version.
    installedVersion: hubResource ? (hubResource.status as KnativeStatus | undefined)?.version : baseVersion,
    afterApply: (desired) => client.apply(desired, { dryRun: true }),
    ...(location.adopted ? { adoptedNamespace: location.namespace } : {}),
  };
}

/** The objects of these kinds that carry the owner's labels, by objectKey; a kind not served has none. */
async function listInstallObjects(
  client: KubeClient,
  owner: Owner,
  kinds: readonly Pick<ObjectRef, "apiVersion" | "kind">[],
): Promise<Map<string, KubeObject>> {
  const distinct = new Map(
    kinds.map(({ apiVersion, kind }) => [`${apiVersion}/${kind}`, { apiVersion, kind }]),
  );
  const objects = new Map<string, KubeObject>();
  await inParallel([...distinct.values()], LIST_CONCURRENCY, async ({ apiVersion, kind }) => {
    const listed = await client.list(apiVersion, kind, { labelSelector: selectorFor(owner) }).catch((err) => {
      // A kind whose CRD this very apply brings has no objects yet.
      if (isNotFound(err)) return { items: [] };
      throw err;
    });
    for (const item of listed.items) objects.set(objectKey(item), item);
  });
  return objects;
}
