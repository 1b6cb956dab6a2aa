import { z } from "zod";
import { ObjectMetaSchema } from "./kubernetes.ts";

// ClusterProfile (multicluster.x-k8s.io v1alpha1 and v1alpha2) from the Cluster Inventory API: how the hub
// learns about a cluster and how to reach it. We only read these objects, which a cluster manager writes, so
// the schemas are loose: a newer Cluster Inventory API with more fields must not make a profile unreadable.
// v1alpha2 (cluster-inventory-api PR #65) dropped the deprecated status.credentialProviders, gave the
// connection its own Cluster type (the same fields: server, tls-server-name, insecure-skip-tls-verify,
// certificate-authority-data, proxy-url, disable-compression, extensions) with CEL checks on server and
// proxy-url, and caps accessProviders at 64; both read with the same meaning.

export const CLUSTER_PROFILE_GROUP = "multicluster.x-k8s.io";
/** The versions this reader understands, newest first. */
export const CLUSTER_PROFILE_VERSIONS = ["v1alpha2", "v1alpha1"] as const;
export type ClusterProfileVersion = (typeof CLUSTER_PROFILE_VERSIONS)[number];

/** The condition a cluster manager sets True while the cluster's control plane is healthy. */
export const CONTROL_PLANE_HEALTHY = "ControlPlaneHealthy";

/** A clientcmd Cluster (kubeconfig `clusters[].cluster`), as the Cluster Inventory API embeds it. */
const ClusterConnectionSchema = z.looseObject({
  server: z.string(),
  "certificate-authority": z.string().optional(),
  "certificate-authority-data": z.string().optional().describe("Base64 of the PEM CA certificates."),
  "tls-server-name": z.string().optional(),
  "insecure-skip-tls-verify": z.boolean().optional(),
  "proxy-url": z.string().optional(),
  "disable-compression": z.boolean().optional(),
  extensions: z
    .array(z.looseObject({ name: z.string(), extension: z.unknown() }))
    .optional()
    .describe("Provider-specific data for the credential plugin, such as the cluster name it knows."),
});

const AccessProviderSchema = z.looseObject({
  name: z.string().describe("The access provider, matched against the provider configuration by name."),
  cluster: ClusterConnectionSchema.optional(),
});

/** A meta/v1 Condition. */
const ClusterProfileConditionSchema = z.looseObject({
  type: z.string(),
  status: z.enum(["True", "False", "Unknown"]),
  observedGeneration: z.int().optional(),
  lastTransitionTime: z.string(),
  reason: z.string(),
  message: z.string(),
});

export const ClusterProfileSchema = z.looseObject({
  apiVersion: z.enum(CLUSTER_PROFILE_VERSIONS.map((v) => `${CLUSTER_PROFILE_GROUP}/${v}` as const)),
  kind: z.literal("ClusterProfile"),
  metadata: ObjectMetaSchema,
  spec: z.looseObject({
    displayName: z.string().optional(),
    clusterManager: z.looseObject({ name: z.string() }),
  }),
  status: z
    .looseObject({
      version: z.looseObject({ kubernetes: z.string().optional() }).optional(),
      properties: z
        .array(
          z.looseObject({ name: z.string(), value: z.string(), lastObservedTime: z.string().optional() }),
        )
        .optional(),
      conditions: z.array(ClusterProfileConditionSchema).optional(),
      accessProviders: z.array(AccessProviderSchema).optional(),
      credentialProviders: z
        .array(AccessProviderSchema)
        .optional()
        .describe("v1alpha1 only, deprecated: accessProviders."),
    })
    .optional(),
});

export type ClusterConnection = z.infer<typeof ClusterConnectionSchema>;
export type AccessProvider = z.infer<typeof AccessProviderSchema>;
export type ClusterProfile = z.infer<typeof ClusterProfileSchema>;

/**
 * The access providers a profile offers: status.accessProviders plus those of the deprecated
 * status.credentialProviders whose name accessProviders does not already use (the API's precedence rule).
 */
export function accessProvidersOf(profile: ClusterProfile): AccessProvider[] {
  const current = profile.status?.accessProviders ?? [];
  const names = new Set(current.map((provider) => provider.name));
  const deprecated = (profile.status?.credentialProviders ?? []).filter(
    (provider) => !names.has(provider.name),
  );
  return [...current, ...deprecated];
}
