import type { KnativeResource } from "../api/knative.ts";
import { type ApplyState, DELETE_CONCURRENCY, deleteClusterScoped } from "../apply/engine.ts";
import { decodeInventory } from "../apply/inventory.ts";
import { inParallel } from "../apply/parallel.ts";
import type { KubeClient } from "../kube/client.ts";
import { isCrd, type ObjectRef, refKey } from "../kube/object.ts";
import {
  anchorName,
  anchorRef,
  installNamespace,
  installNamespaceRef,
  ownerOf,
  sameClusterProfile,
} from "./identity.ts";

interface Removal {
  /** Deleted by name: the cluster-scoped objects (no owner reference can reach them) and the anchor. */
  deletedByName: ObjectRef[];
  /** Deleted by the cluster's garbage collector once the anchor goes: the install namespace's objects. */
  collected: ObjectRef[];
  /**
   * Left on the cluster: CRDs (deleting one deletes every resource of its kind), the install namespace,
   * objects in other namespaces (no owner reference can reach them).
   */
  kept: ObjectRef[];
}

/**
 * FinalizeRemoteCluster's rule: what removing the CR's install deletes and keeps, from the anchor's
 * inventory (or, without an anchor, from the rendered release). `removeInstall` executes exactly this, and
 * `plan` reports it.
 */
export function removalOf(
  resource: KnativeResource,
  inventory: readonly ObjectRef[],
  namespace = installNamespace(resource),
): Removal {
  // The inventory never holds the install namespace, but the fallback (the release rendered in full) does:
  // then it is deleted like every cluster-scoped object.
  const namespaceListed = inventory.some((ref) => ref.kind === "Namespace" && ref.name === namespace);
  return {
    deletedByName: [
      ...inventory.filter((ref) => ref.namespace === "" && !isCrd(ref)),
      anchorRef(resource, namespace),
    ],
    collected: inventory.filter((ref) => ref.namespace === namespace),
    kept: [
      ...inventory.filter((ref) => isCrd(ref) || (ref.namespace !== "" && ref.namespace !== namespace)),
      ...(namespaceListed ? [] : [installNamespaceRef(resource, namespace)]),
    ],
  };
}

/** The objects a removal takes off the cluster, deleted by name or collected. */
export const removedBy = (removal: Removal): ObjectRef[] => [...removal.deletedByName, ...removal.collected];

/**
 * Upstream's sharing rule: while another CR of the same kind (not itself being deleted) installs on the same
 * cluster, removing this one leaves the cluster untouched. The other CR, or undefined.
 */
export function sharingCr<T extends KnativeResource>(
  resource: KnativeResource,
  others: readonly T[],
): T | undefined {
  const { namespace, name } = resource.metadata;
  return others.find(
    (other) =>
      other.kind === resource.kind &&
      !(other.metadata.namespace === namespace && other.metadata.name === name) &&
      !other.metadata.deletionTimestamp &&
      sameClusterProfile(other.spec.clusterProfileRef, resource.spec.clusterProfileRef),
  );
}

/** What runs the install's processes: deleted by name on removal, not left to the garbage collector. */
const WORKLOAD_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "Job"]);

/**
 * Removes an install by `removalOf`'s rule: the cluster-scoped objects, then the anchor (garbage collection
 * takes what it owns). `fallback` stands in for the inventory when the anchor is gone (asked only then: it
 * renders the release); `namespace` is where the install lives (located, see layout.ts).
 */
export async function removeInstall(
  client: KubeClient,
  resource: KnativeResource,
  fallback: () => Promise<readonly ObjectRef[]>,
  namespace = installNamespace(resource),
): Promise<{ deleted: ObjectRef[] }> {
  const owner = ownerOf(resource);
  const anchor = await client.get("v1", "ConfigMap", namespace, anchorName(owner));
  const removal = removalOf(resource, anchor ? decodeInventory(anchor) : await fallback(), namespace);
  const anchorKey = anchorName(owner);
  const clusterScoped = removal.deletedByName.filter((ref) => ref.namespace === "");
  // The workloads stop at once, beside the cluster-scoped deletes, rather than when the garbage collector
  // reaches them after the anchor (seconds later); the anchor still goes last, so a removal cut short
  // finds its inventory again.
  const workloads = removal.collected.filter((ref) => WORKLOAD_KINDS.has(ref.kind));
  const [deleted] = await Promise.all([
    deleteClusterScoped(client, clusterScoped),
    inParallel(workloads, DELETE_CONCURRENCY, (ref) =>
      client.delete(ref.apiVersion, ref.kind, ref.namespace, ref.name),
    ),
  ]);
  if (await client.delete("v1", "ConfigMap", namespace, anchorKey, "Background")) {
    deleted.push(anchorRef(resource, namespace));
  }
  return { deleted };
}

/** Whether an object of the install is on the cluster, by the state read from it. */
export function isPresent(
  resource: KnativeResource,
  state: ApplyState,
  namespace = installNamespace(resource),
): (ref: ObjectRef) => boolean {
  const anchor = refKey(anchorRef(resource, namespace));
  return (ref) => {
    if (refKey(ref) === anchor) return state.inventoryExists;
    if (ref.kind === "Namespace" && ref.name === namespace) return state.namespaceExists;
    return state.objects.has(refKey(ref));
  };
}
