import { ISTIO_INJECT_ANNOTATION } from "../../api/labels.ts";
import { type Transformer, updateWhere } from "../manifest.ts";
import type { Component } from "../source.ts";

/**
 * Upstream's JobTransform (pkg/reconciler/common/job.go): a Job gets a name that carries the component and the
 * target version (`storage-version-migration-serving-` -> `storage-version-migration-serving-serving-1.22.1`),
 * so each version runs its own Job once, and its pods stay out of an Istio mesh. The releases already say so
 * with a pod-template label, which upstream leaves as it is: the template is immutable, so any other spelling
 * (an annotation beside the label, say) makes a Job that upstream created impossible to take over in place.
 * Only a template that says nothing gets the label.
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
        const template = (
          job.spec as {
            template?: {
              metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
            };
          }
        ).template;
        if (!template) return;
        const said =
          template.metadata?.labels?.[ISTIO_INJECT_ANNOTATION] ??
          template.metadata?.annotations?.[ISTIO_INJECT_ANNOTATION];
        if (said === undefined) {
          template.metadata ??= {};
          template.metadata.labels = { ...template.metadata.labels, [ISTIO_INJECT_ANNOTATION]: "false" };
        }
      },
    );
}
