import { type Transformer, updateWhere } from "../manifest.ts";
import type { Component } from "../source.ts";

const ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject";

/**
 * Upstream's JobTransform (pkg/reconciler/common/job.go): a Job gets a name that carries the component and the
 * target version (`storage-version-migration-serving-` -> `storage-version-migration-serving-serving-1.22.1`),
 * so each version runs its own Job once, and its pods stay out of an Istio mesh unless asked otherwise.
 */
export function nameJobs(component: Component, version: string): Transformer {
  const suffix = `${component === "knative-eventing" ? "eventing" : "serving"}-${version}`;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.kind === "Job",
      (job) => {
        const { metadata } = job;
        metadata.name = metadata.name
          ? `${metadata.name}-${suffix}`
          : `${metadata.generateName ?? ""}${suffix}`;
        const template = (job.spec as { template?: { metadata?: { annotations?: Record<string, string> } } })
          .template;
        if (template && !template.metadata?.annotations?.[ISTIO_INJECT_ANNOTATION]) {
          template.metadata ??= {};
          template.metadata.annotations = {
            ...template.metadata.annotations,
            [ISTIO_INJECT_ANNOTATION]: "false",
          };
        }
      },
    );
}
