import type { KnativeResource } from "../api/knative.ts";
import type { KubeObject } from "../apply/objects.ts";
import type { Owner } from "../apply/ownership.ts";
import { type Release, render } from "../render/index.ts";
import { installNamespace } from "./target.ts";

/**
 * The desired objects of a CR on its cluster: the release rendered for its install namespace (the canonical
 * one unless an existing install was located elsewhere, see layout.ts).
 */
export function renderInstall(
  resource: KnativeResource,
  release: Release,
  namespace: string = installNamespace(resource),
): KubeObject[] {
  return render(
    { ...resource, metadata: { ...resource.metadata, namespace } } as KnativeResource,
    release,
  ) as KubeObject[];
}

/** Who owns an install on its cluster: the CR's kind and name (the anchor's name comes from them). */
export const ownerOf = (resource: KnativeResource): Owner => ({
  kind: resource.kind,
  name: resource.metadata.name,
});
