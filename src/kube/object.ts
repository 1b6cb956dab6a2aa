// The one object model of the whole program: what render emits, apply sends, the informer caches and plan
// diffs. One type, one identity (`objectKey`), so prune, dedupe and inventory can never disagree.

export type StringMap = Record<string, string>;

export interface ObjectMeta {
  /** Unset only in a manifest that asks the server to generate it (`generateName`). */
  name?: string;
  generateName?: string;
  namespace?: string;
  labels?: StringMap;
  annotations?: StringMap;
  ownerReferences?: OwnerReference[];
  [field: string]: unknown;
}

/**
 * An unstructured Kubernetes object: only the fields every object has are typed, the rest is kept as read.
 * Objects that come out of a release file or a render step are deeply frozen (a cached release is shared by
 * every reconcile); copy one (structuredClone) before changing it.
 */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** An object on a cluster: its apiVersion (to address it), kind, namespace ("" when cluster-scoped), name. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

/** The API group of an apiVersion: `apps/v1` -> `apps`, `v1` -> `` (core). */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/** The object's name, or its `generateName` prefix while the server has not named it yet. */
export const nameOf = (o: Pick<KubeObject, "metadata">): string =>
  o.metadata.name ?? o.metadata.generateName ?? "";

export const refOf = (o: KubeObject): ObjectRef => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  namespace: o.metadata.namespace ?? "",
  name: nameOf(o),
});

/**
 * `group/kind/namespace/name`: an object's identity, stable and sortable. The version is left out on
 * purpose: a kind served at a new version is still the same object.
 */
export const refKey = (r: ObjectRef): string => `${groupOf(r.apiVersion)}/${r.kind}/${r.namespace}/${r.name}`;
export const objectKey = (o: KubeObject): string => refKey(refOf(o));

/** `kind.group namespace/name`, for messages. */
export function describeRef(r: ObjectRef): string {
  const group = groupOf(r.apiVersion);
  return `${r.kind}${group ? `.${group}` : ""} ${r.namespace ? `${r.namespace}/` : ""}${r.name}`;
}

export const isCrd = (o: { kind: string; apiVersion: string }): boolean =>
  o.kind === "CustomResourceDefinition" && groupOf(o.apiVersion) === "apiextensions.k8s.io";

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function arrayOf(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The value at `path` below `value`, or undefined. */
export function field(value: unknown, ...path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (!isRecord(current)) return undefined;
    current = current[key];
  }
  return current;
}
