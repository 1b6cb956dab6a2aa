import type { KnativeResource } from "../api/knative.ts";
import { stampForApply } from "../apply/apply.ts";
import { anchorName } from "../apply/ownership.ts";
import { planApply } from "../apply/plan.ts";
import {
  isCrd,
  type KubeObject,
  type ObjectRef,
  type OwnerReference,
  objectKey,
  refKey,
  refOf,
} from "../kube/object.ts";
import { ownerOf, renderInstall } from "../reconcile/desired.ts";
import { installNamespace } from "../reconcile/target.ts";

// One CR's install on its cluster, as the reconcile stage builds it: the objects it applies, and what
// FinalizeRemoteCluster deletes when the CR goes. Pure: the cluster's state comes in as an InstallState.

/** How one CR's install looks on its cluster before the change: read live, or rendered from base. */
export interface InstallState {
  /** What the anchor records as applied (prune and removal work from it). */
  inventory: readonly ObjectRef[];
  /** The install's objects by objectKey. */
  objects: ReadonlyMap<string, KubeObject>;
  anchorExists: boolean;
  namespaceExists: boolean;
}

/** A cluster without any of the install. */
export const NOTHING_INSTALLED: InstallState = {
  inventory: [],
  objects: new Map(),
  anchorExists: false,
  namespaceExists: false,
};

export { ownerOf };

/**
 * Who owns the install's namespaced objects, as the reconcile stage decides: on a spoke the anchor
 * ConfigMap, on the hub itself the CR. `uid` is the live owner's, or empty when there is none yet.
 */
function installOwnerRef(resource: KnativeResource, uid: string): OwnerReference {
  return resource.spec.clusterProfileRef
    ? { apiVersion: "v1", kind: "ConfigMap", name: anchorName(ownerOf(resource)), uid }
    : { apiVersion: resource.apiVersion, kind: resource.kind, name: resource.metadata.name, uid };
}

/** Everything `render` produces for the CR on its cluster, the install namespace included. */
export const renderedObjects = renderInstall;

/**
 * The objects an apply sends, exactly as `applyInstall` stamps them: the install namespace left out (it
 * is created once and never applied), ownership labels and owner reference, the desired-hash.
 */
export function desiredObjects(resource: KnativeResource, rendered: readonly KubeObject[], ownerUid: string) {
  return stampForApply(
    rendered,
    ownerOf(resource),
    installOwnerRef(resource, ownerUid),
    installNamespace(resource),
  );
}

/** The state a converged cluster has for a CR: its desired objects applied, recorded in the anchor. */
export function convergedState(desired: readonly KubeObject[]): InstallState {
  return {
    inventory: desired.map(refOf),
    objects: new Map(desired.map((object) => [objectKey(object), object])),
    anchorExists: true,
    namespaceExists: true,
  };
}

export interface ObjectPlan {
  /** The anchor and the install namespace when they do not exist yet, then the objects to create. */
  create: ObjectRef[];
  update: { desired: KubeObject; current: KubeObject }[];
  /** Applied before, no longer desired: the apply prunes them. CRDs never are. */
  prune: ObjectRef[];
}

/** What one apply pass does, from `planApply`, plus the anchor and namespace the apply creates first. */
export function planObjects(
  resource: KnativeResource,
  desired: readonly KubeObject[],
  state: InstallState,
): ObjectPlan {
  const plan = planApply(desired, state.objects, state.inventory);
  return {
    create: [
      ...(state.namespaceExists ? [] : [installNamespaceRef(resource)]),
      ...(state.anchorExists ? [] : [anchorRef(resource)]),
      ...plan.create.map(refOf),
    ],
    update: plan.update.map(({ desired, live }) => ({ desired, current: live })),
    prune: plan.prune,
  };
}

export interface Removal {
  /** Deleted by FinalizeRemoteCluster: cluster-scoped objects, the anchor, and (by GC) what it owns. */
  deleted: ObjectRef[];
  /**
   * Left on the cluster: CRDs (deleting one deletes every resource of its kind), the install namespace,
   * objects in other namespaces (no owner reference can reach them).
   */
  kept: ObjectRef[];
}

/** What removing the CR's install deletes and keeps, by `removeInstall`'s rules, from the inventory. */
export function removalOf(resource: KnativeResource, inventory: readonly ObjectRef[]): Removal {
  const namespace = installNamespace(resource);
  const deletedByName = inventory.filter((ref) => ref.namespace === "" && !isCrd(ref));
  const ownedByAnchor = inventory.filter((ref) => ref.namespace === namespace);
  const kept = inventory.filter((ref) => isCrd(ref) || (ref.namespace !== "" && ref.namespace !== namespace));
  // The inventory never holds the install namespace, but the fallback (base rendered in full) does.
  const namespaceKept = !inventory.some((ref) => ref.kind === "Namespace" && ref.name === namespace);
  return {
    deleted: [...deletedByName, anchorRef(resource), ...ownedByAnchor],
    kept: [...kept, ...(namespaceKept ? [installNamespaceRef(resource)] : [])],
  };
}

/** Whether an object of the install is on the cluster, by the state read from it. */
export function isPresent(resource: KnativeResource, state: InstallState): (ref: ObjectRef) => boolean {
  const [anchor, namespace] = [refKey(anchorRef(resource)), installNamespace(resource)];
  return (ref) => {
    if (refKey(ref) === anchor) return state.anchorExists;
    if (ref.kind === "Namespace" && ref.name === namespace) return state.namespaceExists;
    return state.objects.has(refKey(ref));
  };
}

function anchorRef(resource: KnativeResource): ObjectRef {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: installNamespace(resource),
    name: anchorName(ownerOf(resource)),
  };
}

function installNamespaceRef(resource: KnativeResource): ObjectRef {
  return { apiVersion: "v1", kind: "Namespace", namespace: "", name: installNamespace(resource) };
}
