import { z } from "zod";
import {
  ClusterProfileRefSchema,
  KnativeEventingSchema,
  KnativeEventingSpecSchema,
  KnativeServingSchema,
  KnativeServingSpecSchema,
} from "../api/knative.ts";
import { StringMapSchema } from "../api/kubernetes.ts";
import { PRUNE_ANNOTATION, PRUNE_DISABLED } from "../api/labels.ts";

// What a fleet file may say, which is stricter than what the API accepts: the API's metadata is loose
// (objects read back carry uid, resourceVersion, ...), but in Git an unknown metadata field is a typo,
// and `metadata.annotation:` silently dropping a prune opt-out is exactly the mistake to catch. Status is
// written by the bot, never by hand.

const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1123_LABEL_MAX_LENGTH = 63;

/** A DNS-1123 label: the strictest Kubernetes name rule, so a name is also valid as a label value. */
const Dns1123LabelSchema = z
  .string()
  .max(DNS_1123_LABEL_MAX_LENGTH, { error: `must be at most ${DNS_1123_LABEL_MAX_LENGTH} characters` })
  .regex(DNS_1123_LABEL, {
    error:
      "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit",
  });

const DNS_1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_1123_SUBDOMAIN_MAX_LENGTH = 253;

/** A DNS-1123 subdomain: what Kubernetes accepts as the name of a ClusterProfile (or most objects). */
const Dns1123SubdomainSchema = z
  .string()
  .max(DNS_1123_SUBDOMAIN_MAX_LENGTH, {
    error: `must be at most ${DNS_1123_SUBDOMAIN_MAX_LENGTH} characters`,
  })
  .regex(DNS_1123_SUBDOMAIN, {
    error:
      "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit",
  });

/**
 * Only names the hub could hold. The CRD itself stays as loose as upstream's (plain strings), so every CR
 * the upstream operator accepts is still accepted on the hub; the fleet file is where pull requests come
 * in, and where a free-text name would reach the plan comment and the status README.
 */
const FleetClusterProfileRefSchema = ClusterProfileRefSchema.extend({
  name: Dns1123SubdomainSchema,
  namespace: Dns1123LabelSchema,
});

const FleetAnnotationsSchema = StringMapSchema.superRefine((annotations, ctx) => {
  const prune = annotations[PRUNE_ANNOTATION];
  if (prune !== undefined && prune !== PRUNE_DISABLED) {
    ctx.addIssue({
      code: "custom",
      path: [PRUNE_ANNOTATION],
      input: prune,
      message: `must be "${PRUNE_DISABLED}"; remove the annotation to allow pruning`,
    });
  }
});

const FleetMetadataSchema = z.strictObject({
  name: Dns1123LabelSchema,
  // Always present by the time the schema runs: parsing fills in the default namespace first.
  namespace: Dns1123LabelSchema,
  labels: StringMapSchema.optional(),
  annotations: FleetAnnotationsSchema.optional(),
});

/** A KnativeServing or KnativeEventing as a fleet file declares it; a subtype of `KnativeResource`. */
export const FleetDocumentSchema = z.discriminatedUnion("kind", [
  KnativeServingSchema.omit({ status: true }).extend({
    metadata: FleetMetadataSchema,
    spec: KnativeServingSpecSchema.extend({ clusterProfileRef: FleetClusterProfileRefSchema.optional() }),
  }),
  KnativeEventingSchema.omit({ status: true }).extend({
    metadata: FleetMetadataSchema,
    spec: KnativeEventingSpecSchema.extend({ clusterProfileRef: FleetClusterProfileRefSchema.optional() }),
  }),
]);

export type FleetResource = z.infer<typeof FleetDocumentSchema>;
