import { z } from "zod";
import { KnativeEventingSpecSchema, type KnativeKind, KnativeServingSpecSchema } from "../api/knative.ts";
import {
  ClusterRefSchema,
  Dns1123LabelSchema,
  Dns1123SubdomainSchema,
  FleetEventSourcesSchema,
  FleetMetadataSchema,
  LabelKeySchema,
  LabelValueSchema,
} from "./document-schema.ts";

// The placement file format: one template of a KnativeServing or KnativeEventing spec, the clusters it goes
// to (ClusterProfile labels, status.properties, an explicit list, a PlacementDecision), and merge-patch
// overrides. It is expanded into ordinary upstream CRs (expand.ts); the hub never stores a placement.

export const PLACEMENT_API_VERSION = "fleet.knative.dev/v1alpha1";

/** Each placement kind and the CR kind it expands into. */
export const PLACEMENT_KINDS = {
  KnativeServingPlacement: "KnativeServing",
  KnativeEventingPlacement: "KnativeEventing",
} as const satisfies Record<string, KnativeKind>;
export type PlacementKind = keyof typeof PLACEMENT_KINDS;

// Bounds that keep one file's expansion cheap whatever it says (selection is terms x expressions x clusters).
export const MAX_TERMS = 32;
export const MAX_EXPRESSIONS = 64;
export const MAX_VALUES = 256;
export const MAX_LISTED_CLUSTERS = 1000;
const MAX_OVERRIDES = 100;

const SET_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;
/** Numeric comparisons for properties such as a node count; the value must be a decimal number. */
const NUMERIC_OPERATORS = ["Gt", "Lt"] as const;

/** Checks the values count each operator takes, as apimachinery's label selector validation does. */
function checkValuesForOperator(
  requirement: { operator: string; values?: readonly string[] | undefined },
  ctx: z.RefinementCtx,
): void {
  const count = requirement.values?.length ?? 0;
  const problem =
    (requirement.operator === "In" || requirement.operator === "NotIn") && count === 0
      ? `operator ${requirement.operator} needs at least one value`
      : (requirement.operator === "Exists" || requirement.operator === "DoesNotExist") && count > 0
        ? `operator ${requirement.operator} takes no values`
        : (requirement.operator === "Gt" || requirement.operator === "Lt") &&
            (count !== 1 || !isDecimal(requirement.values![0]!))
          ? `operator ${requirement.operator} needs exactly one value, a decimal number`
          : undefined;
  if (problem)
    ctx.addIssue({ code: "custom", path: ["values"], input: requirement.values, message: problem });
}

const DECIMAL = /^-?(\d+(\.\d*)?|\.\d+)$/;
export const isDecimal = (text: string): boolean => DECIMAL.test(text.trim()) && text.trim().length <= 40;

const LabelRequirementSchema = z
  .strictObject({
    key: LabelKeySchema,
    operator: z.enum(SET_OPERATORS, {
      error: `must be one of ${SET_OPERATORS.join(", ")}`,
    }),
    values: z.array(LabelValueSchema).max(MAX_VALUES).optional(),
  })
  .superRefine(checkValuesForOperator);

export const LabelSelectorSchema = z
  .strictObject({
    matchLabels: z
      .record(LabelKeySchema, LabelValueSchema)
      .refine((labels) => Object.keys(labels).length <= MAX_EXPRESSIONS, {
        error: `at most ${MAX_EXPRESSIONS} labels`,
      })
      .optional(),
    matchExpressions: z.array(LabelRequirementSchema).max(MAX_EXPRESSIONS).optional(),
  })
  .describe("A label query over ClusterProfile labels; an empty selector matches every cluster.");

const PropertyRequirementSchema = z
  .strictObject({
    name: z.string().min(1).max(316).describe("The name of a ClusterProfile status.properties entry."),
    operator: z.enum([...SET_OPERATORS, ...NUMERIC_OPERATORS], {
      error: `must be one of ${[...SET_OPERATORS, ...NUMERIC_OPERATORS].join(", ")}`,
    }),
    values: z.array(z.string().max(1024)).max(MAX_VALUES).optional(),
  })
  .superRefine(checkValuesForOperator);

const PropertySelectorSchema = z
  .strictObject({
    matchExpressions: z.array(PropertyRequirementSchema).min(1).max(MAX_EXPRESSIONS),
  })
  .describe("Requirements on ClusterProfile status.properties (KEP-4322), ANDed.");

/** One term: the label and the property selector must both match (KubeFleet's ClusterSelectorTerm). */
export const ClusterSelectorTermSchema = z
  .strictObject({
    labelSelector: LabelSelectorSchema.optional(),
    propertySelector: PropertySelectorSchema.optional(),
  })
  .refine((term) => term.labelSelector !== undefined || term.propertySelector !== undefined, {
    error: "a term needs a labelSelector or a propertySelector; labelSelector: {} selects every cluster",
  });

const PlacementDecisionRefSchema = z
  .strictObject({
    namespace: Dns1123LabelSchema,
    name: Dns1123SubdomainSchema.optional(),
    decisionKey: LabelValueSchema.min(1).optional(),
  })
  .refine((ref) => (ref.name === undefined) !== (ref.decisionKey === undefined), {
    error:
      "name one PlacementDecision (its decision-key siblings come along) or give a decisionKey, not both",
  })
  .describe("A SIG Multicluster PlacementDecision: every slice with its multicluster.x-k8s.io/decision-key.");

const OverrideSchema = z
  .strictObject({
    clusters: z.array(ClusterRefSchema).min(1).max(MAX_LISTED_CLUSTERS).optional(),
    clusterSelector: ClusterSelectorTermSchema.optional(),
    patch: z
      .record(z.string(), z.unknown())
      .describe("A JSON merge patch (RFC 7386) on template.spec; null deletes a field."),
  })
  .refine((override) => (override.clusters === undefined) !== (override.clusterSelector === undefined), {
    error: "an override applies to clusters (a list) or to a clusterSelector (one term), exactly one of them",
  });

/** An Eventing template's spec: only the event sources it wants, as a fleet file's CR (the rest disabled). */
const EventingTemplateSpecSchema = KnativeEventingSpecSchema.extend({ source: FleetEventSourcesSchema });

function placementSchema<K extends PlacementKind, S extends z.ZodObject>(kind: K, specSchema: S) {
  return z.strictObject({
    apiVersion: z.literal(PLACEMENT_API_VERSION),
    kind: z.literal(kind),
    metadata: FleetMetadataSchema,
    spec: z
      .strictObject({
        clusterSelectorTerms: z.array(ClusterSelectorTermSchema).min(1).max(MAX_TERMS).optional(),
        clusterProfiles: z.array(ClusterRefSchema).min(1).max(MAX_LISTED_CLUSTERS).optional(),
        placementDecisionRef: PlacementDecisionRefSchema.optional(),
        // The spec of a fleet file's CR, without clusterProfileRef: the placement chooses the clusters.
        template: z.strictObject({ spec: specSchema.omit({ clusterProfileRef: true }).default({}) }),
        overrides: z.array(OverrideSchema).max(MAX_OVERRIDES).optional(),
      })
      .refine(
        (spec) =>
          spec.clusterSelectorTerms !== undefined ||
          spec.clusterProfiles !== undefined ||
          spec.placementDecisionRef !== undefined,
        {
          error:
            "a placement needs at least one of clusterSelectorTerms, clusterProfiles, placementDecisionRef",
        },
      ),
  });
}

export const PlacementDocumentSchema = z.discriminatedUnion("kind", [
  placementSchema("KnativeServingPlacement", KnativeServingSpecSchema),
  placementSchema("KnativeEventingPlacement", EventingTemplateSpecSchema),
]);

export type PlacementDocument = z.infer<typeof PlacementDocumentSchema>;
export type ClusterSelectorTerm = z.infer<typeof ClusterSelectorTermSchema>;
export type LabelSelector = z.infer<typeof LabelSelectorSchema>;
export type PropertySelector = z.infer<typeof PropertySelectorSchema>;

/** The spec schema a placement's CRs are validated with once the overrides are merged in. */
export const TEMPLATE_SPEC_SCHEMAS = {
  KnativeServingPlacement: KnativeServingSpecSchema.omit({ clusterProfileRef: true }),
  KnativeEventingPlacement: EventingTemplateSpecSchema.omit({ clusterProfileRef: true }),
} as const;

export function isPlacementKind(kind: unknown): kind is PlacementKind {
  return typeof kind === "string" && Object.hasOwn(PLACEMENT_KINDS, kind);
}
