import type { KnativeResource } from "../api/knative.ts";
import type { KubeObject } from "../kube/object.ts";
import { type Release, render } from "../render/index.ts";
import { installNamespace } from "./identity.ts";

/**
 * The desired objects of a CR on its cluster: the release rendered for its install namespace (the canonical
 * one unless an existing install was located elsewhere, see layout.ts).
 */
export function renderInstall(
  resource: KnativeResource,
  release: Release,
  namespace: string = installNamespace(resource),
): KubeObject[] {
  return render(resource, release, namespace);
}
