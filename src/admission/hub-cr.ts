import type { ClusterProfileRef } from "../api/knative.ts";
import { ABANDON_CLEANUP_ANNOTATION } from "../api/labels.ts";
import { checkLocationText, type LocationPolicy, VERSION_VARIABLE } from "./locations.ts";

/**
 * What may come onto the hub as a KnativeServing/KnativeEventing, decided from the CR alone. The mirror
 * applies it to every CR before it writes one, in every mode: with `reconciler: external` no engine of ours
 * runs, and the upstream operator would act on whatever the hub holds. `plan` and `validate` can call it on
 * the same CRs and say the same.
 */
export interface HubCrPolicy {
  /** Hub namespaces whose CRs are reconciled (tenancy.crNamespaces); undefined: every namespace. */
  crNamespaces: readonly string[] | undefined;
  /** Namespaces whose ClusterProfiles may be targeted (allowedClusterProfileNamespaces); undefined: every one. */
  clusterProfileNamespaces: readonly string[] | undefined;
  /**
   * Whether a CR without spec.clusterProfileRef may install on the hub itself (hubInstall.enabled). Checked
   * here too: with `reconciler: external` the upstream operator would install such a CR on the hub.
   */
  hubInstall: boolean;
  /** Which spec.manifests / spec.additionalManifests locations may be read. */
  locations: LocationPolicy;
  /** The only directory local manifest paths may point into; none: every local path is refused. */
  kodataDir: string | undefined;
}

/** The parts of a CR the admission reads: a fleet file's CR and a hub CR both have them. */
interface AdmittedCr {
  metadata: { namespace: string; annotations?: Readonly<Record<string, string>> };
  spec: {
    version?: string;
    clusterProfileRef?: ClusterProfileRef;
    manifests?: readonly { URL: string }[];
    additionalManifests?: readonly { URL: string }[];
  };
}

/**
 * The one-line fix of a CR in a namespace the service does not reconcile, as the Knative docs' examples
 * (`namespace: knative-serving`) are: the fleet's namespace is the default, a tenancy boundary
 * (src/admission/README.md), so the refusal names both ways out rather than widening it.
 */
const NAMESPACE_FIX = (namespace: string) =>
  `delete the metadata.namespace line (the CR then goes to the fleet's namespace), or add ${namespace} to ` +
  "tenancy.crNamespaces in the service's config (the chart's value tenancy.crNamespaces)";

/** Why a CR is refused: the field to fix, and what is wrong with it. */
interface Refusal {
  field: string;
  message: string;
}

/**
 * The first reason `cr` may not be mirrored, or undefined. Checks, in order: the abandon-cleanup annotation
 * (only a hub operator sets it, whatever the policy), the hub namespace (tenancy), the ClusterProfile's
 * namespace (without one: whether hub installs are on), and every manifest location's text (prefix, scheme, literal address, credentials, local paths
 * inside kodata). What needs the world (DNS, the file behind a path) is checked again when the manifests
 * are read. Without a policy (a picture of the hub, not a write) only the first check applies.
 */
export function admitHubCr(cr: AdmittedCr, policy: HubCrPolicy | undefined): Refusal | undefined {
  if (cr.metadata.annotations?.[ABANDON_CLEANUP_ANNOTATION] !== undefined) {
    return {
      field: `metadata.annotations.${ABANDON_CLEANUP_ANNOTATION}`,
      message:
        "cannot come from a fleet file (a push could make a removal leave the cluster as it is); a hub " +
        "operator sets it on the hub CR",
    };
  }
  if (policy === undefined) return undefined;
  const { namespace } = cr.metadata;
  if (policy.crNamespaces !== undefined && !policy.crNamespaces.includes(namespace)) {
    return {
      field: "metadata.namespace",
      message:
        `${namespace} is not a hub namespace whose CRs knative-fleet reconciles ` +
        `(tenancy.crNamespaces: ${policy.crNamespaces.join(", ")}); ${NAMESPACE_FIX(namespace)}`,
    };
  }
  const ref = cr.spec.clusterProfileRef;
  if (ref === undefined && !policy.hubInstall) {
    return {
      field: "spec.clusterProfileRef",
      message:
        "is required: installing on the hub itself is disabled (hubInstall.enabled is false); name the " +
        "ClusterProfile of the cluster to install on",
    };
  }
  if (
    ref !== undefined &&
    policy.clusterProfileNamespaces !== undefined &&
    !policy.clusterProfileNamespaces.includes(ref.namespace)
  ) {
    return {
      field: "spec.clusterProfileRef.namespace",
      message:
        `ClusterProfiles in namespace ${ref.namespace} may not be targeted ` +
        `(allowedClusterProfileNamespaces: ${policy.clusterProfileNamespaces.join(", ")})`,
    };
  }
  const version = cr.spec.version ?? "";
  for (const list of ["manifests", "additionalManifests"] as const) {
    for (const [index, { URL: location }] of (cr.spec[list] ?? []).entries()) {
      try {
        checkLocationText(location.replaceAll(VERSION_VARIABLE, version), policy.locations, policy.kodataDir);
      } catch (err) {
        return { field: `spec.${list}[${index}].URL`, message: (err as Error).message };
      }
    }
  }
  return undefined;
}

/**
 * admitHubCr for a CR already in hub form (what the rollout gate writes back on a revert): its fields read
 * as they are, anything malformed where the admission looks refused.
 */
export function admitHubObject(
  object: { metadata: { namespace?: string; annotations?: Record<string, string> }; spec?: unknown },
  policy: HubCrPolicy,
): Refusal | undefined {
  const spec = (object.spec ?? {}) as AdmittedCr["spec"];
  const ref = spec.clusterProfileRef;
  const readable = (list: unknown) =>
    list === undefined ||
    list === null ||
    (Array.isArray(list) && list.every((location) => typeof location?.URL === "string"));
  if (
    (ref !== undefined && typeof ref?.namespace !== "string") ||
    !readable(spec.manifests) ||
    !readable(spec.additionalManifests)
  ) {
    return { field: "spec", message: "is not a KnativeServing/KnativeEventing spec the admission can read" };
  }
  const { namespace } = object.metadata;
  if (namespace === undefined)
    return { field: "metadata.namespace", message: "is not set: a hub CR is in a namespace" };
  return admitHubCr({ metadata: { ...object.metadata, namespace }, spec }, policy);
}
