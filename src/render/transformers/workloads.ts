import type { CommonSpec, WorkloadOverride } from "../../api/knative.ts";
import {
  type Container,
  type EnvVar,
  type Manifest,
  mergeStringMaps,
  type PodTemplate,
  podTemplateOf,
  type ResourceList,
  setOrDelete,
  type Transformer,
  unchanged,
  updateWhere,
} from "../manifest.ts";
import { autoscaledWorkloads, hpaTarget, raiseHpaMinimum } from "./autoscaling.ts";

// Upstream's OverridesTransform (deployments_override.go, env_override.go, probe_override.go) and the deprecated
// spec.resources (resources.go).

type ResourceOverride = NonNullable<WorkloadOverride["resources"]>[number];
type ProbeOverride = NonNullable<WorkloadOverride["readinessProbes"]>[number];

/** spec.deployments (deprecated) then spec.workloads, as upstream concatenates them. */
export function workloadOverrides(spec: CommonSpec): WorkloadOverride[] {
  return [...(spec.deployments ?? []), ...(spec.workloads ?? [])];
}

/**
 * Whether `override` applies to `manifest`: a Deployment or StatefulSet by name, a Job by its generateName,
 * and, for replicas, the HPA that scales the named workload.
 */
function overrideApplies(manifest: Manifest, override: WorkloadOverride): boolean {
  switch (manifest.kind) {
    case "Deployment":
    case "StatefulSet":
      return manifest.metadata.name === override.name;
    case "Job":
      return manifest.metadata.generateName === override.name;
    case "HorizontalPodAutoscaler":
      return override.replicas !== undefined && hpaTarget(manifest) === override.name;
    default:
      return false;
  }
}

/**
 * Applies spec.workloads (and spec.deployments) to the named workloads: replicas (to the HPA instead when one
 * scales the workload), labels and annotations on the workload and its pods, scheduling, per-container
 * resources, env and probe timings, host networking.
 */
export function applyWorkloadOverrides(overrides: readonly WorkloadOverride[]): Transformer {
  if (overrides.length === 0) return unchanged;
  return (manifests) => {
    const autoscaled = autoscaledWorkloads(manifests);
    return updateWhere(
      manifests,
      (manifest) => overrides.some((override) => overrideApplies(manifest, override)),
      (manifest) => {
        for (const override of overrides) {
          if (!overrideApplies(manifest, override)) continue;
          if (manifest.kind === "HorizontalPodAutoscaler") raiseHpaMinimum(manifest, override.replicas!);
          else overrideWorkload(manifest, override, autoscaled.has(override.name));
        }
      },
    );
  };
}

function overrideWorkload(workload: Manifest, override: WorkloadOverride, autoscaled: boolean): void {
  const template = podTemplateOf(workload);
  if (!template) return;
  // A Job has no replicas; an autoscaled workload's belong to its autoscaler.
  if (override.replicas !== undefined && !autoscaled && workload.kind !== "Job") {
    (workload.spec as { replicas?: number }).replicas = override.replicas;
  }
  overrideMetadata(workload, template, override);
  const pod = template.spec;
  if (override.nodeSelector && Object.keys(override.nodeSelector).length > 0) {
    pod.nodeSelector = { ...override.nodeSelector };
  }
  if (override.topologySpreadConstraints?.length) {
    pod.topologySpreadConstraints = structuredClone(override.topologySpreadConstraints);
  }
  if (override.tolerations?.length) pod.tolerations = structuredClone(override.tolerations);
  if (override.affinity) pod.affinity = structuredClone(override.affinity);
  for (const container of pod.containers) {
    const resources = override.resources?.find((entry) => entry.container === container.name);
    if (resources) mergeContainerResources(container, resources);
    const env = override.env?.find((entry) => entry.container === container.name);
    if (env) mergeEnv(container, env.envVars);
    overrideProbe(container, "readinessProbe", findProbe(override.readinessProbes, container));
    overrideProbe(container, "livenessProbe", findProbe(override.livenessProbes, container));
  }
  if (override.hostNetwork !== undefined) {
    setOrDelete(pod, "hostNetwork", override.hostNetwork || undefined);
    if (override.hostNetwork) pod.dnsPolicy = "ClusterFirstWithHostNet";
  }
}

function overrideMetadata(workload: Manifest, template: PodTemplate, override: WorkloadOverride): void {
  const { metadata } = workload;
  template.metadata ??= {};
  const podMetadata = template.metadata;
  setOrDelete(metadata, "labels", mergeStringMaps(metadata.labels, override.labels));
  setOrDelete(podMetadata, "labels", mergeStringMaps(podMetadata.labels, override.labels));
  setOrDelete(metadata, "annotations", mergeStringMaps(metadata.annotations, override.annotations));
  setOrDelete(podMetadata, "annotations", mergeStringMaps(podMetadata.annotations, override.annotations));
}

/**
 * Sets the override's limits and requests on the container: key by key over a non-empty list, else the
 * override's list replaces it (upstream's merge).
 */
function mergeContainerResources(container: Container, override: ResourceOverride): void {
  const resources = container.resources ?? {};
  setOrDelete(resources, "limits", mergeResourceList(resources.limits, override.limits));
  setOrDelete(resources, "requests", mergeResourceList(resources.requests, override.requests));
  container.resources = resources;
}

function mergeResourceList(current: ResourceList | undefined, override: ResourceList | undefined) {
  if (current && Object.keys(current).length > 0) return { ...current, ...override };
  return override && { ...override };
}

/** Replaces the container's env vars of the same name and appends the new ones. */
function mergeEnv(container: Container, envVars: readonly EnvVar[] | undefined): void {
  if (!container.env?.length) {
    setOrDelete(container, "env", envVars && structuredClone([...envVars]));
    return;
  }
  const env = container.env;
  for (const envVar of envVars ?? []) {
    const sameName = env.flatMap((current, index) => (current.name === envVar.name ? [index] : []));
    if (sameName.length === 0) env.push(structuredClone(envVar));
    for (const index of sameName) env[index] = structuredClone(envVar);
  }
}

const PROBE_COUNTS = [
  "initialDelaySeconds",
  "timeoutSeconds",
  "periodSeconds",
  "successThreshold",
  "failureThreshold",
] as const satisfies readonly (keyof ProbeOverride)[];

function findProbe(
  probes: readonly ProbeOverride[] | undefined,
  container: Container,
): ProbeOverride | undefined {
  return probes?.find((probe) => probe.container === container.name);
}

/**
 * Sets the override's probe timings on the container's probe (creating it when missing). An override with no
 * timing at all removes the probe: that is how upstream lets a probe be switched off.
 */
function overrideProbe(
  container: Container,
  probe: "readinessProbe" | "livenessProbe",
  override: ProbeOverride | undefined,
): void {
  if (!override) return;
  const timings: Record<string, number> = {};
  // The upstream fields are plain int32s: 0 means unset. terminationGracePeriodSeconds is a pointer.
  for (const name of PROBE_COUNTS) {
    const value = override[name];
    if (value) timings[name] = value;
  }
  if (override.terminationGracePeriodSeconds !== undefined) {
    timings.terminationGracePeriodSeconds = override.terminationGracePeriodSeconds;
  }
  if (Object.keys(timings).length === 0) delete container[probe];
  else container[probe] = { ...container[probe], ...timings };
}

/** The deprecated spec.resources: per-container resources for every Deployment. */
export function applyDeprecatedResources(resources: CommonSpec["resources"]): Transformer {
  if (!resources?.length) return unchanged;
  const overrideFor = (container: Container) => resources.find((entry) => entry.container === container.name);
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        manifest.kind === "Deployment" &&
        (podTemplateOf(manifest)?.spec.containers.some(overrideFor) ?? false),
      (deployment) => {
        for (const container of podTemplateOf(deployment)!.spec.containers) {
          const override = overrideFor(container);
          if (override) mergeContainerResources(container, override);
        }
      },
    );
}
