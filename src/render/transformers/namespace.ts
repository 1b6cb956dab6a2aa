import type { CommonSpec } from "../../api/knative.ts";
import {
  arrayOf,
  field,
  isRecord,
  type Manifest,
  mergeStringMaps,
  type Transformer,
  unchanged,
  updateWhere,
} from "../manifest.ts";

// Upstream installs everything into the CR's namespace with manifestival's InjectNamespace: namespaced objects
// move there (the kourier-system objects included), the release's Namespace objects are renamed to it, and
// references to in-namespace Services and ServiceAccounts follow.

// manifestival's list of cluster-scoped kinds (lower case), which decides what gets a namespace.
const CLUSTER_SCOPED_KINDS = new Set([
  "componentstatus",
  "namespace",
  "node",
  "persistentvolume",
  "mutatingwebhookconfiguration",
  "validatingwebhookconfiguration",
  "customresourcedefinition",
  "apiservice",
  "meshpolicy",
  "tokenreview",
  "selfsubjectaccessreview",
  "selfsubjectrulesreview",
  "subjectaccessreview",
  "certificatesigningrequest",
  "podsecuritypolicy",
  "clusterrolebinding",
  "clusterrole",
  "priorityclass",
  "storageclass",
  "volumeattachment",
]);

export function isClusterScoped(kind: string): boolean {
  return CLUSTER_SCOPED_KINDS.has(kind.toLowerCase());
}

/** Puts every namespaced object, and the references to it, into `namespace`. */
export function injectNamespace(namespace: string): Transformer {
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        !isClusterScoped(manifest.kind) ||
        manifest.kind === "Namespace" ||
        namespaceReferences(manifest).length > 0,
      (manifest) => {
        if (!isClusterScoped(manifest.kind)) manifest.metadata.namespace = namespace;
        if (manifest.kind === "Namespace") manifest.metadata.name = namespace;
        for (const reference of namespaceReferences(manifest)) reference.namespace = namespace;
      },
    );
}

/**
 * The objects inside `manifest` that name a namespace manifestival rewrites: binding subjects, and the Service
 * a webhook, APIService or CRD conversion webhook calls. Only those that already carry a namespace field.
 */
function namespaceReferences(manifest: Manifest): Record<string, unknown>[] {
  let candidates: unknown[];
  switch (manifest.kind.toLowerCase()) {
    case "clusterrolebinding":
    case "rolebinding":
      candidates = arrayOf(manifest.subjects);
      break;
    case "validatingwebhookconfiguration":
    case "mutatingwebhookconfiguration":
      candidates = arrayOf(manifest.webhooks).map((webhook) => field(webhook, "clientConfig", "service"));
      break;
    case "apiservice":
      candidates = [field(manifest.spec, "service")];
      break;
    case "customresourcedefinition":
      // apiextensions v1 nests the client config under `webhook`; v1beta1 did not.
      candidates = [
        manifest.apiVersion.endsWith("/v1")
          ? field(manifest.spec, "conversion", "webhook", "clientConfig", "service")
          : field(manifest.spec, "conversion", "webhookClientConfig", "service"),
      ];
      break;
    default:
      return [];
  }
  return candidates.filter(
    (candidate): candidate is Record<string, unknown> => isRecord(candidate) && "namespace" in candidate,
  );
}

/** Adds spec.namespace's labels and annotations to the installation Namespace. */
export function configureNamespace(configuration: CommonSpec["namespace"]): Transformer {
  if (!configuration) return unchanged;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.kind === "Namespace",
      ({ metadata }) => {
        const labels = mergeStringMaps(metadata.labels, configuration.labels);
        const annotations = mergeStringMaps(metadata.annotations, configuration.annotations);
        if (labels) metadata.labels = labels;
        if (annotations) metadata.annotations = annotations;
      },
    );
}
