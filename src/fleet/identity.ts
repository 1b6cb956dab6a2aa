import type { ClusterProfileRef, KnativeKind } from "../api/knative.ts";
import { isRecord, type KubeObject, nameOf } from "../kube/object.ts";

// What names one object of the fleet on the hub, and the cluster it installs on, in one home (as cli-utils
// keeps ObjMetadata with its String beside it): the types, the one spelling people and maps read, and how
// each is read off an object. Nothing parses a spelling back: whoever needs the parts keeps the identity.

/** What makes an object of the fleet unique on the hub: a CR, or a placement. */
export interface ObjectIdentity {
  kind: string;
  namespace: string;
  name: string;
}

/** A KnativeServing or KnativeEventing on the hub. */
export interface ResourceIdentity extends ObjectIdentity {
  kind: KnativeKind;
}

/** `KnativeServing knative-fleet/spoke-1-serving`: the key of maps and sets, and what messages say. */
export function formatIdentity(identity: ObjectIdentity): string {
  return `${identity.kind} ${identity.namespace}/${identity.name}`;
}

/**
 * The identity of a hub CR (listed from the hub, or a fleet file's CR in hub form): the one place its kind
 * is taken to be a Knative kind. Every caller holds a KnativeServing or KnativeEventing.
 */
export function identityOf(cr: Pick<KubeObject, "kind" | "metadata">): ResourceIdentity {
  return { kind: cr.kind as KnativeKind, namespace: cr.metadata.namespace ?? "", name: nameOf(cr) };
}

/**
 * A ClusterProfile on the hub, by namespace and name: the cluster a CR installs on (spec.clusterProfileRef),
 * a placement or a PlacementDecision chooses, or a rollout wave names. No reference means the hub itself.
 */
export type ClusterRef = ClusterProfileRef;

/**
 * A reference read off an unchecked value (a hub CR's spec.clusterProfileRef before validation, a
 * PlacementDecision's decisions[].clusterProfileRef): namespace and name both non-empty strings, else none.
 * The one rule for a malformed reference (no namespace, an empty or non-string part): it names no cluster,
 * and nothing guesses one (no `/name`). No such CR is valid (the CRD and the fleet-file schema require
 * both), so it fails validation where it is read; until then it counts with the hub (`clusterLabel`), as
 * the controller's shard key always counted a reference without a namespace. `namespace` is what a
 * reference without one means where the API gives it a meaning: a PlacementDecision's own namespace.
 */
export function clusterRefOf(value: unknown, namespace?: string): ClusterRef | undefined {
  if (!isRecord(value) || !isFilled(value.name)) return undefined;
  const inNamespace = isFilled(value.namespace) ? value.namespace : namespace;
  return isFilled(inNamespace) ? { namespace: inNamespace, name: value.name } : undefined;
}

const isFilled = (value: unknown): value is string => typeof value === "string" && value !== "";

/** The cluster a hub CR installs on (its spec.clusterProfileRef, checked); undefined for the hub itself. */
export const targetOf = (cr: KubeObject | undefined): ClusterRef | undefined =>
  clusterRefOf(isRecord(cr?.spec) ? cr.spec.clusterProfileRef : undefined);

/** `namespace/name` of the ClusterProfile: the key of maps and sets of clusters, and what messages say. */
export const clusterKey = (ref: ClusterRef): string => `${ref.namespace}/${ref.name}`;

/**
 * The cluster as the shard key, the work queue's per-cluster group and the metric label name it:
 * `namespace/name` of the ClusterProfile, or "hub" for a CR without one.
 */
export const clusterLabel = (ref: ClusterRef | undefined): string => (ref ? clusterKey(ref) : "hub");
