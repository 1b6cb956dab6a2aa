import type { CommonSpec } from "../../api/knative.ts";
import {
  isRecord,
  mergeStringMaps,
  setOrDelete,
  type Transformer,
  unchanged,
  updateWhere,
} from "../manifest.ts";

/** Upstream's ServicesTransform: spec.services labels, annotations and selector merged into the named Services. */
export function applyServiceOverrides(overrides: CommonSpec["services"]): Transformer {
  if (!overrides?.length) return unchanged;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        manifest.kind === "Service" && overrides.some((override) => override.name === manifest.metadata.name),
      (service) => {
        const { metadata } = service;
        if (!isRecord(service.spec)) service.spec = {};
        const spec = service.spec as { selector?: Record<string, string> };
        for (const override of overrides.filter((entry) => entry.name === metadata.name)) {
          setOrDelete(metadata, "labels", mergeStringMaps(metadata.labels, override.labels));
          setOrDelete(metadata, "annotations", mergeStringMaps(metadata.annotations, override.annotations));
          setOrDelete(spec, "selector", mergeStringMaps(spec.selector, override.selector));
        }
      },
    );
}
