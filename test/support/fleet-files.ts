import { stringify } from "yaml";
import type { HubCrPolicy } from "../../src/admission/hub-cr.ts";
import type { KnativeKind } from "../../src/api/knative.ts";
import type { FleetFile } from "../../src/fleet/model.ts";
import { DEFAULT_FLEET_SETTINGS, type FleetSettings, hubCrPolicy } from "../../src/sync/settings.ts";

// The one builder of Knative CRs for tests: as an object (a hub CR), as a fleet file's text, or as a fleet file.

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
