import { stringify } from "yaml";
import type { HubCrPolicy } from "../../src/admission/hub-cr.ts";
import type { KnativeKind } from "../../src/api/knative.ts";
import type { FleetFile } from "../../src/fleet/model.ts";
import type { InventoryCluster } from "../../src/placement/inventory.ts";
import { DEFAULT_FLEET_SETTINGS, type FleetSettings, hubCrPolicy } from "../../src/sync/settings.ts";

// The one builder of Knative CRs for tests: as an object (a hub CR), as a fleet file's text, or as a fleet file;
// and of the other fleet files (rollouts, placements), the repository they come from and the clusters
// placements and rollouts select.

/** The fleet repository's URL, for tests that need one and do not care which. */
export const TEST_REPOSITORY = "https://git.example/fleet.git";

/** A cluster as the inventory sees it: a ClusterProfile (in fleet-system unless told otherwise). */
export function cluster(
  name: string,
  labels: Record<string, string> = {},
  properties: Record<string, string> = {},
  namespace = "fleet-system",
): InventoryCluster {
  return { namespace, name, labels, properties: new Map(Object.entries(properties)) };
}

export interface CrOptions {
  kind?: KnativeKind;
  name: string;
  /** The CR's namespace on the hub (default knative-fleet). */
  namespace?: string;
  /** spec.version (default 1.21). */
  version?: string;
  /** The ClusterProfile's name; null for a CR that installs on the hub itself. */
  cluster: string | null;
  /** The ClusterProfile's namespace (default fleet-system, the sandbox's). */
  clusterNamespace?: string;
  /** More of spec, beside version and clusterProfileRef. */
  spec?: Record<string, unknown>;
  annotations?: Record<string, string>;
}

/** A KnativeServing or KnativeEventing as a fleet file declares it and the mirror applies it. */
export function crObject(cr: CrOptions) {
  return {
    apiVersion: "operator.knative.dev/v1beta1",
    kind: cr.kind ?? "KnativeServing",
    metadata: {
      name: cr.name,
      namespace: cr.namespace ?? "knative-fleet",
      ...(cr.annotations && { annotations: cr.annotations }),
    },
    spec: {
      version: cr.version ?? "1.21",
      ...(cr.cluster !== null && {
        clusterProfileRef: { name: cr.cluster, namespace: cr.clusterNamespace ?? "fleet-system" },
      }),
      ...cr.spec,
    },
  };
}

/** A fleet file's text declaring one CR. */
export const crText = (cr: CrOptions): string => stringify(crObject(cr));

/** A fleet file declaring one CR, at `clusters/<name>.yaml` unless told otherwise. */
export const crFile = (cr: CrOptions, path = `clusters/${cr.name}.yaml`): FleetFile => ({
  path,
  text: crText(cr),
});

export interface InertCrOptions {
  kind?: KnativeKind;
  namespace: string;
  /** spec.version (default 1.22). */
  version?: string;
  annotations?: Record<string, string>;
}

/**
 * A fleet file declaring one CR that installs nowhere: it targets a ClusterProfile of its own name in the
 * namespace `nowhere`, which no sandbox has, so nothing is installed and one cluster runs one CR of a kind.
 */
export const inertCrFile = (name: string, options: InertCrOptions): FleetFile =>
  crFile({
    ...options,
    name,
    version: options.version ?? "1.22",
    cluster: name,
    clusterNamespace: "nowhere",
  });

/** A fleet document's name, and its namespace when it names one. */
export interface DocumentName {
  name: string;
  namespace?: string;
}

const FLEET_API_VERSION = "fleet.knative.dev/v1alpha1";

const fleetDocument = (kind: string, { name, namespace }: DocumentName, spec: Record<string, unknown>) =>
  stringify({
    apiVersion: FLEET_API_VERSION,
    kind,
    metadata: { name, ...(namespace !== undefined && { namespace }) },
    spec,
  });

/** A KnativeRollout file's text with the given spec (named `default` unless told otherwise). */
export const rolloutText = (
  spec: Record<string, unknown>,
  name: DocumentName = { name: "default" },
): string => fleetDocument("KnativeRollout", name, spec);

/** A KnativeRolloutApproval file's text: the wave of the rollout of `commit` approved. */
export const approvalText = (commit: string, wave: string, extra: Record<string, unknown> = {}): string =>
  fleetDocument(
    "KnativeRolloutApproval",
    { name: `${wave}-${commit.slice(0, 12)}` },
    { commit, wave, ...extra },
  );

export interface PlacementOptions extends DocumentName {
  kind?: "KnativeServingPlacement" | "KnativeEventingPlacement";
  /** The placement's spec: clusterProfiles or clusterSelectorTerms, template, overrides. */
  spec: Record<string, unknown>;
}

/** A KnativeServingPlacement's (or KnativeEventingPlacement's) file text. */
export const placementText = ({
  kind = "KnativeServingPlacement",
  spec,
  ...name
}: PlacementOptions): string => fleetDocument(kind, name, spec);

/**
 * The service's settings for tests of other things: CRs in any hub namespace may target ClusterProfiles in
 * any namespace, or the hub itself; manifest locations as the service's defaults (no URL, no local path).
 */
export const ANY_NAMESPACE_SETTINGS: FleetSettings = {
  ...DEFAULT_FLEET_SETTINGS,
  crNamespaces: undefined,
  hubInstall: true,
  access: { ...DEFAULT_FLEET_SETTINGS.access, namespaces: undefined },
};

/** The mirror's admission under those settings. */
export const ANY_NAMESPACE_ADMISSION: HubCrPolicy = hubCrPolicy(ANY_NAMESPACE_SETTINGS, undefined);
