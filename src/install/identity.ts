// One CR's install on its cluster: who it is (the upstream operator's multicluster.go rules, side by side).
// Pure facts of the CR; nothing here reads a cluster.

import type { KnativeResource } from "../api/knative.ts";
import {
  ANCHOR_ANNOTATION,
  CR_KIND_LABEL,
  CR_NAME_LABEL,
  DESCRIPTION_ANNOTATION,
  INVENTORY_KEY,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  PROTECTED_ANNOTATION,
} from "../api/labels.ts";
import { encodeInventory } from "../apply/inventory.ts";
import type { ClusterRef } from "../fleet/identity.ts";
import type { KubeObject, ObjectRef, OwnerReference } from "../kube/object.ts";

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
const installsOnHub = (resource: KnativeResource): boolean => !resource.spec.clusterProfileRef;

export const sameClusterProfile = (a: ClusterRef | undefined, b: ClusterRef | undefined): boolean =>
  (a === undefined && b === undefined) ||
  (a !== undefined && b !== undefined && a.name === b.name && a.namespace === b.namespace);

interface Owner {
  /** The CR's kind, e.g. KnativeServing. */
  kind: string;
  /** The CR's name. */
  name: string;
}

/** `{kind}-{cr-name}-root-owner`, lower-case kind: the upstream operator's anchor name. */
export const anchorName = (owner: Owner): string => `${owner.kind.toLowerCase()}-${owner.name}-root-owner`;

/** Labels every object of an install carries, so live objects can be listed back per CR. */
export const ownershipLabels = (owner: Owner): Record<string, string> => ({
  [MANAGED_BY_LABEL]: MANAGED_BY,
  [CR_NAME_LABEL]: owner.name,
  [CR_KIND_LABEL]: owner.kind.toLowerCase(),
});

/**
 * The anchor ConfigMap: every namespace-scoped object of the install is owned by it, so deleting it lets
 * the cluster's garbage collector remove the install, and it records the inventory used for prune.
 */
export function buildAnchor(owner: Owner, namespace: string, inventory: readonly ObjectRef[]): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: anchorName(owner),
      namespace,
      labels: ownershipLabels(owner),
      annotations: {
        [ANCHOR_ANNOTATION]: "true",
        [PROTECTED_ANNOTATION]: "true",
        [DESCRIPTION_ANNOTATION]:
          "Anchor for Knative resources managed by knative-fleet. Deleting this will cascade-delete all owned " +
          "resources via Kubernetes GC; uninstall via the hub cluster CR instead.",
      },
    },
    data: { [INVENTORY_KEY]: encodeInventory(inventory) },
  };
}

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

/** The anchor ConfigMap `{kind}-{name}-root-owner` in the install namespace (by default the canonical one). */
export const anchorRef = (resource: KnativeResource, namespace = installNamespace(resource)): ObjectRef => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace,
  name: anchorName(ownerOf(resource)),
});

export const installNamespaceRef = (
  resource: KnativeResource,
  namespace = installNamespace(resource),
): ObjectRef => ({
  apiVersion: "v1",
  kind: "Namespace",
  namespace: "",
  name: namespace,
});
