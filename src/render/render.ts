import type { KnativeEventing, KnativeResource, KnativeServing } from "../api/knative.ts";
import { objectKey } from "../kube/object.ts";
import { type Manifest, RenderError, type Transformer } from "./manifest.ts";
import { COMPONENT_OF_KIND, type Release } from "./release.ts";
import { applyConfig } from "./transformers/config.ts";
import { configureControllerCustomCerts } from "./transformers/custom-certs.ts";
import {
  dropUnusedTlsCertificates,
  setDefaultBrokerClass,
  setSinkBindingSelectionMode,
} from "./transformers/eventing.ts";
import { applyHighAvailability } from "./transformers/high-availability.ts";
import {
  configureIstioGateways,
  configureKourier,
  placeIstioGatewayServices,
} from "./transformers/ingress.ts";
import { nameJobs } from "./transformers/jobs.ts";
import { labelComponentName } from "./transformers/labels.ts";
import { configureNamespace, injectNamespace } from "./transformers/namespace.ts";
import { applyPodDisruptionBudgetOverrides } from "./transformers/pod-disruption-budgets.ts";
import { applyRegistry } from "./transformers/registry.ts";
import { allowQueueProxyPodInfo } from "./transformers/security-guard.ts";
import { applyServiceOverrides } from "./transformers/services.ts";
import {
  applyDeprecatedResources,
  applyWorkloadOverrides,
  workloadOverrides,
} from "./transformers/workloads.ts";

/**
 * The desired objects for a KnativeServing or KnativeEventing: `release` transformed per the CR's spec, the
 * way the upstream operator transforms its manifests, in apply order (CRDs first, then the release's order).
 * `namespace` is where Knative goes (the CR's own namespace unless the caller knows better: a spoke install
 * goes to the component's canonical namespace). Pure and deterministic; the returned objects are deeply
 * frozen and may be shared with `release`.
 */
export function render(
  resource: KnativeResource,
  release: Release,
  namespace: string | undefined = resource.metadata.namespace,
): Manifest[] {
  if (COMPONENT_OF_KIND[resource.kind] !== release.component) {
    throw new RenderError(`a ${resource.kind} cannot be rendered from the ${release.component} release`);
  }
  if (!namespace) throw new RenderError("metadata.namespace is required: Knative is installed into it");
  const { spec } = resource;
  // Upstream's order (pkg/reconciler/common/transformers.go, then the component's own transformers).
  const steps: Transformer[] = [
    injectNamespace(namespace),
    configureNamespace(spec.namespace),
    nameJobs(release.component, release.version),
    labelComponentName(release.component),
    applyHighAvailability(spec),
    applyRegistry(spec.registry),
    applyConfig(spec.config),
    applyDeprecatedResources(spec.resources),
    applyWorkloadOverrides(workloadOverrides(spec)),
    applyServiceOverrides(spec.services),
    applyPodDisruptionBudgetOverrides(spec.podDisruptionBudgets),
    ...(resource.kind === "KnativeServing"
      ? servingSteps(resource, release, namespace)
      : eventingSteps(resource)),
  ];
  const transformed = steps.reduce<readonly Manifest[]>(
    (manifests, step) => step(manifests),
    release.manifests,
  );
  return installOrder(withoutDuplicates(transformed));
}

function servingSteps(serving: KnativeServing, release: Release, namespace: string): Transformer[] {
  const { spec } = serving;
  return [
    configureControllerCustomCerts(spec["controller-custom-certs"]),
    ...(release.ingresses.includes("istio") ? [configureIstioGateways(spec.ingress?.istio)] : []),
    ...(release.ingresses.includes("kourier") ? [configureKourier(spec.ingress?.kourier)] : []),
    placeIstioGatewayServices(spec, namespace),
    allowQueueProxyPodInfo(spec.security),
  ];
}

function eventingSteps(eventing: KnativeEventing): Transformer[] {
  const { spec } = eventing;
  return [
    dropUnusedTlsCertificates(spec.config),
    setDefaultBrokerClass(spec.defaultBrokerClass),
    setSinkBindingSelectionMode(spec.sinkBindingSelectionMode),
  ];
}

/**
 * One object per identity. Upstream applies duplicates one after the other, so the last one is what the
 * cluster ends up with (the ingress's Namespace, renamed to the install namespace, after Serving's own);
 * it takes the first one's place in the order.
 */
function withoutDuplicates(manifests: readonly Manifest[]): Manifest[] {
  const byKey = new Map<string, Manifest>();
  for (const manifest of manifests) byKey.set(objectKey(manifest), manifest);
  return [...byKey.values()];
}

/** CRDs first, so that the custom resources of the release can be created; otherwise the release's order. */
function installOrder(manifests: readonly Manifest[]): Manifest[] {
  const isCrd = (manifest: Manifest) => manifest.kind === "CustomResourceDefinition";
  return [...manifests.filter(isCrd), ...manifests.filter((manifest) => !isCrd(manifest))];
}
