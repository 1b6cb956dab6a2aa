import { z } from "zod";
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
import { type KubeObject, type ObjectRef, type OwnerReference, refKey } from "../kube/object.ts";

export interface Owner {
  /** The CR's kind, e.g. KnativeServing. */
  kind: string;
  /** The CR's name. */
  name: string;
}

/** `{kind}-{cr-name}-root-owner`, lower-case kind: the upstream operator's anchor name. */
export const anchorName = (owner: Owner): string => `${owner.kind.toLowerCase()}-${owner.name}-root-owner`;

/** Labels every object we apply carries, so live objects can be listed back per CR. */
export const ownershipLabels = (owner: Owner): Record<string, string> => ({
  [MANAGED_BY_LABEL]: MANAGED_BY,
  [CR_NAME_LABEL]: owner.name,
  [CR_KIND_LABEL]: owner.kind.toLowerCase(),
});

export const selectorFor = (owner: Owner): string =>
  Object.entries(ownershipLabels(owner))
    .map(([k, v]) => `${k}=${v}`)
    .join(",");

/**
 * The anchor ConfigMap on a spoke: every namespace-scoped object of the install is owned by it, so deleting
 * it lets the spoke's garbage collector remove the install, and it records the inventory used for prune.
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

export function encodeInventory(refs: readonly ObjectRef[]): string {
  const byKey = new Map(refs.map((r) => [refKey(r), r]));
  return [...byKey.keys()]
    .sort()
    .map((key) => {
      const { apiVersion, kind, namespace, name } = byKey.get(key)!;
      return JSON.stringify({ apiVersion, kind, namespace, name });
    })
    .join("\n");
}

const InventoryLine = z.object({
  apiVersion: z.string(),
  kind: z.string(),
  namespace: z.string(),
  name: z.string(),
});

/** The inventory the anchor records; lines that do not parse are skipped (never a reason to prune). */
export function decodeInventory(anchor: KubeObject | undefined): ObjectRef[] {
  const text = (anchor?.data as Record<string, string> | undefined)?.[INVENTORY_KEY] ?? "";
  return text.split("\n").flatMap((line) => {
    try {
      const parsed = InventoryLine.safeParse(JSON.parse(line));
      return parsed.success ? [parsed.data] : [];
    } catch {
      return [];
    }
  });
}

/**
 * Stamps ownership on the desired objects: our labels on all; an owner reference on the namespace-scoped
 * objects in the owner's namespace (owner references cannot cross namespaces or own cluster-scoped objects;
 * those are deleted explicitly on removal).
 */
export function withOwnership(
  objects: readonly KubeObject[],
  owner: Owner,
  ownerRef: OwnerReference,
  ownerNamespace: string,
) {
  return objects.map((o): KubeObject => {
    const owned = o.metadata.namespace === ownerNamespace;
    return {
      ...o,
      metadata: {
        ...o.metadata,
        labels: { ...(o.metadata.labels ?? {}), ...ownershipLabels(owner) },
        ...(owned ? { ownerReferences: [{ ...ownerRef, controller: true, blockOwnerDeletion: true }] } : {}),
      },
    };
  });
}
