import { setImmediate } from "node:timers/promises";
import { type Diagnostic, formatDiagnostic } from "../fleet/diagnostic.ts";
import { parseYamlDocuments } from "../fleet/yaml-source.ts";
import { field, isRecord, type KubeObject, type StringMap } from "../kube/object.ts";
import type { ManifestFile } from "./files.ts";

// Shared with the transformers, which read objects through these helpers.
export { arrayOf, field, groupOf, isRecord, type StringMap } from "../kube/object.ts";

/**
 * A release manifest: the program's one object type (`kube/object.ts`), named for where it comes from. Those
 * out of a source or a transformer are deeply frozen; copy one (structuredClone) before changing it.
 */
export type Manifest = KubeObject;

/** A render step: manifests in, new manifests out. The input is never mutated. */
export type Transformer = (manifests: readonly Manifest[]) => readonly Manifest[];

/** The step for a spec that asks for nothing. */
export const unchanged: Transformer = (manifests) => manifests;

export class ManifestParseError extends Error {
  override name = "ManifestParseError";
}

/** The CR asks for something the manifests cannot take (upstream marks InstallSucceeded False with it). */
export class RenderError extends Error {
  override name = "RenderError";
}

/**
 * The objects of a multi-document YAML file, read as Kubernetes reads manifests (YAML 1.1 scalars), deeply
 * frozen. Empty documents are skipped; anything that is not a Kubernetes object is an error naming `origin`.
 */
export function parseManifests(text: string, origin: string): readonly Manifest[] {
  return [...manifestDocuments(text, origin)];
}

/**
 * parseManifests one document at a time, so one syntax tree is alive at most. A file's YAML errors are
 * thrown after its last document, all together, as parseManifests reports them.
 */
function* manifestDocuments(text: string, origin: string): Generator<Manifest> {
  const diagnostics: Diagnostic[] = [];
  let notAnObject: string | undefined;
  for (const parsed of parseYamlDocuments(origin, text)) {
    diagnostics.push(...parsed.diagnostics);
    const value = parsed.document?.value;
    if (parsed.document === undefined || diagnostics.length > 0 || notAnObject !== undefined) continue;
    if (isManifest(value)) {
      yield deepFreeze(value);
      continue;
    }
    const { line, column } = parsed.document.position;
    notAnObject =
      `${origin}:${line}:${column}: not a Kubernetes object (apiVersion, kind and metadata.name or ` +
      "metadata.generateName are required)";
  }
  if (diagnostics.length > 0) {
    throw new ManifestParseError(`invalid YAML: ${diagnostics.map(formatDiagnostic).join("; ")}`);
  }
  if (notAnObject !== undefined) throw new ManifestParseError(notAnObject);
}

/** How long parsing may hold the event loop before it lets watches, probes and timers run. */
const PARSE_SLICE_MS = 10;
let parsing: Promise<unknown> = Promise.resolve();

/**
 * parseManifests over files, one batch at a time and one document at a time, giving the event loop back every
 * PARSE_SLICE_MS: a release (1-2 MB of YAML) parsed whole would hold all its syntax trees at once, tens of MiB
 * of peak RSS for a few MiB of objects, and would stall the reconciles and probes meanwhile. The same errors as
 * parseManifests.
 */
export function parseManifestFiles(files: readonly ManifestFile[]): Promise<readonly Manifest[]> {
  const run = parsing.then(() => parseInSlices(files));
  parsing = run.catch(() => {});
  return run;
}

async function parseInSlices(files: readonly ManifestFile[]): Promise<readonly Manifest[]> {
  const manifests: Manifest[] = [];
  let sliceStart = performance.now();
  for (const file of files) {
    for (const manifest of manifestDocuments(file.text, file.origin)) {
      manifests.push(manifest);
      if (performance.now() - sliceStart >= PARSE_SLICE_MS) {
        await setImmediate();
        sliceStart = performance.now();
      }
    }
  }
  return manifests;
}

/** An object Kubernetes would take: apiVersion, kind, and metadata.name or metadata.generateName. */
export function isManifest(value: unknown): value is Manifest {
  if (!isRecord(value) || !isRecord(value.metadata)) return false;
  const { apiVersion, kind, metadata } = value;
  const named = typeof metadata.name === "string" || typeof metadata.generateName === "string";
  return (
    typeof apiVersion === "string" && apiVersion !== "" && typeof kind === "string" && kind !== "" && named
  );
}

export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/**
 * `manifests` with `edit` applied to a deep copy of each manifest `selects` picks. The others are passed
 * through as they are, so an unchanged object stays the same object and the input is never mutated.
 */
export function updateWhere(
  manifests: readonly Manifest[],
  selects: (manifest: Manifest) => boolean,
  edit: (copy: Manifest) => void,
): readonly Manifest[] {
  return manifests.map((manifest) => {
    if (!selects(manifest)) return manifest;
    const copy = structuredClone(manifest);
    edit(copy);
    return deepFreeze(copy);
  });
}

/** Sets entries of a ConfigMap's data, keeping its other keys. Edits `configMap` in place: call it on a copy. */
export function setConfigMapData(configMap: Manifest, entries: StringMap): void {
  configMap.data = { ...(isRecord(configMap.data) ? configMap.data : {}), ...entries };
}

/** Sets `map[key]`, or removes the key when `value` is undefined (JSON has no undefined). */
export function setOrDelete<T>(map: Record<string, T>, key: string, value: T | undefined): void {
  if (value === undefined) delete map[key];
  else map[key] = value;
}

/** `target` with the entries of `entries` added or replaced; a new map, absent entries leave it as it was. */
export function mergeStringMaps(
  target: StringMap | undefined,
  entries: StringMap | undefined,
): StringMap | undefined {
  if (!entries || Object.keys(entries).length === 0) return target;
  return { ...target, ...entries };
}

/** `map[key]` for own entries only: a spec map is user data, `constructor` is not a key of it. */
export function lookup<T>(map: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return map && Object.hasOwn(map, key) ? map[key] : undefined;
}

// Pod-carrying workloads, typed only as far as the transformers read and write them.

export interface EnvVar {
  name: string;
  value?: string;
  [field: string]: unknown;
}

export type ResourceList = Record<string, string | number>;

export interface Container {
  name: string;
  image?: string;
  env?: EnvVar[];
  resources?: { limits?: ResourceList; requests?: ResourceList; [field: string]: unknown };
  readinessProbe?: Record<string, unknown>;
  livenessProbe?: Record<string, unknown>;
  volumeMounts?: Record<string, unknown>[];
  [field: string]: unknown;
}

export interface PodSpec {
  containers: Container[];
  imagePullSecrets?: { name?: string }[];
  volumes?: Record<string, unknown>[];
  [field: string]: unknown;
}

export interface PodTemplate {
  metadata?: { labels?: StringMap; annotations?: StringMap; [field: string]: unknown };
  spec: PodSpec;
}

const POD_TEMPLATE_KINDS = new Set(["Deployment", "StatefulSet", "DaemonSet", "Job"]);

/** The pod template of a Deployment, StatefulSet, DaemonSet or Job, if the manifest has one. */
export function podTemplateOf(manifest: Manifest): PodTemplate | undefined {
  if (!POD_TEMPLATE_KINDS.has(manifest.kind)) return undefined;
  const template = field(manifest.spec, "template");
  const hasContainers = Array.isArray(field(template, "spec", "containers"));
  return hasContainers ? (template as PodTemplate) : undefined;
}
