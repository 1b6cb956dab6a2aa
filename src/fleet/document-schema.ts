import { z } from "zod";
import { DriftModeSchema } from "../api/drift.ts";
import {
  ClusterProfileRefSchema,
  EVENT_SOURCES,
  KnativeEventingSchema,
  type KnativeEventingSpec,
  KnativeEventingSpecSchema,
  KnativeServingSchema,
  KnativeServingSpecSchema,
  withEveryEventSource,
} from "../api/knative.ts";
import {
  ABANDON_CLEANUP_ANNOTATION,
  DRIFT_MODE_ANNOTATION,
  PRUNE_ANNOTATION,
  PRUNE_DISABLED,
} from "../api/labels.ts";

// What a fleet file may say, which is stricter than what the API accepts: the API's metadata is loose
// (objects read back carry uid, resourceVersion, ...), but in Git an unknown metadata field is a typo,
// and `metadata.annotation:` silently dropping a prune opt-out is exactly the mistake to catch. Status is
// written by the bot, never by hand. Every document kind (a CR, a placement and the CRs it expands into, a
// rollout policy) takes its names and metadata from here, so one rule holds for all of them; and what the
// hub's API server or the mirror would refuse at sync time is refused here, at the file and line, where
// it blocks nothing but that file.

const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1123_LABEL_MAX_LENGTH = 63;

/** A DNS-1123 label: the strictest Kubernetes name rule, so a name is also valid as a label value. */
export const Dns1123LabelSchema = z
  .string()
  .max(DNS_1123_LABEL_MAX_LENGTH, { error: `must be at most ${DNS_1123_LABEL_MAX_LENGTH} characters` })
  .regex(DNS_1123_LABEL, {
    error:
      "must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit",
  });

const DNS_1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_1123_SUBDOMAIN_MAX_LENGTH = 253;

/** A DNS-1123 subdomain: what Kubernetes accepts as the name of a ClusterProfile (or most objects). */
export const Dns1123SubdomainSchema = z
  .string()
  .max(DNS_1123_SUBDOMAIN_MAX_LENGTH, {
    error: `must be at most ${DNS_1123_SUBDOMAIN_MAX_LENGTH} characters`,
  })
  .regex(DNS_1123_SUBDOMAIN, {
    error:
      "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit",
  });

/**
 * A ClusterProfile named by a fleet document (a CR's clusterProfileRef, a placement's list, an override's,
 * a rollout wave's): only names the hub could hold. The CRD itself stays as loose as upstream's (plain
 * strings), so every CR the upstream operator accepts is still accepted on the hub; the fleet file is where
 * pull requests come in, and where a free-text name would reach the plan comment and the status README.
 */
export const ClusterRefSchema = z.strictObject({
  namespace: Dns1123LabelSchema,
  name: Dns1123SubdomainSchema,
});

const FleetClusterProfileRefSchema = ClusterProfileRefSchema.extend(ClusterRefSchema.shape);

// A label or annotation key (a qualified name): an optional DNS-subdomain prefix and '/', then a name.
const QUALIFIED_NAME = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Why `key` is no label or annotation key the API server accepts; undefined when it is one. */
function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf("/");
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS_1123_SUBDOMAIN.test(prefix))) {
    return `label key prefix "${prefix}" must be a DNS-1123 subdomain of at most 253 characters`;
  }
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME.test(name)) {
    return `label key name "${name}" must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`;
  }
  return undefined;
}

export const LabelKeySchema = z.string().superRefine((key, ctx) => {
  const problem = labelKeyProblem(key);
  if (problem) ctx.addIssue({ code: "custom", input: key, message: problem });
});

export const LabelValueSchema = z
  .string()
  .max(63, { error: "a label value is at most 63 characters" })
  .regex(LABEL_VALUE, {
    error:
      "a label value is empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
  });

const LabelsSchema = z.record(LabelKeySchema, LabelValueSchema);

/**
 * The API server's limit on all of an object's annotations (keys and values), less room for the ones the
 * mirror adds (source repository, path, commit, hash, cluster).
 */
const MAX_ANNOTATIONS_BYTES = 256 * 1024 - 8 * 1024;

const FleetAnnotationsSchema = z.record(LabelKeySchema, z.string()).superRefine((annotations, ctx) => {
  const prune = annotations[PRUNE_ANNOTATION];
  if (prune !== undefined && prune !== PRUNE_DISABLED) {
    ctx.addIssue({
      code: "custom",
      path: [PRUNE_ANNOTATION],
      input: prune,
      message: `must be "${PRUNE_DISABLED}"; remove the annotation to allow pruning`,
    });
  }
  const drift = annotations[DRIFT_MODE_ANNOTATION];
  if (drift !== undefined && !DriftModeSchema.safeParse(drift).success) {
    ctx.addIssue({
      code: "custom",
      path: [DRIFT_MODE_ANNOTATION],
      input: drift,
      message: `must be ${DriftModeSchema.options.map((o) => `"${o}"`).join(" or ")}: "report" leaves changes made on the cluster in place and reports them, "correct" (the default) puts back what Git wants`,
    });
  }
  // The mirror refuses such a CR at every sync, which would block every prune of the fleet.
  if (Object.hasOwn(annotations, ABANDON_CLEANUP_ANNOTATION)) {
    ctx.addIssue({
      code: "custom",
      path: [ABANDON_CLEANUP_ANNOTATION],
      input: annotations[ABANDON_CLEANUP_ANNOTATION],
      message:
        "cannot come from a fleet file (a push could make a removal leave the cluster as it is); a hub operator sets it on the hub CR",
    });
  }
  const bytes = Object.entries(annotations).reduce(
    (sum, [key, value]) => sum + Buffer.byteLength(key) + Buffer.byteLength(value),
    0,
  );
  if (bytes > MAX_ANNOTATIONS_BYTES) {
    ctx.addIssue({
      code: "custom",
      input: annotations,
      message: `the annotations take ${bytes} bytes; at most ${MAX_ANNOTATIONS_BYTES} fit beside the ones knative-fleet adds`,
    });
  }
});

/** The metadata of every fleet document: a CR's, a placement's (copied onto its CRs), a rollout policy's. */
export const FleetMetadataSchema = z.strictObject({
  name: Dns1123LabelSchema,
  // Always present by the time the schema runs: parsing fills in the default namespace first.
  namespace: Dns1123LabelSchema,
  labels: LabelsSchema.optional(),
  annotations: FleetAnnotationsSchema.optional(),
});

/**
 * `spec.source` as a fleet file may write it: only the sources it wants (as the Knative docs do). The hub CR
 * gets the complete form upstream requires, the others disabled (`withEveryEventSource`).
 */
export const FleetEventSourcesSchema = z
  .strictObject(
    Object.fromEntries(
      EVENT_SOURCES.map((name) => [name, z.strictObject({ enabled: z.boolean() }).optional()]),
    ) as Record<(typeof EVENT_SOURCES)[number], z.ZodOptional<z.ZodObject<{ enabled: z.ZodBoolean }>>>,
  )
  .optional()
  .describe("The event sources to install; those left out are disabled.");

/** A KnativeServing or KnativeEventing as a fleet file declares it; a subtype of `KnativeResource`. */
export const FleetDocumentSchema = z.discriminatedUnion("kind", [
  KnativeServingSchema.omit({ status: true }).extend({
    metadata: FleetMetadataSchema,
    // No spec is an empty one, as upstream's CRD has it (the docs' first example has none).
    spec: KnativeServingSpecSchema.extend({
      clusterProfileRef: FleetClusterProfileRefSchema.optional(),
    }).default({}),
  }),
  KnativeEventingSchema.omit({ status: true }).extend({
    metadata: FleetMetadataSchema,
    spec: KnativeEventingSpecSchema.extend({
      clusterProfileRef: FleetClusterProfileRefSchema.optional(),
      source: FleetEventSourcesSchema,
    })
      .transform((spec) => withEveryEventSource(spec) as KnativeEventingSpec)
      .default({}),
  }),
]);

export type FleetResource = z.infer<typeof FleetDocumentSchema>;
