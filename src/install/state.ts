import type { KnativeResource } from "../api/knative.ts";
import { type KubeObject, type ObjectRef, objectKey, refKey, refOf } from "../kube/object.ts";
import { anchorRef, installNamespace } from "./identity.ts";

/** How one CR's install looks on its cluster: read live, or a converged state standing in for it. */
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

/** The state a converged cluster has for a CR: its desired objects applied, recorded in the anchor. */
export function convergedState(desired: readonly KubeObject[]): InstallState {
  return {
    inventory: desired.map(refOf),
    objects: new Map(desired.map((object) => [objectKey(object), object])),
    anchorExists: true,
    namespaceExists: true,
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
