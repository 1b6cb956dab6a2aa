import type { KubeObject } from "../kube/object.ts";
import { canonicalJson } from "./compare.ts";

/**
 * The annotation the upstream operator's client (manifestival) reads as the "original" of its three-way merge
 * and writes after each apply. knative-fleet applies server-side and would otherwise leave it as the last
 * client-side writer left it: after a hand-over the upstream operator would then merge against a stale or
 * missing original and keep fields a new release dropped (a CRD keeping its conversion webhook while its
 * strategy becomes None, which the API server refuses). Writing what was applied keeps its merge right.
 */
export const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

export function withLastApplied(object: KubeObject): KubeObject {
  const { [LAST_APPLIED_ANNOTATION]: _previous, ...annotations } = object.metadata.annotations ?? {};
  const applied = { ...object, metadata: { ...object.metadata, annotations } };
  return {
    ...object,
    metadata: {
      ...object.metadata,
      annotations: { ...annotations, [LAST_APPLIED_ANNOTATION]: canonicalJson(applied) },
    },
  };
}
