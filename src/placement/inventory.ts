import { CLUSTER_PROFILE_GROUP } from "../api/clusterprofile.ts";
import { DECISION_KEY_LABEL } from "../api/labels.ts";
import { type ClusterRef, clusterRefOf } from "../fleet/identity.ts";
import { isRecord, type KubeObject } from "../kube/object.ts";

// What selection reads of the hub: each ClusterProfile's identity, labels and status.properties, and the
// PlacementDecisions. Health, access providers and timestamps are left out on purpose: they change all the
// time and must never change which clusters a placement selects.

export const PLACEMENT_DECISION_API_VERSION = `${CLUSTER_PROFILE_GROUP}/v1alpha1`;

export interface InventoryCluster {
  namespace: string;
  name: string;
  labels: Readonly<Record<string, string>>;
  /** status.properties by name; a name listed twice keeps its first value. */
  properties: ReadonlyMap<string, string>;
}

export interface InventoryDecision {
  namespace: string;
  name: string;
  decisionKey?: string;
  /** The chosen ClusterProfiles; a reference without a namespace is the decision's own namespace. */
  clusters: ClusterRef[];
}

/**
 * The hub's inventory as selection sees it. `undefined` lists are unknown (the watch has not listed yet,
 * or the hub refuses): a placement that needs them is held at its last state, never expanded from nothing.
 */
export interface Inventory {
  clusters: readonly InventoryCluster[] | undefined;
  decisions: readonly InventoryDecision[] | undefined;
  /** Why a list is unknown, for the status. */
  unknownReason?: string;
}

/** A ClusterProfile object as selection sees it; undefined when it is not one (a hostile object). */
export function inventoryClusterOf(object: KubeObject): InventoryCluster | undefined {
  const { namespace, name, labels } = object.metadata;
  if (typeof namespace !== "string" || typeof name !== "string") return undefined;
  const properties = new Map<string, string>();
  const listed = (object.status as { properties?: unknown } | undefined)?.properties;
  if (Array.isArray(listed)) {
    for (const property of listed) {
      const { name: key, value } = (property ?? {}) as { name?: unknown; value?: unknown };
      if (typeof key === "string" && typeof value === "string" && !properties.has(key)) {
        properties.set(key, value);
      }
    }
  }
  return { namespace, name, labels: stringEntries(labels), properties };
}

/** A PlacementDecision object as selection sees it; malformed entries are skipped. */
export function inventoryDecisionOf(object: KubeObject): InventoryDecision | undefined {
  const { namespace, name, labels } = object.metadata;
  if (typeof namespace !== "string" || typeof name !== "string") return undefined;
  const decisions = (object as { decisions?: unknown }).decisions;
  const clusters = (Array.isArray(decisions) ? decisions : []).flatMap((decision) => {
    const ref = clusterRefOf(isRecord(decision) ? decision.clusterProfileRef : undefined, namespace);
    return ref ? [ref] : [];
  });
  const decisionKey = labels?.[DECISION_KEY_LABEL];
  return { namespace, name, ...(decisionKey ? { decisionKey } : {}), clusters };
}

function stringEntries(record: unknown): Record<string, string> {
  if (typeof record !== "object" || record === null) return {};
  return Object.fromEntries(
    Object.entries(record).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
  );
}
