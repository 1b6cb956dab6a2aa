import { OPERATOR_API_VERSION, withEveryEventSource } from "../api/knative.ts";
import { PLACEMENT_KIND_LABEL, PLACEMENT_LABEL, SOURCE_CLUSTER_ANNOTATION } from "../api/labels.ts";
import { compareStrings, type Diagnostic, type FieldPath, formatFieldPath } from "../fleet/diagnostic.ts";
import type { FleetResource } from "../fleet/document-schema.ts";
import { type ClusterRef, clusterKey } from "../fleet/identity.ts";
import { type DesiredResource, namedAndCounted } from "../fleet/model.ts";
import { type DeclaredPlacement, type MergedSpec, mergedSpec } from "../fleet/placement-document.ts";
import { PLACEMENT_KINDS, type PlacementDocument, type PlacementKind } from "../fleet/placement-schema.ts";
import { locateField } from "../fleet/yaml-source.ts";
import type { Inventory, InventoryCluster } from "./inventory.ts";
import { placementCrName } from "./naming.ts";
import { matchesTerm } from "./select.ts";

export interface ExpandOptions {
  /** The namespaces whose ClusterProfiles may be selected; undefined allows every namespace. */
  allowedNamespaces?: readonly string[];
}

/** Why a cluster is selected: a term of the selector, the explicit list, or the PlacementDecision. */
type SelectionSource = "selector" | "list" | "decision";

export interface SelectedCluster {
  namespace: string;
  name: string;
  /** The CR the placement makes for the cluster. */
  crName: string;
  via: SelectionSource[];
  /** The overrides applied, by index, in the order applied. */
  overrides: number[];
  /**
   * The template's spec with those overrides applied one after the other (clusterProfileRef not included).
   * When it is invalid, a diagnostic says so and the placement makes no CR.
   */
  spec: Record<string, unknown>;
}

export interface PlacementSelection {
  path: string;
  line: number;
  kind: PlacementKind;
  namespace: string;
  name: string;
  /** Absent when selection needs what the hub could not tell (see `pending`). */
  clusters?: SelectedCluster[];
  /** Why the placement was not expanded now; its CRs keep their last state. */
  pending?: string;
  /** Clusters a PlacementDecision chose that the placement may not use, and why. */
  skipped: { cluster: string; reason: string }[];
}

export interface Expansion {
  /** The CRs of every placement that expanded without an error. */
  resources: DesiredResource[];
  diagnostics: Diagnostic[];
  selections: PlacementSelection[];
}

/**
 * Expands every placement against the inventory: the clusters it selects (terms ORed, each term's label and
 * property selectors ANDed; plus the explicit list; plus the PlacementDecision's clusters), one CR per
 * cluster with the overrides that apply to it merged into the template in the order written. Pure: the same
 * placements and inventory give the same CRs, byte for byte.
 */
export function expandPlacements(
  placements: readonly DeclaredPlacement[],
  inventory: Inventory,
  options: ExpandOptions = {},
): Expansion {
  const allowed = options.allowedNamespaces && new Set(options.allowedNamespaces);
  const isAllowed = (namespace: string) => allowed === undefined || allowed.has(namespace);
  const clusters = inventory.clusters?.filter((cluster) => isAllowed(cluster.namespace));
  const clustersByKey = new Map(clusters?.map((cluster) => [clusterKey(cluster), cluster]));
  const result: Expansion = { resources: [], diagnostics: [], selections: [] };
  for (const declared of placements) {
    const one = expandOne(declared, { inventory, clusters, clustersByKey, isAllowed });
    result.selections.push(one.selection);
    result.diagnostics.push(...one.diagnostics);
    if (one.diagnostics.length === 0) result.resources.push(...one.resources);
  }
  return result;
}

interface ExpandContext {
  inventory: Inventory;
  clusters: readonly InventoryCluster[] | undefined;
  clustersByKey: ReadonlyMap<string, InventoryCluster>;
  isAllowed(namespace: string): boolean;
}

function expandOne(
  declared: DeclaredPlacement,
  context: ExpandContext,
): { selection: PlacementSelection; resources: DesiredResource[]; diagnostics: Diagnostic[] } {
  const { placement, path } = declared;
  const { spec, metadata } = placement;
  const selection: PlacementSelection = {
    path,
    line: locateField(declared.source, [], "key").line,
    kind: placement.kind,
    namespace: metadata.namespace,
    name: metadata.name,
    skipped: [],
  };
  const diagnostic = (field: FieldPath, message: string): Diagnostic => ({
    path,
    ...locateField(declared.source, field, "key"),
    field: formatFieldPath(field),
    message,
  });
  // Listed clusters outside the allowed namespaces are a mistake in the file, whatever the hub holds.
  const listed = spec.clusterProfiles ?? [];
  const forbidden = listed.flatMap((ref, index) =>
    context.isAllowed(ref.namespace)
      ? []
      : [
          diagnostic(
            ["spec", "clusterProfiles", index, "namespace"],
            `ClusterProfiles in namespace ${ref.namespace} may not be targeted (allowedClusterProfileNamespaces)`,
          ),
        ],
  );
  const decisionNamespace = spec.placementDecisionRef?.namespace;
  if (decisionNamespace !== undefined && !context.isAllowed(decisionNamespace)) {
    forbidden.push(
      diagnostic(
        ["spec", "placementDecisionRef", "namespace"],
        `PlacementDecisions in namespace ${decisionNamespace} are not read (allowedClusterProfileNamespaces)`,
      ),
    );
  }
  if (forbidden.length > 0) return { selection, resources: [], diagnostics: forbidden };

  const pending = pendingReason(placement, context.inventory);
  if (pending) return { selection: { ...selection, pending }, resources: [], diagnostics: [] };

  const chosen = new Map<string, { ref: ClusterRef; via: Set<SelectionSource> }>();
  const choose = (ref: ClusterRef, via: SelectionSource) => {
    const key = clusterKey(ref);
    const entry = chosen.get(key) ?? { ref: { namespace: ref.namespace, name: ref.name }, via: new Set() };
    entry.via.add(via);
    chosen.set(key, entry);
  };
  if (spec.clusterSelectorTerms) {
    for (const cluster of context.clusters ?? []) {
      if (spec.clusterSelectorTerms.some((term) => matchesTerm(term, cluster))) choose(cluster, "selector");
    }
  }
  for (const ref of listed) choose(ref, "list");
  if (spec.placementDecisionRef) {
    for (const ref of decisionClusters(spec.placementDecisionRef, context.inventory)) {
      if (context.isAllowed(ref.namespace)) choose(ref, "decision");
      else
        selection.skipped.push({
          cluster: clusterKey(ref),
          reason: `chosen by the PlacementDecision, but namespace ${ref.namespace} may not be targeted`,
        });
    }
  }

  const selected: SelectedCluster[] = [];
  const resources: DesiredResource[] = [];
  const diagnostics: Diagnostic[] = [];
  // One merge and one check per combination of overrides, however many clusters share it.
  const combinations = new Map<string, { merged: MergedSpec; clusters: string[] }>();
  for (const [key, { ref, via }] of [...chosen].sort(([a], [b]) => compareStrings(a, b))) {
    const overrides = applicableOverrides(placement, ref, context.clustersByKey.get(key));
    const combination = overrides.join(", ");
    const known = combinations.get(combination);
    const entry = known ?? { merged: mergedSpec(declared, overrides), clusters: [] };
    combinations.set(combination, entry);
    entry.clusters.push(key);
    const crName = placementCrName(metadata.name, ref);
    selected.push({ ...ref, crName, via: [...via].sort(), overrides, spec: entry.merged.spec });
    if (entry.merged.problems.length > 0) continue;
    resources.push({
      resource: placementCr(placement, ref, crName, entry.merged.spec),
      path,
      documentIndex: declared.documentIndex,
      line: selection.line,
    });
  }
  for (const [combination, { merged, clusters }] of combinations) {
    const where = `on ${namedAndCounted(clusters, (cluster) => cluster)}, where overrides ${combination} apply in this order`;
    for (const problem of merged.problems) {
      diagnostics.push({
        path,
        ...locateField(declared.source, problem.field, problem.anchor),
        field: formatFieldPath(problem.field),
        message: `${where}: ${problem.message}`,
      });
    }
  }
  // Two ClusterProfiles of one name in two namespaces would both get `<placement>-<name>`.
  const byName = Map.groupBy(selected, (cluster) => cluster.crName);
  for (const [crName, same] of byName) {
    if (same.length < 2) continue;
    diagnostics.push(
      diagnostic(
        ["metadata", "name"],
        `selects ${same.map(clusterKey).join(" and ")}, whose CRs would both be named ${crName}; narrow the selection to one of them`,
      ),
    );
  }
  return { selection: { ...selection, clusters: selected }, resources, diagnostics };
}

/** What the placement needs from the hub that the hub could not tell; undefined when nothing is missing. */
function pendingReason(placement: PlacementDocument, inventory: Inventory): string | undefined {
  const { spec } = placement;
  const readsClusters =
    spec.clusterSelectorTerms !== undefined ||
    (spec.overrides ?? []).some((override) => override.clusterSelector !== undefined);
  const why = inventory.unknownReason ? `: ${inventory.unknownReason}` : "";
  if (readsClusters && inventory.clusters === undefined) {
    return `the hub's ClusterProfiles are not known yet${why}`;
  }
  if (spec.placementDecisionRef && inventory.decisions === undefined) {
    return `the hub's PlacementDecisions are not known yet${why}`;
  }
  return undefined;
}

function decisionClusters(
  ref: NonNullable<PlacementDocument["spec"]["placementDecisionRef"]>,
  inventory: Inventory,
): ClusterRef[] {
  const inNamespace = (inventory.decisions ?? []).filter((decision) => decision.namespace === ref.namespace);
  const named = ref.name === undefined ? undefined : inNamespace.find((d) => d.name === ref.name);
  const key = ref.decisionKey ?? named?.decisionKey;
  const slices =
    key !== undefined
      ? inNamespace.filter((decision) => decision.decisionKey === key || decision === named)
      : named
        ? [named]
        : [];
  return slices.flatMap((slice) => slice.clusters);
}

/** The overrides whose cluster list names the cluster or whose selector matches it, in the order written. */
function applicableOverrides(
  placement: PlacementDocument,
  ref: ClusterRef,
  cluster: InventoryCluster | undefined,
): number[] {
  return (placement.spec.overrides ?? []).flatMap((override, index) => {
    const applies = override.clusters
      ? override.clusters.some((listed) => listed.namespace === ref.namespace && listed.name === ref.name)
      : cluster !== undefined && override.clusterSelector !== undefined
        ? matchesTerm(override.clusterSelector, cluster)
        : false;
    return applies ? [index] : [];
  });
}

/** The ordinary upstream-shaped CR a placement makes for one cluster. */
function placementCr(
  placement: PlacementDocument,
  ref: ClusterRef,
  crName: string,
  spec: Record<string, unknown>,
): FleetResource {
  const { metadata } = placement;
  return {
    apiVersion: OPERATOR_API_VERSION,
    kind: PLACEMENT_KINDS[placement.kind],
    metadata: {
      name: crName,
      namespace: metadata.namespace,
      labels: {
        ...metadata.labels,
        [PLACEMENT_LABEL]: metadata.name,
        [PLACEMENT_KIND_LABEL]: placement.kind.toLowerCase(),
      },
      annotations: { ...metadata.annotations, [SOURCE_CLUSTER_ANNOTATION]: clusterKey(ref) },
    },
    spec: withEveryEventSource({ ...spec, clusterProfileRef: { namespace: ref.namespace, name: ref.name } }),
  } as FleetResource;
}
