import type { ReadinessPhase } from "../api/conditions.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { clusterKey, formatIdentity, type ObjectIdentity } from "../fleet/identity.ts";
import { PLACEMENT_KINDS } from "../fleet/placement-schema.ts";
import type { PlacementReport } from "./combine.ts";

/** A hub CR's readiness as the status summary reads it. */
interface CrReadiness extends ObjectIdentity {
  phase: ReadinessPhase;
  reason?: string;
  /** The installed version, and a change made on its cluster that report mode keeps (status/row.ts). */
  version?: string;
  drift?: { state: "kept" | "corrected" };
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
  /**
   * Clusters that differ from the others of the placement: on another version than most (a straggler of an
   * upgrade chain, a held wave), or keeping a change made on the cluster (drift in report mode).
   */
  differs?: string[];
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
        ...differing(readiness),
      };
    })
    .sort((a, b) => compareStrings(a.placement, b.placement));
}

/** The clusters of one placement off its common version, or keeping drift; nothing when none is. */
function differing(readiness: readonly { cluster: string; cr?: CrReadiness }[]): { differs?: string[] } {
  const counts = new Map<string, number>();
  for (const { cr } of readiness) if (cr?.version) counts.set(cr.version, (counts.get(cr.version) ?? 0) + 1);
  // The most common version; between equally common ones the newest, so a straggler is the one named.
  const common = [...counts].sort(([a, m], [b, n]) => n - m || newerFirst(a, b))[0]?.[0];
  const differs = readiness.flatMap(({ cluster, cr }) => [
    ...(cr?.version && cr.version !== common
      ? [`${cluster}: version ${cr.version}, the others ${common}`]
      : []),
    ...(cr?.drift?.state === "kept"
      ? [`${cluster}: keeps a change made on the cluster (drift, report mode)`]
      : []),
  ]);
  return differs.length > 0 ? { differs } : {};
}

/** Newer first, numerically part by part (`1.10.0` before `1.9.3`); the render stage, which has the full order, sits above placement. */
const newerFirst = (a: string, b: string): number => {
  const [x, y] = [a.split(".").map(Number), b.split(".").map(Number)];
  // Over the longer of the two, a missing part 0: `1.10` and `1.10.1` compare the same either way round.
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const difference = (y[i] ?? 0) - (x[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
};
