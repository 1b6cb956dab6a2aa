import type { KnativeResource } from "../api/knative.ts";
import type { Owner } from "../apply/ownership.ts";
import type { KubeObject } from "../kube/object.ts";
import { type Release, render } from "../render/index.ts";
import { installNamespace } from "./target.ts";

/** The desired objects of a CR on its cluster: the release rendered for the CR's install namespace. */
export function renderInstall(resource: KnativeResource, release: Release): KubeObject[] {
  return render(resource, release, installNamespace(resource));
}

/** Who owns an install on its cluster: the CR's kind and name (the anchor's name comes from them). */
export const ownerOf = (resource: KnativeResource): Owner => ({
  kind: resource.kind,
  name: resource.metadata.name,
});
