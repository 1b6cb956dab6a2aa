import { compareDiagnostics, type Diagnostic } from "../fleet/diagnostic.ts";
import type { DesiredResource, FleetModel } from "../fleet/model.ts";
import { formatIdentity } from "../fleet/parse.ts";
import { type Expansion, PLACEMENT_LABEL } from "./expand.ts";

/**
 * The fleet model with the placements' CRs in it. Precedence: none. Two sources that give one cluster two
 * CRs of a kind (two placements, or a placement and a per-cluster file), or one CR name twice, are an error
 * on every file involved, and none of them is applied: whichever "won" would silently uninstall the other's
 * configuration the moment a label changed. Every failed file blocks pruning (mirror: invalid-files), so a
 * conflict never prunes anything either.
 */
export function withPlacements(model: FleetModel, expansion: Expansion): FleetModel {
  const sources = [
    ...model.resources.map((resource) => ({ resource, fromPlacement: false })),
    ...expansion.resources.map((resource) => ({ resource, fromPlacement: true })),
  ];
  const conflicts = [
    ...conflictDiagnostics(sources, (s) => clusterOf(s.resource), "cluster"),
    ...conflictDiagnostics(sources, (s) => formatIdentity(identityOf(s.resource)), "name"),
  ];
  const diagnostics = [...model.diagnostics, ...expansion.diagnostics, ...conflicts].sort(compareDiagnostics);
  const failed = new Set(diagnostics.map((diagnostic) => diagnostic.path));
  const expandedByPath = Map.groupBy(expansion.resources, (resource) => resource.path);
  return {
    resources: sources.filter((s) => !failed.has(s.resource.path)).map((s) => s.resource),
    diagnostics,
    omittedDiagnostics: model.omittedDiagnostics,
    placements: model.placements,
    rollout: model.rollout,
    files: model.files.map((file) => ({
      ...file,
      status: failed.has(file.path) ? "failed" : file.status,
      // A placement file declares the CRs it expands to: a failed one keeps them at their last state.
      declares: [...file.declares, ...(expandedByPath.get(file.path) ?? []).map(identityOf)],
    })),
  };
}

interface Source {
  resource: DesiredResource;
  fromPlacement: boolean;
}

/** One diagnostic per source whose key another source from a placement shares. */
function conflictDiagnostics(
  sources: readonly Source[],
  keyOf: (source: Source) => string | undefined,
  what: "cluster" | "name",
): Diagnostic[] {
  const groups = Map.groupBy(
    sources.filter((s) => keyOf(s) !== undefined),
    (s) => keyOf(s)!,
  );
  return (
    [...groups.values()]
      // Conflicts among per-cluster files alone are the fleet model's to report (and already are).
      .filter((group) => group.length > 1 && group.some((s) => s.fromPlacement))
      .flatMap((group) =>
        group.map((source) => {
          const others = group
            .filter((other) => other !== source)
            .map(describe)
            .join(", ");
          const { kind } = source.resource.resource;
          const message =
            what === "cluster"
              ? `${describe(source)} installs ${kind} on ClusterProfile ${clusterRefOf(source.resource)}, as does ${others}; a cluster runs one ${kind}, so none of them is applied (exclude the cluster from the placement, for example with a NotIn expression)`
              : `${describe(source)} and ${others} both make ${formatIdentity(identityOf(source.resource))}; none of them is applied`;
          return {
            path: source.resource.path,
            line: source.resource.line,
            column: 1,
            field: what === "cluster" ? "spec.clusterProfileRef" : "metadata.name",
            message,
          };
        }),
      )
  );
}

function describe({ resource, fromPlacement }: Source): string {
  const where = `${resource.path}:${resource.line}`;
  return fromPlacement
    ? `placement ${resource.resource.metadata.labels?.[PLACEMENT_LABEL]} (${where})`
    : `${formatIdentity(identityOf(resource))} (${where})`;
}

function clusterRefOf({ resource }: DesiredResource): string | undefined {
  const ref = resource.spec.clusterProfileRef;
  return ref ? `${ref.namespace}/${ref.name}` : undefined;
}

/** One CR of a kind per cluster: the key two sources must not share. */
function clusterOf(desired: DesiredResource): string | undefined {
  const ref = clusterRefOf(desired);
  return ref ? `${desired.resource.kind} ${ref}` : undefined;
}

function identityOf({ resource }: DesiredResource) {
  return { kind: resource.kind, namespace: resource.metadata.namespace, name: resource.metadata.name };
}
