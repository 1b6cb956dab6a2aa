import { readFile } from "node:fs/promises";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import type { Inventory } from "../placement/inventory.ts";
import { inventoryOf, readHubInventoryObjects, readSnapshotObjects } from "../placement/plan.ts";
import { clusterKubernetesVersions } from "./checks.ts";

/**
 * What a plan knows of the clusters, read once: what placements select from and each cluster's Kubernetes
 * version, from a snapshot file (`--cluster-profiles`) or the hub.
 */
export interface PlanInventory {
  source: "hub" | "snapshot";
  inventory: Inventory;
  /** Each cluster's Kubernetes version by `namespace/name`, as its ClusterProfile reports it. */
  kubernetesVersions: Map<string, string>;
}

/** The snapshot file cannot be read, or holds something else than ClusterProfiles and PlacementDecisions. */
export class InventoryError extends Error {
  override name = "InventoryError";
}

/** The snapshot when given, else the hub's (none when the hub does not list them), else nothing. */
export async function readPlanInventory(from: {
  snapshot?: string;
  hub?: { client: KubeClient; clusterProfileApiVersion: string };
}): Promise<PlanInventory | undefined> {
  let objects: KubeObject[];
  let source: PlanInventory["source"];
  if (from.snapshot !== undefined) {
    const text = await readFile(from.snapshot, "utf8").catch((err: Error) => {
      throw new InventoryError(`--cluster-profiles: ${err.message}`);
    });
    try {
      objects = readSnapshotObjects(from.snapshot, text);
    } catch (err) {
      throw new InventoryError((err as Error).message);
    }
    source = "snapshot";
  } else if (from.hub !== undefined) {
    objects = await readHubInventoryObjects(from.hub.client, from.hub.clusterProfileApiVersion);
    source = "hub";
  } else {
    return undefined;
  }
  return { source, inventory: inventoryOf(objects), kubernetesVersions: clusterKubernetesVersions(objects) };
}
