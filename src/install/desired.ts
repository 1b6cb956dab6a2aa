import type { KnativeResource } from "../api/knative.ts";
import type { KubeObject } from "../kube/object.ts";
import { type Release, render } from "../render/index.ts";
import { installNamespace } from "./identity.ts";

/** The desired objects of a CR on its cluster: the release rendered for the CR's install namespace. */
export function renderInstall(resource: KnativeResource, release: Release): KubeObject[] {
  return render(resource, release, installNamespace(resource));
}
