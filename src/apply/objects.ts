/** An unstructured Kubernetes object as it travels through render, apply and plan. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
    [field: string]: unknown;
  };
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

export const groupOf = (apiVersion: string): string =>
  apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";

export const refOf = (o: KubeObject): ObjectRef => ({
  apiVersion: o.apiVersion,
  kind: o.kind,
  namespace: o.metadata.namespace ?? "",
  name: o.metadata.name,
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
