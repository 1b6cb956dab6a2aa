import { isRecord, type Manifest, podTemplateOf } from "./manifest.ts";
import type { Release } from "./release.ts";

// What a release offers a CR's settings to name (its ConfigMaps and their keys, workloads and their
// containers, Services, PDBs), read once per release from its manifests: the index the settings check
// (settings-check.ts) looks names up in.

/** What a release offers a CR's settings to name, read once per release. */
export interface ReleaseSettings {
  configMaps: Map<string, ConfigMapKeys>;
  /** Deployments, StatefulSets and Jobs (by generateName, as the override matches them): their containers. */
  workloads: Map<string, readonly string[]>;
  services: Set<string>;
  podDisruptionBudgets: Map<string, Manifest>;
  deployments: Map<string, Manifest>;
}

export interface ConfigMapKeys {
  /** The keys of its data and of its `_example` block. */
  documented: Set<string>;
  /** Keys Knative reads by pattern (`loglevel.<component>`), or `any` for a map of names (config-domain). */
  dynamic: readonly RegExp[] | "any";
  /** Its `_example` documents no setting and says the ConfigMap is deprecated (config-tracing since 1.20). */
  deprecated: boolean;
}

/**
 * Keys Knative accepts by pattern, as the ConfigMaps' own comments describe them: log levels per component,
 * Istio's old per-gateway keys, and maps whose keys are the user's names (domains; kinds for KReference).
 */
const DYNAMIC_KEYS: Readonly<Record<string, readonly RegExp[] | "any">> = {
  "config-logging": [/^loglevel\./],
  "config-istio": [/^gateway\./, /^local-gateway\./],
  "config-domain": "any",
  "config-kreference-mapping": "any",
};

/**
 * Keys Knative still reads that no `_example` shows any more, the camel-case spellings of before 1.0 that
 * docs and other operators' CRs still use: config-network's (knative.dev/networking pkg/config/config.go)
 * and config-deployment's (knative.dev/serving pkg/deployment/config.go), each under "Legacy keys".
 */
const LEGACY_KEYS: Readonly<Record<string, readonly string[]>> = {
  "config-deployment": [
    "queueSidecarImage",
    "progressDeadline",
    "digestResolutionTimeout",
    "registriesSkippingTagResolving",
    "queueSidecarCPURequest",
    "queueSidecarMemoryRequest",
    "queueSidecarEphemeralStorageRequest",
    "queueSidecarCPULimit",
    "queueSidecarMemoryLimit",
    "queueSidecarEphemeralStorageLimit",
  ],
  "config-network": [
    "ingress.class",
    "certificate.class",
    "domainTemplate",
    "tagTemplate",
    "rolloutDuration",
    "autocreateClusterDomainClaims",
    "defaultExternalScheme",
    "autoTLS",
    "httpProtocol",
  ],
};

/**
 * The releases' indexes, by where each release came from (its locations, which name its ingresses too):
 * the loader hands out a new Release object on every load, and a sync checks every CR of the fleet.
 */
const indexes = new Map<string, ReleaseSettings>();
const MAX_INDEXES = 64;

/** The index of `release`, kept by where it came from. */
export function releaseSettings(release: Release): ReleaseSettings {
  const key = [release.component, release.version, release.manifests.length, ...release.locations].join("\n");
  let index = indexes.get(key);
  if (!index) {
    index = indexRelease(release.manifests);
    if (indexes.size >= MAX_INDEXES) indexes.delete(indexes.keys().next().value!);
    indexes.set(key, index);
  }
  return index;
}

function indexRelease(manifests: readonly Manifest[]): ReleaseSettings {
  const index: ReleaseSettings = {
    configMaps: new Map(),
    workloads: new Map(),
    services: new Set(),
    podDisruptionBudgets: new Map(),
    deployments: new Map(),
  };
  for (const manifest of manifests) {
    const { name, generateName } = manifest.metadata;
    switch (manifest.kind) {
      case "ConfigMap":
        if (name) index.configMaps.set(name, configMapKeys(manifest, index.configMaps.get(name)));
        break;
      case "Deployment":
      case "StatefulSet":
      case "Job": {
        if (manifest.kind === "Deployment" && name) index.deployments.set(name, manifest);
        const workload = manifest.kind === "Job" ? generateName : name;
        const containers = podTemplateOf(manifest)?.spec.containers.map((container) => container.name) ?? [];
        if (workload) index.workloads.set(workload, containers);
        break;
      }
      case "Service":
        if (name) index.services.add(name);
        break;
      case "PodDisruptionBudget":
        if (name) index.podDisruptionBudgets.set(name, manifest);
        break;
    }
  }
  return index;
}

function configMapKeys(configMap: Manifest, earlier: ConfigMapKeys | undefined): ConfigMapKeys {
  const data = isRecord(configMap.data) ? configMap.data : {};
  const documented = new Set([
    ...(earlier?.documented ?? []),
    ...(LEGACY_KEYS[configMap.metadata.name ?? ""] ?? []),
  ]);
  for (const key of Object.keys(data)) if (key !== EXAMPLE_KEY) documented.add(key);
  const example = data[EXAMPLE_KEY];
  if (typeof example === "string") for (const key of exampleKeys(example)) documented.add(key);
  const deprecated = documented.size === 0 && typeof example === "string" && /deprecated/i.test(example);
  return { documented, dynamic: DYNAMIC_KEYS[configMap.metadata.name ?? ""] ?? [], deprecated };
}

const EXAMPLE_KEY = "_example";
// `key: value` at the start of a line, as the `_example` block writes its settings; or commented out with one
// `# ` (a setting shown but off by default). Prose after `# ` starts upper-case or has spaces before a colon.
const EXAMPLE_SETTING = /^([A-Za-z0-9][\w.-]*):(?:\s|$)/;
const COMMENTED_SETTING = /^# ([a-z0-9][\w.-]*):(?:\s|$)/;

/** The keys an `_example` block documents: its settings, set or commented out. */
export function exampleKeys(example: string): string[] {
  return example.split("\n").flatMap((line) => {
    const match = EXAMPLE_SETTING.exec(line) ?? COMMENTED_SETTING.exec(line);
    return match ? [match[1]!] : [];
  });
}
