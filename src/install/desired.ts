import type { KnativeResource } from "../api/knative.ts";
import type { KubeObject } from "../kube/object.ts";
import { deepFreeze, type Release, render } from "../render/index.ts";
import { installNamespace } from "./identity.ts";

/**
 * The renderings kept, per release. A placement gives hundreds of CRs one spec: each would otherwise be
 * rendered anew, a thousand objects of CPU and garbage per CR. A few are enough for that; CRs that each have
 * their own spec get nothing from a cache, and keeping theirs would cost memory per CR.
 */
const RENDERINGS_KEPT = 8;
const renderings = new WeakMap<Release, Map<string, readonly KubeObject[]>>();

/**
 * The desired objects of a CR on its cluster: the release rendered for its install namespace (the canonical
 * one unless an existing install was located elsewhere, see layout.ts). Deeply frozen, and shared by every CR
 * of the same kind, spec and namespace: render() reads nothing else of the CR (not its name, not its cluster).
 */
export function renderInstall(
  resource: KnativeResource,
  release: Release,
  namespace: string = installNamespace(resource),
): readonly KubeObject[] {
  const { clusterProfileRef: _cluster, ...spec } = resource.spec;
  const key = JSON.stringify([resource.kind, namespace, spec]);
  const kept = renderings.get(release) ?? new Map<string, readonly KubeObject[]>();
  renderings.set(release, kept);
  const cached = kept.get(key);
  if (cached) {
    // Most recently used last: the oldest goes first.
    kept.delete(key);
    kept.set(key, cached);
    return cached;
  }
  const rendered = deepFreeze(render(resource, release, namespace));
  kept.set(key, rendered);
  if (kept.size > RENDERINGS_KEPT) kept.delete(kept.keys().next().value!);
  return rendered;
}
