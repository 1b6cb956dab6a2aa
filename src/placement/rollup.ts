import type { ReadinessPhase } from "../api/conditions.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { clusterKey, formatIdentity, type ObjectIdentity } from "../fleet/identity.ts";
import { PLACEMENT_KINDS } from "../fleet/placement-schema.ts";
import type { PlacementReport } from "./combine.ts";

/** A hub CR's readiness as the status summary reads it. */
interface CrReadiness extends ObjectIdentity {
  phase: ReadinessPhase;
  reason?: string;
}

/** One placement in the status files: no timestamps, so an unchanged fleet writes no status commit. */
export interface PlacementRollupRow {
  placement: string;
  path: string;
  line: number;
  /** The clusters it selects now. */
  selected: string[];
  ready: number;
  notReady: number;
  /** The first cluster (by name) whose CR is not ready, and why. */
  firstNotReady?: string;
  /** Clusters out of the selection whose CR is still on the hub (grace period, or a held prune). */
  left: string[];
  /** Why the placement was not expanded this sync. */
  pending?: string;
}

export function placementRollup(report: PlacementReport, crs: readonly CrReadiness[]): PlacementRollupRow[] {
  const byIdentity = new Map(crs.map((cr) => [formatIdentity(cr), cr]));
  return report.selections
    .map((selection) => {
      const placement = formatIdentity(selection);
      const kind = PLACEMENT_KINDS[selection.kind];
      const clusters = selection.clusters ?? [];
      const readiness = clusters.map((cluster) => ({
        cluster: clusterKey(cluster),
        cr: byIdentity.get(formatIdentity({ kind, namespace: selection.namespace, name: cluster.crName })),
      }));
      const notReady = readiness.filter(({ cr }) => cr?.phase !== "Current");
      const first = notReady[0];
      const left = report.departures
        .filter((d) => d.placement === placement)
        .map((d) => d.cluster)
        .sort(compareStrings);
      return {
        placement,
        path: selection.path,
        line: selection.line,
        selected: readiness.map((r) => r.cluster),
        ready: readiness.length - notReady.length,
        notReady: notReady.length,
        ...(first
          ? {
              firstNotReady: `${first.cluster}: ${first.cr ? (first.cr.reason ?? "in progress") : "not created yet"}`,
            }
          : {}),
        left,
        ...(selection.pending ? { pending: selection.pending } : {}),
      };
    })
    .sort((a, b) => compareStrings(a.placement, b.placement));
}
