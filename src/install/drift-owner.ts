import type { KnativeResource, WorkloadOverride } from "../api/knative.ts";
import type { FieldStep } from "../apply/drift.ts";
import { type FieldPath, formatFieldPath } from "../fleet/diagnostic.ts";

// Which field of the CR sets a drifted field of an installed object: the one place that knows how
// spec.config becomes ConfigMaps and spec.workloads becomes Deployment fields (render/ applies them), read
// backwards. A field no part of the spec sets comes from the release manifests: it has no owner.

interface DriftOwner {
  /** The CR field as a path (fleet/yaml-source.ts locates it in the file) and as text. */
  path: FieldPath;
  field: string;
  /** Whether the CR sets it; when not, `path` is where it would go. */
  set: boolean;
}

/** The owner of one drifted field of `kind`/`name`, or undefined when the release manifests set it. */
export function driftOwner(
  resource: KnativeResource,
  object: { kind: string; name: string },
  steps: readonly FieldStep[],
): DriftOwner | undefined {
  if (object.kind === "ConfigMap" && object.name.startsWith("config-") && steps[0] === "data") {
    return configOwner(resource, object.name.slice("config-".length), steps[1]);
  }
  if (object.kind === "Deployment" || object.kind === "StatefulSet") {
    return workloadOwner(resource, object.name, steps);
  }
  return undefined;
}

/** `config-autoscaler` data keys: spec.config.autoscaler.<key> (upstream also reads `config-autoscaler:`). */
function configOwner(resource: KnativeResource, name: string, key: FieldStep | undefined): DriftOwner {
  const config = resource.spec.config ?? {};
  const section = Object.hasOwn(config, `config-${name}`) ? `config-${name}` : name;
  if (typeof key !== "string") return owner(["spec", "config", section], Object.hasOwn(config, section));
  return owner(["spec", "config", section, key], Object.hasOwn(config[section] ?? {}, key));
}

/** The Deployment fields spec.workloads[] sets, by where they sit in the Deployment. */
const WORKLOAD_FIELDS: readonly { at: readonly string[]; field: keyof WorkloadOverride }[] = [
  { at: ["spec", "replicas"], field: "replicas" },
  { at: ["metadata", "labels"], field: "labels" },
  { at: ["metadata", "annotations"], field: "annotations" },
  { at: ["spec", "template", "metadata", "labels"], field: "labels" },
  { at: ["spec", "template", "metadata", "annotations"], field: "annotations" },
  { at: ["spec", "template", "spec", "nodeSelector"], field: "nodeSelector" },
  { at: ["spec", "template", "spec", "tolerations"], field: "tolerations" },
  { at: ["spec", "template", "spec", "affinity"], field: "affinity" },
  { at: ["spec", "template", "spec", "topologySpreadConstraints"], field: "topologySpreadConstraints" },
  { at: ["spec", "template", "spec", "hostNetwork"], field: "hostNetwork" },
];

/** Per container: spec.template.spec.containers[name=c].<part> -> spec.workloads[].<field> (its `container` entry). */
const CONTAINER_FIELDS: Readonly<Record<string, keyof WorkloadOverride>> = {
  resources: "resources",
  env: "env",
  readinessProbe: "readinessProbes",
  livenessProbe: "livenessProbes",
  volumeMounts: "volumeMounts",
};

function workloadOwner(resource: KnativeResource, name: string, steps: readonly FieldStep[]): DriftOwner {
  const workloads = resource.spec.workloads ?? [];
  const index = workloads.findIndex((w) => w.name === name);
  const entry = workloads[index];
  const base: FieldPath = index < 0 ? ["spec", "workloads"] : ["spec", "workloads", index];
  const within = (field: keyof WorkloadOverride, set: boolean) =>
    index < 0 ? owner(base, false) : owner([...base, field], set);
  const plain = WORKLOAD_FIELDS.find(({ at }) => at.every((part, i) => steps[i] === part));
  if (plain) return within(plain.field, entry?.[plain.field] !== undefined);
  const container = steps[4];
  if (steps.slice(0, 4).join("/") === "spec/template/spec/containers" && typeof container === "object") {
    const field = CONTAINER_FIELDS[String(steps[5])];
    if (field) {
      const list = entry?.[field];
      const set =
        Array.isArray(list) && list.some((c) => (c as { container?: string }).container === container.name);
      return within(field, set);
    }
  }
  return owner(base, index >= 0);
}

const owner = (path: FieldPath, set: boolean): DriftOwner => ({ path, field: formatFieldPath(path), set });
