import { z } from "zod";

// The subset of core Kubernetes types (core/v1, meta/v1) that the Knative Operator's override fields embed.
// Each schema mirrors the upstream Go type's JSON shape and is strict, so a misspelt field in a fleet file is
// an error instead of something the API server silently prunes. Integer widths (int32/int64) follow the Go
// types; the CRD generator turns them into `format`.

export const StringMapSchema = z.record(z.string(), z.string());

/** IntOrString: the API server accepts either form (for example `maxUnavailable: 1` or `"25%"`). */
export const IntOrStringSchema = z
  .union([z.int(), z.string()], { error: "expected an integer or a string" })
  .meta({ "x-kubernetes-int-or-string": true });

// resource.Quantity's serialization format, as the upstream CRDs publish it.
const QUANTITY_PATTERN =
  "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$";
const quantityPattern = new RegExp(QUANTITY_PATTERN);

/** resource.Quantity: an integer or a string such as `100m`, `1.5` or `512Mi`. */
const QuantitySchema = IntOrStringSchema.refine(
  (value) => typeof value === "number" || quantityPattern.test(value),
  { error: "expected a Kubernetes quantity such as 100m, 0.5, 512Mi or 2Gi" },
).meta({ pattern: QUANTITY_PATTERN });

export const LocalObjectReferenceSchema = z.strictObject({ name: z.string().optional() });

/** The shape shared by meta/v1 LabelSelectorRequirement and core/v1 NodeSelectorRequirement. */
const SelectorRequirementSchema = z.strictObject({
  key: z.string(),
  operator: z.string(),
  values: z.array(z.string()).optional(),
});

export const LabelSelectorSchema = z.strictObject({
  matchLabels: StringMapSchema.optional(),
  matchExpressions: z.array(SelectorRequirementSchema).optional(),
});

const NodeSelectorTermSchema = z.strictObject({
  matchExpressions: z.array(SelectorRequirementSchema).optional(),
  matchFields: z.array(SelectorRequirementSchema).optional(),
});

const NodeAffinitySchema = z.strictObject({
  requiredDuringSchedulingIgnoredDuringExecution: z
    .strictObject({ nodeSelectorTerms: z.array(NodeSelectorTermSchema) })
    .optional(),
  preferredDuringSchedulingIgnoredDuringExecution: z
    .array(z.strictObject({ weight: z.int32(), preference: NodeSelectorTermSchema }))
    .optional(),
});

const PodAffinityTermSchema = z.strictObject({
  labelSelector: LabelSelectorSchema.optional(),
  namespaceSelector: LabelSelectorSchema.optional(),
  namespaces: z.array(z.string()).optional(),
  topologyKey: z.string(),
  matchLabelKeys: z.array(z.string()).optional(),
  mismatchLabelKeys: z.array(z.string()).optional(),
});

/** core/v1 PodAffinity and PodAntiAffinity have the same shape. */
const PodAffinitySchema = z.strictObject({
  requiredDuringSchedulingIgnoredDuringExecution: z.array(PodAffinityTermSchema).optional(),
  preferredDuringSchedulingIgnoredDuringExecution: z
    .array(z.strictObject({ weight: z.int32(), podAffinityTerm: PodAffinityTermSchema }))
    .optional(),
});

export const AffinitySchema = z.strictObject({
  nodeAffinity: NodeAffinitySchema.optional(),
  podAffinity: PodAffinitySchema.optional(),
  podAntiAffinity: PodAffinitySchema.optional(),
});

export const TolerationSchema = z.strictObject({
  key: z.string().optional(),
  operator: z.string().optional(),
  value: z.string().optional(),
  effect: z.string().optional(),
  tolerationSeconds: z.int().optional(),
});

export const TopologySpreadConstraintSchema = z.strictObject({
  maxSkew: z.int32(),
  topologyKey: z.string(),
  whenUnsatisfiable: z.string(),
  labelSelector: LabelSelectorSchema.optional(),
  minDomains: z.int32().optional(),
  nodeAffinityPolicy: z.string().optional(),
  nodeTaintsPolicy: z.string().optional(),
  matchLabelKeys: z.array(z.string()).optional(),
});

/** core/v1 ConfigMapKeySelector and SecretKeySelector have the same shape. */
const KeySelectorSchema = z.strictObject({
  key: z.string(),
  name: z.string().optional(),
  optional: z.boolean().optional(),
});

export const EnvVarSchema = z.strictObject({
  name: z.string(),
  value: z.string().optional(),
  valueFrom: z
    .strictObject({
      configMapKeyRef: KeySelectorSchema.optional(),
      secretKeyRef: KeySelectorSchema.optional(),
      fieldRef: z.strictObject({ apiVersion: z.string().optional(), fieldPath: z.string() }).optional(),
      resourceFieldRef: z
        .strictObject({
          containerName: z.string().optional(),
          resource: z.string(),
          divisor: QuantitySchema.optional(),
        })
        .optional(),
      fileKeyRef: z
        .strictObject({
          volumeName: z.string(),
          path: z.string(),
          key: z.string(),
          optional: z.boolean().optional(),
        })
        .optional(),
    })
    .optional(),
});

export const ResourceListSchema = z.record(z.string(), QuantitySchema);

export const ResourceClaimSchema = z.strictObject({ name: z.string(), request: z.string().optional() });

export const VolumeMountSchema = z.strictObject({
  name: z.string(),
  mountPath: z.string(),
  readOnly: z.boolean().optional(),
  recursiveReadOnly: z.string().optional(),
  mountPropagation: z.string().optional(),
  subPath: z.string().optional(),
  subPathExpr: z.string().optional(),
});

/**
 * The object metadata a CR carries. Loose because objects read back from the API server carry
 * server-populated fields (uid, resourceVersion, managedFields, ...).
 */
export const ObjectMetaSchema = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().min(1).optional(),
  labels: StringMapSchema.optional(),
  annotations: StringMapSchema.optional(),
  generation: z.int().optional(),
});

export type LabelSelector = z.infer<typeof LabelSelectorSchema>;
export type EnvVar = z.infer<typeof EnvVarSchema>;
export type ObjectMeta = z.infer<typeof ObjectMetaSchema>;
