import { Worker } from "node:worker_threads";
import { formatDiagnostic } from "../fleet/diagnostic.ts";
import { parseYamlFile } from "../fleet/yaml-source.ts";
import { field, isRecord, type KubeObject, type StringMap } from "../kube/object.ts";
import type { ManifestFile } from "./files.ts";
import type { ParseAnswer } from "./parse-worker.ts";

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
  const { documents, diagnostics } = parseYamlFile(origin, text);
  if (diagnostics.length > 0) {
    throw new ManifestParseError(`invalid YAML: ${diagnostics.map(formatDiagnostic).join("; ")}`);
  }
  return documents.map((document) => {
    const value = document.value;
    if (!isManifest(value)) {
      const { line, column } = document.position;
      throw new ManifestParseError(
        `${origin}:${line}:${column}: not a Kubernetes object (apiVersion, kind and metadata.name or ` +
          "metadata.generateName are required)",
      );
    }
    return deepFreeze(value);
  });
}

/**
 * Young generation of the parsing thread: YAML parsing makes much short-lived garbage, and a small young
 * generation keeps it from growing the heap (and the process's RSS) by tens of MiB; the old generation bound
 * stops a hostile file. The worker's memory goes back to the system when it ends.
 */
const PARSE_WORKER_LIMITS = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 512 };
let parsing: Promise<unknown> = Promise.resolve();

/**
 * parseManifests over files, run in a worker thread, one batch at a time: the reconcile's event loop keeps
 * serving watches and probes meanwhile, and the parser's garbage stays out of the main heap, which only
 * receives the objects. The same errors as parseManifests.
 */
export function parseManifestFiles(files: readonly ManifestFile[]): Promise<readonly Manifest[]> {
  const run = parsing.then(() => parseInWorker(files));
  parsing = run.catch(() => {});
  return run;
}

async function parseInWorker(files: readonly ManifestFile[]): Promise<readonly Manifest[]> {
  // dist/ holds parse-worker.js, src/ (type stripping) parse-worker.ts.
  const script = new URL(`./parse-worker${import.meta.url.endsWith(".ts") ? ".ts" : ".js"}`, import.meta.url);
  const worker = new Worker(script, { workerData: { files }, resourceLimits: PARSE_WORKER_LIMITS });
  try {
    const answer = await new Promise<ParseAnswer>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
      worker.once("exit", (code) => reject(new Error(`the manifest parser stopped (exit code ${code})`)));
    });
    if ("error" in answer)
      throw answer.parseError ? new ManifestParseError(answer.error) : new Error(answer.error);
    return answer.manifests.map(deepFreeze);
  } finally {
    await worker.terminate();
  }
}

function isManifest(value: unknown): value is Manifest {
  if (!isRecord(value) || !isRecord(value.metadata)) return false;
  const { apiVersion, kind, metadata } = value;
  const named = typeof metadata.name === "string" || typeof metadata.generateName === "string";
  return (
    typeof apiVersion === "string" && apiVersion !== "" && typeof kind === "string" && kind !== "" && named
  );
}

function deepFreeze<T>(value: T): T {
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
