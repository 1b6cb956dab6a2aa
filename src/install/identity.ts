// One CR's install on its cluster: who it is (the upstream operator's multicluster.go rules, side by side).
// Pure facts of the CR; nothing here reads a cluster.

import type { ClusterProfileRef, KnativeResource } from "../api/knative.ts";
import { anchorName, type Owner } from "../apply/ownership.ts";
import type { ObjectRef, OwnerReference } from "../kube/object.ts";

const REMOTE_NAMESPACE = { KnativeServing: "knative-serving", KnativeEventing: "knative-eventing" } as const;

/**
 * Where the component is installed, as upstream decides: on a spoke, the component's canonical namespace;
 * on the hub itself, the CR's own namespace.
 */
export function installNamespace(resource: KnativeResource): string {
  if (resource.spec.clusterProfileRef) return REMOTE_NAMESPACE[resource.kind];
  return resource.metadata.namespace ?? "default";
}

/** Whether the CR installs on the hub itself (no clusterProfileRef) rather than on a spoke. */
export const installsOnHub = (resource: KnativeResource): boolean => !resource.spec.clusterProfileRef;

export const sameClusterProfile = (
  a: ClusterProfileRef | undefined,
  b: ClusterProfileRef | undefined,
): boolean =>
  (a === undefined && b === undefined) ||
  (a !== undefined && b !== undefined && a.name === b.name && a.namespace === b.namespace);

/** Who owns an install on its cluster: the CR's kind and name (the anchor's name comes from them). */
export const ownerOf = (resource: KnativeResource): Owner => ({
  kind: resource.kind,
  name: resource.metadata.name,
});

/**
 * The root owner of the install's objects when the hub CR can be it: on the hub itself the CR owns the
 * anchor (and through it everything), so deleting the CR collects the install. On a spoke nothing on the
 * hub can own spoke objects: the anchor is the root (undefined here).
 */
export function hubOwnerRef(resource: KnativeResource): OwnerReference | undefined {
  if (!installsOnHub(resource)) return undefined;
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    name: resource.metadata.name,
    uid: String(resource.metadata.uid ?? ""),
  };
}

/** The anchor ConfigMap `{kind}-{name}-root-owner` in the install namespace. */
export const anchorRef = (resource: KnativeResource): ObjectRef => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: installNamespace(resource),
  name: anchorName(ownerOf(resource)),
});

export const installNamespaceRef = (resource: KnativeResource): ObjectRef => ({
  apiVersion: "v1",
  kind: "Namespace",
  namespace: "",
  name: installNamespace(resource),
});
