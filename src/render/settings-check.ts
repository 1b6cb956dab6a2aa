import {
  type KnativeResource,
  KnativeResourceSchema,
  OPERATOR_API_VERSION,
  type WorkloadOverride,
  withEveryEventSource,
} from "../api/knative.ts";
import { ALLOW_UNKNOWN_SETTINGS_ANNOTATION } from "../api/labels.ts";
import { type Diagnostic, type FieldPath, formatFieldPath } from "../fleet/diagnostic.ts";
import { editDistance } from "../fleet/document-kind.ts";
import type { DesiredResource, FleetFile } from "../fleet/model.ts";
import { type DeclaredPlacement, hasPath, mergedSpec } from "../fleet/placement-document.ts";
import { isPlacementKind, PLACEMENT_KINDS } from "../fleet/placement-schema.ts";
import { locateField, parseYamlFile, type SourceDocument } from "../fleet/yaml-source.ts";
import { isRecord, podTemplateOf } from "./manifest.ts";
import type { Release, ReleaseLoader } from "./release.ts";
import { type ConfigMapKeys, type ReleaseSettings, releaseSettings } from "./release-settings.ts";
import { INGRESSES } from "./source.ts";
import { minorOf } from "./version.ts";

// The release-aware check of what a KnativeServing/KnativeEventing's settings name: a ConfigMap, a key, a
// workload, a container, a Service or PDB the release does not have changes nothing, and hides a typo that
// silently leaves Knative's default in place. validate, plan and the service's sync all run this one check.

export interface SettingsFinding {
  /** From the document root, e.g. `["spec", "config", "autoscalr"]`. */
  field: FieldPath;
  message: string;
  severity: "error" | "warning";
  /** What is wrong: the key (an unknown ConfigMap or key), or the value (a name, a type); the key when absent. */
  anchor?: "value";
}

const CONFIG_PREFIX = "config-";

const INGRESS_CLASS_KEYS = ["ingress-class", "ingress.class"];
const INGRESS_CLASS = (ingress: string) => `${ingress}.ingress.networking.knative.dev`;
const KOURIER_SERVICE_TYPES = ["ClusterIP", "NodePort", "LoadBalancer"];
/** The ConfigMap each ingress release ships its settings in. */
const INGRESS_CONFIG_MAPS: Record<(typeof INGRESSES)[number], string> = {
  istio: "config-istio",
  contour: "config-contour",
  kourier: "config-kourier",
  "gateway-api": "config-gateway",
};

/**
 * The findings for `resource`'s settings against `release` (what render() installs from), and, on an upgrade,
 * the release `installed` now: a setting the target minor drops is a warning there rather than an error.
 * Pure but for the index of each release's names, kept by where the release came from.
 */
export function checkSettings(
  resource: KnativeResource,
  release: Release,
  installed?: Release,
): SettingsFinding[] {
  const target = releaseSettings(release);
  const before =
    installed && minorOf(installed.version) !== minorOf(release.version)
      ? releaseSettings(installed)
      : undefined;
  const allowed = allowedSettings(resource.metadata.annotations?.[ALLOW_UNKNOWN_SETTINGS_ANNOTATION]);
  const context: CheckContext = { target, before, release, installed, findings: [], allowed };
  const { spec } = resource;
  checkConfig(spec.config, context);
  for (const list of ["deployments", "workloads"] as const) {
    for (const [index, override] of (spec[list] ?? []).entries()) {
      checkWorkload(override, ["spec", list, index], context);
    }
  }
  const deploymentContainers = new Set(
    [...target.deployments.keys()].flatMap((name) => target.workloads.get(name) ?? []),
  );
  for (const [index, override] of (spec.resources ?? []).entries()) {
    if (!deploymentContainers.has(override.container)) {
      unknown(context, ["spec", "resources", index, "container"], `spec.resources.${override.container}`, {
        what: `container ${override.container}`,
        where: "in any Deployment of the",
        known: [...deploymentContainers],
      });
    }
  }
  for (const [list, names, kind] of [
    ["services", target.services, "Service"],
    ["podDisruptionBudgets", new Set(target.podDisruptionBudgets.keys()), "PodDisruptionBudget"],
  ] as const) {
    for (const [index, override] of (spec[list] ?? []).entries()) {
      if (names.has(override.name)) continue;
      unknown(context, ["spec", list, index, "name"], `spec.${list}.${override.name}`, {
        what: `${kind} ${override.name}`,
        where: "in the",
        known: [...names],
        dropped:
          before &&
          (list === "services" ? before.services : new Set(before.podDisruptionBudgets.keys())).has(
            override.name,
          ),
      });
    }
  }
  if (resource.kind === "KnativeServing") checkIngress(resource, context);
  checkDrainBlockingBudgets(resource, context);
  return context.findings;
}

interface CheckContext {
  target: ReleaseSettings;
  before: ReleaseSettings | undefined;
  release: Release;
  installed: Release | undefined;
  allowed: (setting: string) => boolean;
  findings: SettingsFinding[];
}

/**
 * Reports a name the release does not have: an error with the closest known name, a warning when the
 * installed minor had it (the upgrade drops it), nothing when the annotation keeps it.
 */
function unknown(
  context: CheckContext,
  field: FieldPath,
  setting: string,
  {
    what,
    where,
    known,
    dropped = false,
    advice,
  }: {
    what: string;
    where: string;
    known: readonly string[];
    dropped?: boolean | undefined;
    /** What to do instead, when the name means something this CR does not install. */
    advice?: string | undefined;
  },
): void {
  if (context.allowed(setting)) return;
  const { release, installed } = context;
  const name = setting.slice(setting.lastIndexOf(".") + 1);
  const hint = closest(
    String(field.at(-1) === "name" || field.at(-1) === "container" ? name : field.at(-1)),
    known,
  );
  if (dropped && installed) {
    context.findings.push({
      field,
      ...(field[1] === "config" ? {} : { anchor: "value" as const }),
      severity: "warning",
      message: `${what} is in the installed ${installed.version} release but not in ${release.version}: the upgrade drops this setting, it has no effect any more; remove it`,
    });
    return;
  }
  context.findings.push({
    field,
    ...(field[1] === "config" ? {} : { anchor: "value" as const }),
    severity: "error",
    message:
      `no ${what} ${where} ${release.version} release, so this setting changes nothing` +
      `${advice ? `: ${advice}` : hint ? `; did you mean ${hint}?` : ""} ` +
      `(to keep a setting the check does not know, list ${setting} in the annotation ${ALLOW_UNKNOWN_SETTINGS_ANNOTATION})`,
  });
}

function checkConfig(
  config: Record<string, Record<string, string>> | undefined,
  context: CheckContext,
): void {
  const { target, before } = context;
  for (const [given, entries] of Object.entries(config ?? {})) {
    const name = configMapName(given, target) ?? configMapName(given, before);
    const keys = name === undefined ? undefined : target.configMaps.get(name);
    if (!keys) {
      const ingress = INGRESSES.find(
        (candidate) =>
          [given, `${CONFIG_PREFIX}${given}`].includes(INGRESS_CONFIG_MAPS[candidate]) &&
          !context.release.ingresses.includes(candidate),
      );
      unknown(context, ["spec", "config", given], `spec.config.${given}`, {
        what: `ConfigMap ${given.startsWith(CONFIG_PREFIX) ? given : `${CONFIG_PREFIX}${given} (or ${given})`}`,
        where: "in the",
        known: configMapChoices(target),
        dropped: name !== undefined,
        ...(ingress && {
          advice: `it comes with the ${ingress} ingress, which this KnativeServing does not install (set spec.ingress.${ingress}.enabled: true)`,
        }),
      });
      continue;
    }
    if (keys.deprecated) {
      // Whether Knative still reads it is not the release's to say: a warning, not a blocked file.
      for (const key of Object.keys(entries)) {
        if (context.allowed(`spec.config.${given}.${key}`)) continue;
        context.findings.push({
          field: ["spec", "config", given, key],
          severity: "warning",
          message: `${name} documents no settings in the ${context.release.version} release and its _example calls it deprecated: ${key} likely has no effect; its _example says where the setting moved`,
        });
      }
      continue;
    }
    for (const key of Object.keys(entries)) {
      if (isKnownKey(keys, key)) continue;
      const previous = before?.configMaps.get(name!);
      unknown(context, ["spec", "config", given, key], `spec.config.${given}.${key}`, {
        what: `key ${key} documented in ${name}`,
        where: "of the",
        known: [...keys.documented],
        dropped: previous !== undefined && isKnownKey(previous, key),
      });
    }
  }
}

/** The shipped ConfigMap a spec.config key means: its full name, or the name without `config-` (upstream). */
function configMapName(given: string, settings: ReleaseSettings | undefined): string | undefined {
  if (!settings) return undefined;
  if (settings.configMaps.has(given)) return given;
  return settings.configMaps.has(`${CONFIG_PREFIX}${given}`) ? `${CONFIG_PREFIX}${given}` : undefined;
}

/** Names to suggest: each ConfigMap's full name and, upstream's shorthand, its name without `config-`. */
function configMapChoices(settings: ReleaseSettings): string[] {
  return [...settings.configMaps.keys()].flatMap((name) =>
    name.startsWith(CONFIG_PREFIX) ? [name, name.slice(CONFIG_PREFIX.length)] : [name],
  );
}

function isKnownKey(keys: ConfigMapKeys, key: string): boolean {
  if (keys.dynamic === "any" || keys.documented.has(key)) return true;
  return keys.dynamic.some((pattern) => pattern.test(key));
}

const CONTAINER_LISTS = ["resources", "env", "readinessProbes", "livenessProbes"] as const;

function checkWorkload(override: WorkloadOverride, at: FieldPath, context: CheckContext): void {
  const list = String(at[1]);
  const containers = context.target.workloads.get(override.name);
  if (!containers) {
    unknown(context, [...at, "name"], `spec.${list}.${override.name}`, {
      what: `Deployment, StatefulSet or Job ${override.name}`,
      where: "in the",
      known: [...context.target.workloads.keys()],
      dropped: context.before?.workloads.has(override.name),
    });
    return;
  }
  for (const field of CONTAINER_LISTS) {
    for (const [index, entry] of (override[field] ?? []).entries()) {
      if (containers.includes(entry.container)) continue;
      unknown(
        context,
        [...at, field, index, "container"],
        `spec.${list}.${override.name}.${entry.container}`,
        {
          what: `container ${entry.container}`,
          where: `in ${override.name} (containers: ${containers.join(", ")}) of the`,
          known: containers,
        },
      );
    }
  }
}

/** ingress-class names an ingress Knative has and this CR installs; Kourier's service type is one it takes. */
function checkIngress(
  serving: Extract<KnativeResource, { kind: "KnativeServing" }>,
  context: CheckContext,
): void {
  const { release } = context;
  const serviceType = serving.spec.ingress?.kourier?.["service-type"];
  if (serviceType !== undefined && !KOURIER_SERVICE_TYPES.includes(serviceType)) {
    const hint = closest(serviceType, KOURIER_SERVICE_TYPES);
    context.findings.push({
      field: ["spec", "ingress", "kourier", "service-type"],
      anchor: "value",
      severity: "error",
      message: `Kourier's gateway Service takes ${KOURIER_SERVICE_TYPES.join(", ")}, not ${serviceType}${hint ? `; did you mean ${hint}?` : ""}`,
    });
  }
  for (const [given, entries] of Object.entries(serving.spec.config ?? {})) {
    if (configMapName(given, context.target) !== "config-network") continue;
    for (const key of INGRESS_CLASS_KEYS) {
      const value = entries[key];
      if (value === undefined) continue;
      const field = ["spec", "config", given, key];
      const classes = INGRESSES.map(INGRESS_CLASS);
      const ingress = INGRESSES.find((name) => INGRESS_CLASS(name) === value);
      if (!ingress) {
        const hint = closest(value, classes);
        context.findings.push({
          field,
          anchor: "value",
          severity: "error",
          message: `${value} is no Knative ingress class (${classes.join(", ")})${hint ? `; did you mean ${hint}?` : ""}`,
        });
      } else if (!release.ingresses.includes(ingress)) {
        context.findings.push({
          field,
          anchor: "value",
          severity: "warning",
          message: `routes through ${ingress}, which this KnativeServing does not install (it installs ${release.ingresses.join(", ")}): set spec.ingress.${ingress}.enabled: true`,
        });
      }
    }
  }
}

/**
 * Replicas set by high-availability or an override with a PodDisruptionBudget whose minAvailable needs every
 * one of them: no pod may ever be evicted, so every node drain blocks (knative/operator#1701). A warning.
 */
function checkDrainBlockingBudgets(resource: KnativeResource, context: CheckContext): void {
  const { spec } = resource;
  const overrides = [
    ...(spec.deployments ?? []).map((override, index) => ({ override, at: ["spec", "deployments", index] })),
    ...(spec.workloads ?? []).map((override, index) => ({ override, at: ["spec", "workloads", index] })),
  ];
  const budgetOverrides = (spec.podDisruptionBudgets ?? []).map((override, index) => ({ override, index }));
  for (const [name, budget] of context.target.podDisruptionBudgets) {
    const selector = (budget.spec as { selector?: { matchLabels?: Record<string, string> } } | undefined)
      ?.selector?.matchLabels;
    const workload = [...context.target.deployments.values()].find((deployment) => {
      const labels = podTemplateOf(deployment)?.metadata?.labels ?? {};
      return (
        selector !== undefined && Object.entries(selector).every(([key, value]) => labels[key] === value)
      );
    });
    if (!workload) continue;
    const pinned = overrides.findLast(
      ({ override }) => override.name === workload.metadata.name && override.replicas !== undefined,
    );
    const replicas = pinned?.override.replicas ?? spec["high-availability"]?.replicas;
    // One replica is what the release runs anyway, its PDB as it is: nothing this CR made worse.
    if (replicas === undefined || replicas < 2) continue;
    const overridden = budgetOverrides.findLast(
      ({ override }) => override.name === name && override.minAvailable !== undefined,
    );
    const minAvailable =
      overridden?.override.minAvailable ?? (budget.spec as { minAvailable?: unknown }).minAvailable;
    const required = podsRequired(minAvailable, replicas);
    if (required === undefined || required < replicas) continue;
    const field: FieldPath = overridden
      ? ["spec", "podDisruptionBudgets", overridden.index, "minAvailable"]
      : pinned
        ? [...pinned.at, "replicas"]
        : ["spec", "high-availability", "replicas"];
    context.findings.push({
      field,
      anchor: "value",
      severity: "warning",
      message:
        `PodDisruptionBudget ${name} keeps minAvailable ${String(minAvailable)} of ${replicas} ${workload.metadata.name} ` +
        `replicas, that is all of them: no pod may be evicted and every node drain blocks (knative/operator#1701); ` +
        `set spec.podDisruptionBudgets[].minAvailable below ${replicas} or run more replicas`,
    });
  }
}

/** minAvailable as a pod count: a percentage rounds up, as the disruption controller rounds it. */
function podsRequired(minAvailable: unknown, replicas: number): number | undefined {
  if (typeof minAvailable === "number") return minAvailable;
  const percent = typeof minAvailable === "string" ? /^(\d+)%$/.exec(minAvailable) : null;
  return percent ? Math.ceil((replicas * Number(percent[1])) / 100) : undefined;
}

/** The known name a typo away from `given` (case ignored), allowing more edits for longer names. */
function closest(given: string, known: readonly string[]): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(given.length / 4)));
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    const distance = editDistance(given.toLowerCase(), name.toLowerCase(), limit);
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** The annotation's entries: exact settings, or a prefix ending in `.*`. */
function allowedSettings(annotation: string | undefined): (setting: string) => boolean {
  const entries = (annotation ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  return (setting) =>
    entries.some(
      (entry) => entry === setting || (entry.endsWith(".*") && setting.startsWith(entry.slice(0, -1))),
    );
}

/**
 * Where a finding is written: the field of the CR's document, or, for a CR a placement made, the template's
 * field (or the last override patch that writes it). `document` is the parsed document `desired` came from
 * (the file's first line when it is not at hand).
 */
function settingsDiagnostic(
  desired: DesiredResource,
  finding: SettingsFinding,
  document: Pick<SourceDocument, "ast" | "lineCounter" | "value"> | undefined,
): Diagnostic {
  if (!document) {
    return {
      path: desired.path,
      line: desired.line,
      column: 1,
      field: formatFieldPath(finding.field),
      message: finding.message,
      ...severityOf(finding),
    };
  }
  const field =
    isRecord(document.value) && isPlacementKind(document.value.kind)
      ? placementField(document.value, finding.field)
      : finding.field;
  return findingAt(desired.path, document, field, finding);
}

function findingAt(
  path: string,
  source: Pick<SourceDocument, "ast" | "lineCounter">,
  field: FieldPath,
  finding: SettingsFinding,
): Diagnostic {
  return {
    path,
    ...locateField(source, field, finding.anchor ?? "key"),
    field: formatFieldPath(field),
    message: finding.message,
    ...severityOf(finding),
  };
}

const severityOf = (finding: SettingsFinding) =>
  finding.severity === "warning" ? { severity: "warning" as const } : {};

/**
 * A CR field as the placement writes it: the last of the `applied` override patches (all when not known)
 * that sets it, else the template.
 */
function placementField(placement: object, field: FieldPath, applied?: readonly number[]): FieldPath {
  const specPath = field.slice(1);
  const overrides = ((placement as { spec?: { overrides?: unknown[] } }).spec?.overrides ?? []) as unknown[];
  for (let index = overrides.length - 1; index >= 0; index--) {
    if (applied && !applied.includes(index)) continue;
    const patch = isRecord(overrides[index]) ? (overrides[index] as { patch?: unknown }).patch : undefined;
    if (hasPath(patch, specPath)) return ["spec", "overrides", index, "patch", ...specPath];
  }
  return ["spec", "template", "spec", ...specPath];
}

/**
 * The settings check of placements whatever the clusters they select (validate without an inventory, where
 * a placement makes no CR): the template alone and the template with each override, as a cluster only that
 * override matches gets it. Each finding once, at the field that wrote it.
 */
export async function checkPlacementSettings(
  placements: readonly DeclaredPlacement[],
  releases: ReleaseLoader,
): Promise<Diagnostic[]> {
  const found = new Map<string, Diagnostic>();
  for (const declared of placements) {
    const { placement } = declared;
    const combinations = [[], ...(placement.spec.overrides ?? []).map((_, index) => [index])];
    for (const applied of combinations) {
      const merged = mergedSpec(declared, applied);
      if (merged.problems.length > 0) continue;
      const { name, namespace, annotations } = placement.metadata;
      const parsed = KnativeResourceSchema.safeParse({
        apiVersion: OPERATOR_API_VERSION,
        kind: PLACEMENT_KINDS[placement.kind],
        metadata: { name, namespace, ...(annotations && { annotations }) },
        spec: withEveryEventSource(merged.spec),
      });
      if (!parsed.success || installsFromUrls(parsed.data)) continue;
      const release = await releases.load(parsed.data).catch(() => undefined);
      if (!release) continue;
      for (const finding of checkSettings(parsed.data, release)) {
        const field = placementField(placement, finding.field, applied);
        const diagnostic = findingAt(declared.path, declared.source, field, finding);
        found.set(
          `${diagnostic.line}:${diagnostic.column}:${diagnostic.field}:${diagnostic.message}`,
          diagnostic,
        );
      }
    }
  }
  return [...found.values()];
}

/** spec.manifests and spec.additionalManifests are downloads: not fetched for a check. */
const installsFromUrls = (resource: KnativeResource) =>
  (resource.spec.manifests?.length ?? 0) > 0 || (resource.spec.additionalManifests?.length ?? 0) > 0;

/**
 * The settings check over every CR of a fleet model, as diagnostics at file:line:column. A CR whose release
 * cannot be loaded is left out (its version error is the version check's). `installedVersion` gives the
 * version a CR runs now, for the upgrade warnings. CRs that install from URLs (spec.manifests,
 * spec.additionalManifests) are not checked: loading them here would fetch on every sync.
 */
export async function checkFleetSettings(
  resources: readonly DesiredResource[],
  files: readonly FleetFile[],
  releases: ReleaseLoader,
  installedVersion: (resource: KnativeResource) => string | undefined = () => undefined,
): Promise<Diagnostic[]> {
  const diagnostics: Diagnostic[] = [];
  const documents = new Map<string, SourceDocument[]>();
  for (const desired of resources) {
    const resource: KnativeResource = desired.resource;
    if (installsFromUrls(resource)) continue;
    let release: Release;
    try {
      release = await releases.load(resource);
    } catch {
      continue;
    }
    const version = installedVersion(resource);
    const installed =
      version === undefined
        ? undefined
        : await releases.load(atVersion(resource, version)).catch(() => undefined);
    const findings = checkSettings(resource, release, installed);
    if (findings.length === 0) continue;
    let parsed = documents.get(desired.path);
    if (!parsed) {
      const text = files.find((file) => file.path === desired.path)?.text;
      parsed = text === undefined ? [] : parseYamlFile(desired.path, text).documents;
      documents.set(desired.path, parsed);
    }
    const document = parsed.find((candidate) => candidate.index === desired.documentIndex);
    diagnostics.push(...findings.map((finding) => settingsDiagnostic(desired, finding, document)));
  }
  return diagnostics;
}

/** The CR as it was at `version`: what the installed release is loaded from, ingresses included. */
function atVersion<T extends KnativeResource>(resource: T, version: string): T {
  return { ...resource, spec: { ...resource.spec, version } };
}
