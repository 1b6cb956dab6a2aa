import { type AccessPolicy, SAFE_ACCESS_POLICY } from "../access/policy.ts";
import type { HubCrPolicy } from "../admission/hub-cr.ts";
import { DEFAULT_LOCATION_POLICY, type LocationPolicy } from "../admission/locations.ts";
import { DEFAULT_CLUSTER_PROFILE_NAMESPACE } from "../admission/tenancy.ts";
import { durationMs } from "../fleet/duration.ts";
import { DEFAULT_NAMESPACE } from "../fleet/parse.ts";
import { DEFAULT_FILE_SELECTION, type FileSelection } from "../fleet/select.ts";
import { type MirrorOptions, MirrorOptionsSchema } from "../mirror/decide.ts";
import { DEFAULT_DEPARTURE_GRACE_PERIOD } from "../placement/departures.ts";

/**
 * What `run`, `plan` and `validate` must agree on, from one config file, so a pull request is checked and
 * planned exactly as the service will treat it: which files are fleet files, the namespace of a CR that
 * names none, what the hub admits, the prune safeguards, which manifest locations may be read, which
 * ClusterProfiles may be reached and what they may ask for, and how long a departed cluster keeps its CR.
 */
export interface FleetSettings {
  selection: FileSelection;
  defaultNamespace: string;
  /** Hub namespaces whose CRs are reconciled (tenancy.crNamespaces); undefined for every namespace. */
  crNamespaces: readonly string[] | undefined;
  /** Whether a CR without spec.clusterProfileRef may install on the hub itself (hubInstall.enabled). */
  hubInstall: boolean;
  prune: MirrorOptions;
  locations: LocationPolicy;
  access: AccessSettings;
  /** How long a cluster may be out of a placement before its CR is pruned (placements.departureGracePeriod). */
  departureGracePeriodMs: number;
  /** `external`: the upstream operator reconciles the hub CRs, and `run` starts no controller of its own. */
  reconciler: "knative-fleet" | "external";
}

/** Which ClusterProfiles may be used and what they may ask for. */
export interface AccessSettings {
  /** ClusterProfile namespaces; undefined for every namespace. */
  namespaces: readonly string[] | undefined;
  policy: AccessPolicy;
}

/** The settings without a config file: the service's defaults. */
export const DEFAULT_FLEET_SETTINGS: Readonly<FleetSettings> = {
  selection: DEFAULT_FILE_SELECTION,
  defaultNamespace: DEFAULT_NAMESPACE,
  crNamespaces: [DEFAULT_NAMESPACE],
  hubInstall: false,
  prune: MirrorOptionsSchema.parse({}),
  locations: DEFAULT_LOCATION_POLICY,
  access: { namespaces: [DEFAULT_CLUSTER_PROFILE_NAMESPACE], policy: SAFE_ACCESS_POLICY },
  departureGracePeriodMs: durationMs(DEFAULT_DEPARTURE_GRACE_PERIOD)!,
  reconciler: "knative-fleet",
};

/**
 * What the mirror lets onto the hub under these settings (src/admission/hub-cr.ts), the same in every mode;
 * local manifest paths may point into `kodataDir` only.
 */
export function hubCrPolicy(settings: FleetSettings, kodataDir: string | undefined): HubCrPolicy {
  return {
    crNamespaces: settings.crNamespaces,
    clusterProfileNamespaces: settings.access.namespaces,
    hubInstall: settings.hubInstall,
    locations: settings.locations,
    kodataDir,
  };
}
