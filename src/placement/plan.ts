import { parseAllDocuments } from "yaml";
import { compareStrings } from "../fleet/diagnostic.ts";
import { clusterKey, formatIdentity } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import { isRecord, type KubeObject } from "../kube/object.ts";
import type { PlacementSelection, SelectedCluster } from "./expand.ts";
import {
  type Inventory,
  inventoryClusterOf,
  inventoryDecisionOf,
  PLACEMENT_DECISION_API_VERSION,
} from "./inventory.ts";

/** Where a plan's inventory came from. */
type InventorySource = "hub" | "snapshot" | "none";

interface PlacementPlanEntry {
  /** The placement's identity. */
  placement: string;
  path: string;
  /** The clusters selected before the merge (absent: the placement is new, or selection needs the hub). */
  before?: string[];
  /** After the merge, with each cluster's merged spec (absent: removed, or selection needs the hub). */
  after?: SelectedCluster[];
  added: string[];
  removed: string[];
  pending?: string;
  /** Clusters a PlacementDecision chose that the placement may not use, and why. */
  skipped: PlacementSelection["skipped"];
}

export interface PlacementPlan {
  inventory: InventorySource;
  placements: PlacementPlanEntry[];
}

/** What a pending placement's selection needs, said once for the plan. */
export const NEEDS_HUB =
  "selection needs the hub: run plan with --kubeconfig, or give --cluster-profiles FILE";

/**
 * Per placement of base and head: the clusters selected now and after the merge, as the syncs of base and
 * head expanded them against one inventory, and each cluster's merged spec.
 */
export function planPlacements(
  before: readonly PlacementSelection[],
  after: readonly PlacementSelection[],
  inventory: InventorySource,
): PlacementPlan {
  const beforeByKey = new Map(before.map((s) => [formatIdentity(s), s]));
  const afterByKey = new Map(after.map((s) => [formatIdentity(s), s]));
  const keys = [...new Set([...beforeByKey.keys(), ...afterByKey.keys()])].sort(compareStrings);
  const placements = keys.map((key): PlacementPlanEntry => {
    const was = beforeByKey.get(key);
    const will = afterByKey.get(key);
    const beforeClusters = was?.clusters?.map(clusterKey);
    const afterClusters = will?.clusters?.map(clusterKey);
    // Sets built once: a lookup per cluster, not a scan of the other list (one placement of 8,000 clusters:
    // ~800 -> ~8 ms, scripts/bench-reports.ts --pipeline).
    const wasSelected = new Set(beforeClusters);
    const isSelected = new Set(afterClusters);
    const pending = (will ?? was)?.pending;
    return {
      placement: key,
      path: (will ?? was)!.path,
      ...(beforeClusters ? { before: beforeClusters } : {}),
      ...(will?.clusters ? { after: will.clusters } : {}),
      added: (afterClusters ?? []).filter((c) => !wasSelected.has(c)),
      removed: (beforeClusters ?? []).filter((c) => !isSelected.has(c)),
      ...(pending ? { pending: pending.replace(/^the hub's .* not known yet: /, "") } : {}),
      skipped: will?.skipped ?? [],
    };
  });
  return { inventory, placements };
}

/**
 * Reads a ClusterProfile snapshot: YAML or JSON, one or more documents, each a ClusterProfile, a
 * PlacementDecision or a List of them (what `kubectl get clusterprofiles,placementdecisions -A -o yaml`
 * prints). Anything else is an error naming the document.
 */
export const readInventorySnapshot = (path: string, text: string): Inventory =>
  inventoryOf(readSnapshotObjects(path, text));

/** What selection reads of ClusterProfile and PlacementDecision objects. */
export function inventoryOf(objects: readonly KubeObject[]): Inventory {
  return {
    clusters: objects.flatMap((o) => (o.kind === "ClusterProfile" ? (inventoryClusterOf(o) ?? []) : [])),
    decisions: objects.flatMap((o) => (o.kind === "PlacementDecision" ? (inventoryDecisionOf(o) ?? []) : [])),
  };
}

/** The ClusterProfiles and PlacementDecisions of a snapshot, as objects; the same errors. */
export function readSnapshotObjects(path: string, text: string): KubeObject[] {
  const objects: KubeObject[] = [];
  parseAllDocuments(text).forEach((document, index) => {
    if (document.errors.length > 0) {
      throw new Error(`${path}: document ${index + 1}: ${document.errors[0]!.message}`);
    }
    const value = document.toJS() as { kind?: unknown; items?: unknown } | null;
    if (value === null) return;
    const items = value.kind === "List" || Array.isArray(value.items) ? value.items : [value];
    if (!Array.isArray(items)) throw new Error(`${path}: document ${index + 1}: a List needs an items list`);
    for (const item of items) {
      const kind = isRecord(item) ? item.kind : undefined;
      if (kind !== "ClusterProfile" && kind !== "PlacementDecision") {
        throw new Error(
          `${path}: document ${index + 1}: ${JSON.stringify(kind)} is neither a ClusterProfile nor a PlacementDecision`,
        );
      }
      if (!isRecord(item) || !isRecord(item.metadata) || typeof item.apiVersion !== "string") {
        throw new Error(`${path}: document ${index + 1}: a ${kind} needs apiVersion and metadata`);
      }
      objects.push({ ...item, apiVersion: item.apiVersion, kind, metadata: item.metadata });
    }
  });
  return objects;
}

/** The hub's ClusterProfiles and PlacementDecisions, read once (a plan has no watch). */
export async function readHubInventoryObjects(
  hub: KubeClient,
  clusterProfileApiVersion: string,
): Promise<KubeObject[]> {
  const [profiles, decisions] = await Promise.all([
    hub.list(clusterProfileApiVersion, "ClusterProfile"),
    // A hub without the PlacementDecision CRD has no decisions.
    hub.list(PLACEMENT_DECISION_API_VERSION, "PlacementDecision").catch(() => ({ items: [] })),
  ]);
  return [...profiles.items, ...decisions.items];
}
