import { z } from "zod";
import {
  AffinitySchema,
  EnvVarSchema,
  IntOrStringSchema,
  LabelSelectorSchema,
  LocalObjectReferenceSchema,
  ObjectMetaSchema,
  ResourceClaimSchema,
  ResourceListSchema,
  StringMapSchema,
  TolerationSchema,
  TopologySpreadConstraintSchema,
  VolumeMountSchema,
} from "./kubernetes.ts";

// KnativeServing and KnativeEventing (operator.knative.dev/v1beta1), field for field the JSON of the upstream
// Knative Operator's Go types (pkg/apis/operator/base, pkg/apis/operator/v1beta1), so a CR written for the
// upstream operator is valid here and the other way round. Our own objects are strict: an unknown field is a
// typo to report, not something to prune silently. Field names with dashes are upstream's, not ours.

export const OPERATOR_GROUP = "operator.knative.dev";
export const OPERATOR_VERSION = "v1beta1";
export const OPERATOR_API_VERSION = `${OPERATOR_GROUP}/${OPERATOR_VERSION}` as const;
export const KNATIVE_KINDS = ["KnativeServing", "KnativeEventing"] as const;
export type KnativeKind = (typeof KNATIVE_KINDS)[number];

const ManifestSchema = z.strictObject({ URL: z.string().describe("The URL of a manifest file.") });

const IMAGE_TEMPLATE_HELP =
  // biome-ignore lint/suspicious/noTemplateCurlyInString: ${NAME} is the operator's placeholder, written literally.
  "Template for every Knative image, e.g. registry.example.com/knative/${NAME}:v1.22 (${NAME}: container or Image name).";

const RegistrySchema = z
  .strictObject({
    default: z.string().optional().describe(IMAGE_TEMPLATE_HELP),
    override: StringMapSchema.optional().describe("Full image reference per container or Image name."),
    imagePullSecrets: z
      .array(LocalObjectReferenceSchema)
      .optional()
      .describe("Secrets, in the installation namespace, to pull the images with."),
  })
  .describe("Where the Knative images are pulled from; the release images when unset.");

// Per-container overrides: the upstream types embed core/v1 structs next to the container name.
const ResourceRequirementsOverrideSchema = z.strictObject({
  container: z.string(),
  limits: ResourceListSchema.optional(),
  requests: ResourceListSchema.optional(),
  claims: z.array(ResourceClaimSchema).optional(),
});

const EnvRequirementsOverrideSchema = z.strictObject({
  container: z.string(),
  envVars: z.array(EnvVarSchema).optional(),
});

const ProbesRequirementsOverrideSchema = z.strictObject({
  container: z.string(),
  initialDelaySeconds: z.int32().optional(),
  timeoutSeconds: z.int32().optional(),
  periodSeconds: z.int32().optional(),
  successThreshold: z.int32().optional(),
  failureThreshold: z.int32().optional(),
  terminationGracePeriodSeconds: z.int().optional(),
});

const WorkloadOverrideSchema = z
  .strictObject({
    name: z.string().describe("The Deployment or StatefulSet to override."),
    labels: StringMapSchema.optional(),
    annotations: StringMapSchema.optional(),
    replicas: z.int32().optional(),
    nodeSelector: StringMapSchema.optional(),
    tolerations: z.array(TolerationSchema).optional(),
    affinity: AffinitySchema.optional(),
    topologySpreadConstraints: z.array(TopologySpreadConstraintSchema).optional(),
    hostNetwork: z
      .boolean()
      .optional()
      .describe("Run the pods in the host network; dnsPolicy becomes ClusterFirstWithHostNet."),
    resources: z.array(ResourceRequirementsOverrideSchema).optional(),
    env: z.array(EnvRequirementsOverrideSchema).optional(),
    readinessProbes: z.array(ProbesRequirementsOverrideSchema).optional(),
    livenessProbes: z.array(ProbesRequirementsOverrideSchema).optional(),
    version: z.string().optional().describe("Deprecated: accepted for compatibility, has no effect."),
    volumeMounts: z
      .array(VolumeMountSchema)
      .optional()
      .describe("Deprecated: accepted for compatibility, has no effect."),
  })
  .describe("Overrides for one Knative workload.");

const ServiceOverrideSchema = z.strictObject({
  name: z.string().describe("The Service to override."),
  labels: StringMapSchema.optional(),
  annotations: StringMapSchema.optional(),
  selector: StringMapSchema.optional(),
});

const PodDisruptionBudgetOverrideSchema = z.strictObject({
  name: z.string().describe("The PodDisruptionBudget to override."),
  minAvailable: IntOrStringSchema.optional(),
  maxUnavailable: IntOrStringSchema.optional(),
  selector: LabelSelectorSchema.optional(),
  unhealthyPodEvictionPolicy: z.string().optional(),
});

export const ClusterProfileRefSchema = z
  .strictObject({
    name: z.string().min(1).describe("Name of the ClusterProfile."),
    namespace: z.string().min(1).describe("Namespace of the ClusterProfile."),
  })
  .describe(
    "The ClusterProfile (multicluster.x-k8s.io) of the cluster to install on; the hub itself when unset. " +
      "Cannot be added, removed or changed after creation.",
  );

const commonSpecShape = {
  version: z
    .string()
    .optional()
    .describe("The Knative version to install: 1.22.1, 1.22 (newest patch) or latest/empty (newest)."),
  config: z
    .record(z.string(), StringMapSchema)
    .optional()
    .describe(
      "Entries for the Knative ConfigMaps, keyed by ConfigMap name (the config- prefix is optional).",
    ),
  registry: RegistrySchema.optional(),
  workloads: z.array(WorkloadOverrideSchema).optional().describe("Overrides for the Knative workloads."),
  deployments: z.array(WorkloadOverrideSchema).optional().describe("Deprecated: use workloads."),
  resources: z
    .array(ResourceRequirementsOverrideSchema)
    .optional()
    .describe("Deprecated: use workloads[].resources."),
  services: z.array(ServiceOverrideSchema).optional().describe("Overrides for the Knative Services."),
  podDisruptionBudgets: z
    .array(PodDisruptionBudgetOverrideSchema)
    .optional()
    .describe("Overrides for the Knative PodDisruptionBudgets."),
  "high-availability": z
    .strictObject({ replicas: z.int32() })
    .optional()
    .describe("Replicas for the control-plane workloads that support high availability."),
  manifests: z
    .array(ManifestSchema)
    .optional()
    .describe("Manifests to install instead of the bundled release."),
  additionalManifests: z
    .array(ManifestSchema)
    .optional()
    .describe("Manifests to install in addition to the release."),
  namespace: z
    .strictObject({ labels: StringMapSchema.optional(), annotations: StringMapSchema.optional() })
    .optional()
    .describe("Labels and annotations for the installation namespace."),
  clusterProfileRef: ClusterProfileRefSchema.optional(),
};

const CommonSpecSchema = z.strictObject(commonSpecShape);

// The same rules as the upstream CRD: a CR never moves between clusters, because nothing would uninstall
// Knative from the cluster it leaves. The API server enforces them; fleet-file parsing cannot (no old object).
const clusterProfileRefImmutable = {
  "x-kubernetes-validations": [
    {
      rule: "has(self.clusterProfileRef) == has(oldSelf.clusterProfileRef)",
      message: "spec.clusterProfileRef cannot be added or removed after creation",
    },
    {
      rule: "!has(self.clusterProfileRef) || !has(oldSelf.clusterProfileRef) || self.clusterProfileRef == oldSelf.clusterProfileRef",
      message: "spec.clusterProfileRef is immutable",
    },
  ],
};

const EnabledSchema = z.strictObject({ enabled: z.boolean() });

/** The event sources the upstream operator installs, each `{enabled}`. */
export const EVENT_SOURCES = ["ceph", "github", "gitlab", "kafka", "rabbitmq", "redis"] as const;
type EventSourceShape = Record<(typeof EVENT_SOURCES)[number], typeof EnabledSchema>;

/**
 * A spec's `source` in the complete form the upstream CRD requires once it is present (every source named):
 * the sources a fleet file leaves out are disabled. The Knative docs install one source at a time.
 */
export function withEveryEventSource<T extends Record<string, unknown>>(spec: T): T {
  const given = spec.source;
  if (given === undefined || given === null || typeof given !== "object") return spec;
  const listed = given as Record<string, unknown>;
  const source = Object.fromEntries(EVENT_SOURCES.map((name) => [name, listed[name] ?? { enabled: false }]));
  return { ...spec, source: { ...listed, ...source } };
}
const OptionallyEnabledSchema = z.strictObject({ enabled: z.boolean().optional() });

const IstioServerSchema = z.strictObject({
  name: z.string().optional(),
  bind: z.string().optional(),
  defaultEndpoint: z.string().optional(),
  hosts: z.array(z.string()).optional(),
  port: z
    .strictObject({
      name: z.string().optional(),
      number: z.int32().optional(),
      protocol: z.string().optional(),
      target_port: z.int32().optional(),
    })
    .optional(),
  tls: z
    .strictObject({
      mode: z.enum(["PASSTHROUGH", "SIMPLE", "MUTUAL", "AUTO_PASSTHROUGH", "ISTIO_MUTUAL"]).optional(),
      httpsRedirect: z.boolean().optional(),
      credentialName: z.string().optional(),
      serverCertificate: z.string().optional(),
      privateKey: z.string().optional(),
      caCertificates: z.string().optional(),
      subjectAltNames: z.array(z.string()).optional(),
      verifyCertificateSpki: z.array(z.string()).optional(),
      verifyCertificateHash: z.array(z.string()).optional(),
      minProtocolVersion: z.int32().optional(),
      maxProtocolVersion: z.int32().optional(),
      cipherSuites: z.array(z.string()).optional(),
    })
    .optional(),
});

const IstioGatewayOverrideSchema = z.strictObject({
  selector: StringMapSchema.optional().describe("Replaces the Gateway's pod selector."),
  servers: z.array(IstioServerSchema).optional().describe("Servers for the Istio Gateway."),
});

const IngressSchema = z
  .strictObject({
    istio: z
      .strictObject({
        enabled: z.boolean().optional(),
        "knative-ingress-gateway": IstioGatewayOverrideSchema.optional(),
        "knative-local-gateway": IstioGatewayOverrideSchema.optional(),
      })
      .optional(),
    kourier: z
      .strictObject({
        enabled: z.boolean().optional(),
        "service-type": z.string().optional().describe("Service type of the Kourier gateway."),
        "service-load-balancer-ip": z.string().optional(),
        "http-port": z.int32().optional().describe("HTTP node port when service-type is NodePort."),
        "https-port": z.int32().optional().describe("HTTPS node port when service-type is NodePort."),
        "bootstrap-configmap": z.string().optional().describe("ConfigMap with the Envoy bootstrap."),
      })
      .optional(),
    contour: OptionallyEnabledSchema.optional(),
    "gateway-api": OptionallyEnabledSchema.optional(),
  })
  .describe("The networking layers to install.");

export const KnativeServingSpecSchema = CommonSpecSchema.extend({
  ingress: IngressSchema.optional(),
  "controller-custom-certs": z
    .strictObject({
      type: z.string().describe("ConfigMap or Secret."),
      name: z.string().describe("Name of the ConfigMap or Secret."),
    })
    .optional()
    .describe("CA certificates the controller trusts when it pulls images from registries."),
  security: z
    .strictObject({ securityGuard: EnabledSchema })
    .optional()
    .describe("Security add-ons to install."),
})
  .meta(clusterProfileRefImmutable)
  .describe("The desired state of Knative Serving.");

export const KnativeEventingSpecSchema = CommonSpecSchema.extend({
  defaultBrokerClass: z
    .string()
    .optional()
    .describe("The Broker class Knative uses by default; MTChannelBasedBroker when unset."),
  sinkBindingSelectionMode: z
    .string()
    .optional()
    .describe(
      "inclusion or exclusion (default): which namespaces and objects the SinkBinding webhook handles.",
    ),
  // Upstream requires every source once `source` is present: the Go fields have no omitempty.
  source: z
    .strictObject(Object.fromEntries(EVENT_SOURCES.map((name) => [name, EnabledSchema])) as EventSourceShape)
    .optional()
    .describe("The event sources to install."),
})
  .meta(clusterProfileRefImmutable)
  .describe("The desired state of Knative Eventing.");

/** A knative.dev/pkg apis.Condition. */
const ConditionSchema = z.strictObject({
  type: z.string(),
  status: z.enum(["True", "False", "Unknown"]),
  severity: z.string().optional().describe("Empty for errors, Warning or Info."),
  lastTransitionTime: z.string().optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
});

export const KnativeStatusSchema = z
  .strictObject({
    observedGeneration: z.int().optional(),
    conditions: z.array(ConditionSchema).optional(),
    annotations: StringMapSchema.optional(),
    version: z.string().optional().describe("The installed Knative version."),
    manifests: z.array(z.string()).optional().describe("The URLs of the installed manifests."),
  })
  .describe("The observed state.");

export const KnativeServingSchema = z.strictObject({
  apiVersion: z.literal(OPERATOR_API_VERSION),
  kind: z.literal("KnativeServing"),
  metadata: ObjectMetaSchema,
  spec: KnativeServingSpecSchema.default({}),
  status: KnativeStatusSchema.optional(),
});

export const KnativeEventingSchema = z.strictObject({
  apiVersion: z.literal(OPERATOR_API_VERSION),
  kind: z.literal("KnativeEventing"),
  metadata: ObjectMetaSchema,
  spec: KnativeEventingSpecSchema.default({}),
  status: KnativeStatusSchema.optional(),
});

export const KnativeResourceSchema = z.discriminatedUnion("kind", [
  KnativeServingSchema,
  KnativeEventingSchema,
]);

export type Registry = z.infer<typeof RegistrySchema>;
export type WorkloadOverride = z.infer<typeof WorkloadOverrideSchema>;
export type ClusterProfileRef = z.infer<typeof ClusterProfileRefSchema>;
export type CommonSpec = z.infer<typeof CommonSpecSchema>;
export type KnativeServingSpec = z.infer<typeof KnativeServingSpecSchema>;
export type KnativeEventingSpec = z.infer<typeof KnativeEventingSpecSchema>;
export type Condition = z.infer<typeof ConditionSchema>;
export type KnativeStatus = z.infer<typeof KnativeStatusSchema>;
export type KnativeServing = z.infer<typeof KnativeServingSchema>;
export type KnativeEventing = z.infer<typeof KnativeEventingSchema>;
export type KnativeResource = z.infer<typeof KnativeResourceSchema>;
