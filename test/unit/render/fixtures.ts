import {
  type KnativeEventing,
  KnativeEventingSchema,
  type KnativeEventingSpec,
  type KnativeServing,
  KnativeServingSchema,
  type KnativeServingSpec,
} from "../../../src/api/knative.ts";
import { createKodataSource, type Manifest, ReleaseLoader, render } from "../../../src/render/index.ts";
import type { Container, PodTemplate } from "../../../src/render/manifest.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

/** The operator's image-name placeholder in spec.registry.default, written out. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: upstream's placeholder, literally.
export const NAME_PLACEHOLDER = "${NAME}";

// The real Knative releases of ../shared, parsed once per test file and shared by its tests.
export const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));

/** A KnativeServing as a fleet file would hold it, validated by the project's schema. */
export function knativeServing(spec: KnativeServingSpec = {}, namespace = "knative-serving"): KnativeServing {
  return KnativeServingSchema.parse({
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeServing",
    metadata: { name: "knative-serving", namespace },
    spec,
  });
}

export function knativeEventing(
  spec: KnativeEventingSpec = {},
  namespace = "knative-eventing",
): KnativeEventing {
  return KnativeEventingSchema.parse({
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeEventing",
    metadata: { name: "knative-eventing", namespace },
    spec,
  });
}

export async function renderServing(spec: KnativeServingSpec = {}, namespace?: string): Promise<Manifest[]> {
  const serving = knativeServing(spec, namespace);
  return render(serving, await releases.load(serving));
}

export async function renderEventing(
  spec: KnativeEventingSpec = {},
  namespace?: string,
): Promise<Manifest[]> {
  const eventing = knativeEventing(spec, namespace);
  return render(eventing, await releases.load(eventing));
}

/** The one object of that kind and name; fails the test when there is none. */
export function find(manifests: readonly Manifest[], kind: string, name: string): Manifest {
  const found = manifests.find((manifest) => manifest.kind === kind && manifest.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${manifests.length} manifests`);
  return found;
}

export function podTemplate(manifests: readonly Manifest[], kind: string, name: string): PodTemplate {
  return (find(manifests, kind, name).spec as { template: PodTemplate }).template;
}

export function container(manifests: readonly Manifest[], deployment: string, name = deployment): Container {
  const found = podTemplate(manifests, "Deployment", deployment).spec.containers.find((c) => c.name === name);
  if (!found) throw new Error(`no container ${name} in Deployment ${deployment}`);
  return found;
}

export function dataOf(manifests: readonly Manifest[], configMap: string): Record<string, string> {
  return find(manifests, "ConfigMap", configMap).data as Record<string, string>;
}
