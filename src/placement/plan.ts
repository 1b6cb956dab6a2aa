import { parseAllDocuments } from "yaml";
import { compareStrings, type Diagnostic, formatDiagnostic } from "../fleet/diagnostic.ts";
import { formatIdentity } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import type { KubeClient } from "../kube/client.ts";
import { isRecord, type KubeObject } from "../kube/object.ts";
import { withPlacements } from "./combine.ts";
import { type ExpandOptions, expandPlacements, type PlacementSelection } from "./expand.ts";
import {
  clusterKey,
  type Inventory,
  inventoryClusterOf,
  inventoryDecisionOf,
  PLACEMENT_DECISION_API_VERSION,
} from "./inventory.ts";

/** Where a plan's inventory came from. */
export type InventorySource = "hub" | "snapshot" | "none";

export interface PlacementPlanEntry {
  placement: string;
  path: string;
  /** The clusters selected before the merge (absent: the placement is new, or selection needs the hub). */
  before?: string[];
  /** After the merge, with each cluster's merged spec (absent: removed, or selection needs the hub). */
  after?: PlacementSelection["clusters"];
  added: string[];
  removed: string[];
  pending?: string;
  /** Clusters a PlacementDecision chose that the placement may not use, and why. */
  skipped: PlacementSelection["skipped"];
}

export interface PlacementPlan {
  inventory: InventorySource;
  placements: PlacementPlanEntry[];
  /** The head's placement errors found only with the inventory: conflicts, names that collide. */
  diagnostics: Diagnostic[];
}

const NEEDS_HUB = "selection needs the hub: run plan with --kubeconfig, or give --cluster-profiles FILE";

/**
 * Per placement of base and head: the clusters selected now and after the merge, against one inventory,
 * and each cluster's merged spec. Without an inventory, only explicitly listed clusters can be shown.
 */
export function planPlacements(
  base: FleetModel,
  head: FleetModel,
  from: { source: "hub" | "snapshot"; inventory: Inventory } | undefined,
  options: ExpandOptions = {},
): PlacementPlan {
  const known: Inventory = from?.inventory ?? {
    clusters: undefined,
    decisions: undefined,
    unknownReason: NEEDS_HUB,
  };
  const before = expandPlacements(base.placements, known, options);
  const after = expandPlacements(head.placements, known, options);
  const combined = withPlacements(head, after);
  const headDiagnostics = new Set(head.diagnostics.map(formatDiagnostic));
  const beforeByKey = new Map(before.selections.map((s) => [formatIdentity(s), s]));
  const afterByKey = new Map(after.selections.map((s) => [formatIdentity(s), s]));
  const keys = [...new Set([...beforeByKey.keys(), ...afterByKey.keys()])].sort(compareStrings);
  const placements = keys.map((key): PlacementPlanEntry => {
    const was = beforeByKey.get(key);
    const will = afterByKey.get(key);
    const beforeClusters = was?.clusters?.map(clusterKey);
    const afterClusters = will?.clusters?.map(clusterKey);
    const pending = (will ?? was)?.pending;
    return {
      placement: key,
      path: (will ?? was)!.path,
      ...(beforeClusters ? { before: beforeClusters } : {}),
      ...(will?.clusters ? { after: will.clusters } : {}),
      added: (afterClusters ?? []).filter((c) => !(beforeClusters ?? []).includes(c)),
      removed: (beforeClusters ?? []).filter((c) => !(afterClusters ?? []).includes(c)),
      ...(pending ? { pending: pending.replace(/^the hub's .* not known yet: /, "") } : {}),
      skipped: will?.skipped ?? [],
    };
  });
  return {
    inventory: from?.source ?? "none",
    placements,
    diagnostics: combined.diagnostics.filter((d) => !headDiagnostics.has(formatDiagnostic(d))),
  };
}

/**
 * Reads a ClusterProfile snapshot: YAML or JSON, one or more documents, each a ClusterProfile, a
 * PlacementDecision or a List of them (what `kubectl get clusterprofiles,placementdecisions -A -o yaml`
 * prints). Anything else is an error naming the document.
 */
export function readInventorySnapshot(path: string, text: string): Inventory {
  const objects = readSnapshotObjects(path, text);
  const clusters = [];
  const decisions = [];
  for (const object of objects) {
    const { kind } = object;
    if (kind === "ClusterProfile") clusters.push(inventoryClusterOf(object));
    else decisions.push(inventoryDecisionOf(object));
  }
  return {
    clusters: clusters.filter((cluster) => cluster !== undefined),
    decisions: decisions.filter((decision) => decision !== undefined),
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
    const items = value.kind === "List" || Array.isArray(value.items) ? (value.items as unknown[]) : [value];
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

/** The hub's inventory, read once (a plan has no watch). */
export async function readHubInventory(
  hub: KubeClient,
  clusterProfileApiVersion: string,
): Promise<Inventory> {
  const [profiles, decisions] = await Promise.all([
    hub.list(clusterProfileApiVersion, "ClusterProfile"),
    // A hub without the PlacementDecision CRD has no decisions.
    hub.list(PLACEMENT_DECISION_API_VERSION, "PlacementDecision").catch(() => ({ items: [] })),
  ]);
  return {
    clusters: profiles.items.flatMap((object) => inventoryClusterOf(object) ?? []),
    decisions: decisions.items.flatMap((object) => inventoryDecisionOf(object) ?? []),
  };
}

/** The plan's placement section, in Markdown. */
export function renderPlacementPlan(plan: PlacementPlan): string {
  if (plan.placements.length === 0) return "";
  const source = {
    hub: "Selection read from the hub's ClusterProfiles and PlacementDecisions.",
    snapshot: "Selection read from the ClusterProfile snapshot given with --cluster-profiles.",
    none: `No inventory: ${NEEDS_HUB}.`,
  }[plan.inventory];
  const lines = ["### Placements", source];
  for (const entry of plan.placements) {
    lines.push(`#### ${code(entry.placement)} (${code(entry.path)})`);
    if (entry.pending) {
      lines.push(`Selection unknown: ${entry.pending}.`);
      continue;
    }
    const list = (clusters: readonly string[] | undefined) =>
      clusters === undefined ? "—" : clusters.length === 0 ? "none" : clusters.map(code).join(", ");
    lines.push(
      [
        `- selects now: ${list(entry.before)}`,
        `- selects after the merge: ${list(entry.after?.map(clusterKey))}`,
        ...(entry.added.length > 0 ? [`- joins: ${list(entry.added)}`] : []),
        ...(entry.removed.length > 0
          ? [`- leaves: ${list(entry.removed)} (pruned after the departure grace period)`]
          : []),
        ...entry.skipped.map((s) => `- skipped ${code(s.cluster)}: ${s.reason}`),
      ].join("\n"),
    );
    for (const cluster of entry.after ?? []) {
      const overrides =
        cluster.overrides.length === 0 ? "no override" : `overrides ${cluster.overrides.join(", ")}`;
      lines.push(
        `<details><summary>${code(clusterKey(cluster))} → ${code(cluster.crName)} (${overrides})</summary>\n\n` +
          `${fenced(JSON.stringify(cluster.spec, null, 2))}\n\n</details>`,
      );
    }
  }
  if (plan.diagnostics.length > 0) {
    lines.push(
      "#### Placement errors after the merge",
      plan.diagnostics.map((d) => `- ${code(formatDiagnostic(d))}`).join("\n"),
    );
  }
  return lines.join("\n\n");
}

/** A code span that a backtick in the text cannot close early. */
function code(text: string): string {
  const fence = "`".repeat(longestRun(text, "`") + 1);
  return `${fence} ${text} ${fence}`;
}

/** A JSON code block that a run of backticks inside the spec cannot close early. */
function fenced(text: string): string {
  const fence = "`".repeat(Math.max(3, longestRun(text, "`") + 1));
  return `${fence}json\n${text}\n${fence}`;
}

function longestRun(text: string, char: string): number {
  let longest = 0;
  let run = 0;
  for (const c of text) {
    run = c === char ? run + 1 : 0;
    longest = Math.max(longest, run);
  }
  return longest;
}
