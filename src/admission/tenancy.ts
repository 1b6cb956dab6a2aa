import { z } from "zod";
import { isManagedByFleet, SOURCE_REPOSITORY_ANNOTATION } from "../api/labels.ts";
import type { KubeObject } from "../kube/object.ts";

/**
 * Which hub CRs the controller acts on. Whoever can create a KnativeServing/KnativeEventing that the
 * controller reconciles is admin on every spoke it may target, so by default only CRs the mirror created
 * from the fleet repository (its managed-by label and source annotations), in the fleet's own hub namespace,
 * are reconciled. The namespace is the boundary that holds: labels and annotations can be copied by anyone
 * who may create a CR there, so keep create rights on that namespace to the controller.
 */
export const TenancySchema = z.strictObject({
  /** Hub namespaces whose CRs are reconciled; unset: the config's defaultNamespace only. ["*"]: every one. */
  crNamespaces: z.array(z.string().min(1)).min(1).optional(),
  /** Also reconcile CRs the mirror did not create (made by hand or by another tool). */
  reconcileHandMadeCRs: z.boolean().default(false),
});
type Tenancy = z.infer<typeof TenancySchema>;

/** Where ClusterProfiles are read from unless the operator names other namespaces (the sandbox's too). */
export const DEFAULT_CLUSTER_PROFILE_NAMESPACE = "fleet-system";

/** A namespace list where "*" means every namespace: undefined for all, else the names. */
export const namespaceAllowlist = (namespaces: readonly string[]): readonly string[] | undefined =>
  namespaces.includes("*") ? undefined : namespaces;

export type CrAdmission = (object: KubeObject) => { admitted: true } | { admitted: false; why: string };

export function crAdmission(tenancy: Tenancy, defaultNamespace: string): CrAdmission {
  const namespaces = namespaceAllowlist(tenancy.crNamespaces ?? [defaultNamespace]);
  return (object) => {
    const namespace = object.metadata.namespace ?? "";
    if (namespaces !== undefined && !namespaces.includes(namespace)) {
      return {
        admitted: false,
        why: `its namespace ${namespace} is not one whose CRs knative-fleet reconciles (tenancy.crNamespaces: ${namespaces.join(", ")})`,
      };
    }
    const mirrored = isManagedByFleet(object) && object.metadata.annotations?.[SOURCE_REPOSITORY_ANNOTATION];
    if (!mirrored && !tenancy.reconcileHandMadeCRs) {
      return {
        admitted: false,
        why: "it was not created from the fleet repository (tenancy.reconcileHandMadeCRs is off)",
      };
    }
    return { admitted: true };
  };
}
