import type { KnativeKind } from "../api/knative.ts";
import { type KubeObject, nameOf } from "../kube/object.ts";

// What names one object of the fleet on the hub, in one home (as cli-utils keeps ObjMetadata with its String
// beside it): the type, the one spelling people and maps read, and how it is read off an object. Nothing
// parses the spelling back: whoever needs the parts keeps the identity.

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
