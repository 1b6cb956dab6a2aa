import { LAST_APPLIED_ANNOTATION } from "../api/labels.ts";
import type { KubeObject } from "../kube/object.ts";
import { canonicalJson } from "./compare.ts";

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
