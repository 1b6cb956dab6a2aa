import { PLACEMENT_LABEL } from "../api/labels.ts";
import type { Diagnostic } from "../fleet/diagnostic.ts";
import { clusterKey, formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import {
  boundedDiagnostics,
  type Claim,
  conflictDiagnostics,
  type DesiredResource,
  type FleetModel,
} from "../fleet/model.ts";
import { PLACEMENT_KINDS } from "../fleet/placement-schema.ts";
import { type Departure, type DepartureInput, type DepartureResult, decideDepartures } from "./departures.ts";
import { type ExpandOptions, type Expansion, expandPlacements, type PlacementSelection } from "./expand.ts";
import type { Inventory } from "./inventory.ts";

/**
 * The fleet model with the placements' CRs in it. Precedence: none. Two sources that give one cluster two
 * CRs of a kind (two placements, or a placement and a per-cluster file), or one CR name twice, are an error
 * on every file involved, and none of them is applied: whichever "won" would silently uninstall the other's
 * configuration the moment a label changed. Every failed file blocks pruning (mirror: invalid-files), so a
 * conflict never prunes anything either. The conflicts are reported as the fleet model reports its own
 * (model.ts `conflictDiagnostics`), within the same bounds.
 */
export function withPlacements(model: FleetModel, expansion: Expansion): FleetModel {
  const sources = [
    ...model.resources.map((resource) => ({ resource, fromPlacement: false })),
    ...expansion.resources.map((resource) => ({ resource, fromPlacement: true })),
  ];
  const found = [...expansion.diagnostics, ...placementConflicts(sources)];
  // The model's own failed files are already out of its resources and marked failed: only these add to them.
  const failed = new Set(found.map((diagnostic) => diagnostic.path));
  const diagnostics = boundedDiagnostics([...model.diagnostics, ...found]);
  // A placement file declares the CRs of the clusters it selects now, those it could not make included:
  // a failed one keeps them at their last state, and a cluster it still selects has not left.
  const selectedByPath = Map.groupBy(
    expansion.selections.flatMap((selection) =>
      (selection.clusters ?? []).map((cluster) => ({
        path: selection.path,
        identity: {
          kind: PLACEMENT_KINDS[selection.kind],
          namespace: selection.namespace,
          name: cluster.crName,
        } satisfies ResourceIdentity,
      })),
    ),
    (selected) => selected.path,
  );
  return {
    resources: sources.filter((s) => !failed.has(s.resource.path)).map((s) => s.resource),
    diagnostics,
    omittedDiagnostics:
      model.omittedDiagnostics + model.diagnostics.length + found.length - diagnostics.length,
    placements: model.placements,
    rollout: model.rollout,
    approvals: model.approvals,
    files: model.files.map((file) => ({
      ...file,
      status: failed.has(file.path) ? "failed" : file.status,
      declares: [...file.declares, ...(selectedByPath.get(file.path) ?? []).map((s) => s.identity)],
    })),
  };
}

interface Source {
  resource: DesiredResource;
  fromPlacement: boolean;
}

type SourceClaim = Claim & { source: Source };

/**
 * Conflicts that involve a placement: one cluster given two CRs of a kind, one CR name made twice. Those
 * among per-cluster files alone are the fleet model's to report (and already are).
 */
function placementConflicts(sources: readonly Source[]): Diagnostic[] {
  const claim = (source: Source, key: string, field: string): SourceClaim => ({
    key,
    subject: key,
    owner: identityOf(source.resource.resource),
    path: source.resource.path,
    position: { line: source.resource.line, column: 1 },
    field,
    source,
  });
  const byCluster = sources.flatMap((source) => {
    const cluster = clusterOf(source.resource);
    return cluster === undefined ? [] : [claim(source, cluster, "spec.clusterProfileRef")];
  });
  const byName = sources.map((source) =>
    claim(source, formatIdentity(identityOf(source.resource.resource)), "metadata.name"),
  );
  const describe = (other: SourceClaim) => describeSource(other.source);
  return [
    ...conflictDiagnostics(
      involvingPlacements(byCluster),
      (mine, others) => {
        const { kind } = mine.source.resource.resource;
        return `${describe(mine)} installs ${kind} on ClusterProfile ${clusterKeyOf(mine.source.resource)}, as does ${others}; a cluster runs one ${kind}, so none of them is applied (exclude the cluster from the placement, for example with a NotIn expression)`;
      },
      describe,
    ),
    ...conflictDiagnostics(
      involvingPlacements(byName),
      (mine, others) =>
        `${describe(mine)} and ${others} both make ${formatIdentity(mine.owner)}; none of them is applied`,
      describe,
    ),
  ];
}

function involvingPlacements(claims: readonly SourceClaim[]): SourceClaim[] {
  const keys = new Set(claims.filter((c) => c.source.fromPlacement).map((c) => c.key));
  return claims.filter((c) => keys.has(c.key));
}

function describeSource({ resource, fromPlacement }: Source): string {
  const where = `${resource.path}:${resource.line}`;
  return fromPlacement
    ? `placement ${resource.resource.metadata.labels?.[PLACEMENT_LABEL]} (${where})`
    : `${formatIdentity(identityOf(resource.resource))} (${where})`;
}

/** `namespace/name` of the cluster a desired CR installs on; undefined for the hub itself. */
function clusterKeyOf({ resource }: DesiredResource): string | undefined {
  const ref = resource.spec.clusterProfileRef;
  return ref && clusterKey(ref);
}

/** One CR of a kind per cluster: the key two sources must not share. */
function clusterOf(desired: DesiredResource): string | undefined {
  const ref = clusterKeyOf(desired);
  return ref ? `${desired.resource.kind} ${ref}` : undefined;
}

/** What the placements did in one sync, for the status rollup and plan. */
export interface PlacementReport {
  selections: PlacementSelection[];
  /** Clusters out of their placement and waiting for the grace period (or a prune safeguard). */
  departures: Departure[];
}

/** One sync's placements, expanded against the inventory: the sync's step between the model and the hub. */
export interface PlacementSync {
  /** The fleet model with every placement's CRs in it. */
  model: FleetModel;
  selections: PlacementSelection[];
  /** Which live CRs of clusters out of their placement are kept, given the clock and the last departures. */
  departures(
    input: Pick<DepartureInput, "live" | "repository" | "now" | "gracePeriodMs" | "previous">,
  ): DepartureResult;
}

/**
 * The fleet model with its placements expanded against the inventory, and how to tell, once the hub is read,
 * which CRs of clusters that left a placement are kept.
 */
export function expandForSync(
  model: FleetModel,
  inventory: Inventory,
  options: ExpandOptions,
): PlacementSync {
  const expansion = expandPlacements(model.placements, inventory, options);
  const combined = withPlacements(model, expansion);
  const declared = new Set(combined.files.flatMap((file) => file.declares).map(formatIdentity));
  return {
    model: combined,
    selections: expansion.selections,
    departures: (input) =>
      decideDepartures({
        ...input,
        desired: declared,
        placements: new Set(expansion.selections.map(formatIdentity)),
        pendingPlacements: new Set(
          expansion.selections.filter((s) => s.pending !== undefined).map(formatIdentity),
        ),
        failedPaths: new Set(combined.files.filter((f) => f.status === "failed").map((f) => f.path)),
      }),
  };
}
