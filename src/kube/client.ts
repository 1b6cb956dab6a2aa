import { groupOf, type KubeObject } from "./object.ts";
import { isNotFound, KubeApiError, type RestClient } from "./rest.ts";

/** Where a kind lives on the API server: its plural resource name and whether it is namespaced. */
interface ResourceInfo {
  resource: string;
  namespaced: boolean;
}

interface ApiResourceList {
  resources: { name: string; kind: string; namespaced: boolean }[];
}

interface ListResult {
  items: KubeObject[];
  resourceVersion: string;
}

/** Server-side selection of a list or watch: label and field selectors, in the API's query syntax. */
export interface Selection {
  labelSelector?: string;
  fieldSelector?: string;
}

/** The one field manager knative-fleet writes with: any other one on its objects is someone else. */
export const FIELD_MANAGER = "knative-fleet";

/**
 * For a write whose caller reads nothing back: the answer is a Table row without the object (1-1.5 KB)
 * instead of the whole object, which for a release's CRD is over 100 KB (its last-applied annotation
 * repeats it, so even its metadata is 60 KB). Receiving and parsing those answers was a large part of an
 * install's CPU. A server that cannot convert sends the object (the Accept header's second choice); an
 * error is a Status as ever.
 */
const WITHOUT_COPY = {
  accept: "application/json;as=Table;g=meta.k8s.io;v=v1,application/json",
  query: { includeObject: "None" },
} as const;

type ApplyOptions = { dryRun?: boolean; subresource?: "status"; force?: boolean; fieldManager?: string };

/**
 * Unstructured Kubernetes client: discovery-based paths, server-side apply with one field manager, list,
 * delete, status. Discovery is cached per group-version and refreshed on a miss (CRDs appear mid-install).
 */
export class KubeClient {
  readonly rest: RestClient;
  private readonly discovery = new Map<string, Promise<Map<string, ResourceInfo>>>();

  constructor(rest: RestClient) {
    this.rest = rest;
  }

  async resourceInfo(apiVersion: string, kind: string): Promise<ResourceInfo> {
    const found = (await this.groupVersion(apiVersion)).get(kind);
    if (found) return found;
    this.discovery.delete(apiVersion); // a CRD may have been established since the last look
    const refreshed = (await this.groupVersion(apiVersion)).get(kind);
    if (!refreshed) {
      throw new KubeApiError(
        "GET",
        apiPrefix(apiVersion),
        404,
        "NoKindMatch",
        `no kind ${kind} is served in ${apiVersion}`,
      );
    }
    return refreshed;
  }

  /** Forgets discovery for a group-version (after its CRD was installed or removed). */
  forgetDiscovery(apiVersion?: string): void {
    if (apiVersion) this.discovery.delete(apiVersion);
    else this.discovery.clear();
  }

  async path(apiVersion: string, kind: string, namespace?: string, name?: string): Promise<string> {
    const info = await this.resourceInfo(apiVersion, kind);
    const ns = info.namespaced && namespace ? `/namespaces/${namespace}` : "";
    return `${apiPrefix(apiVersion)}${ns}/${info.resource}${name ? `/${name}` : ""}`;
  }

  async get(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
  ): Promise<KubeObject | undefined> {
    try {
      return (
        await this.rest.request<KubeObject>({
          method: "GET",
          path: await this.path(apiVersion, kind, namespace, name),
        })
      ).body;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(
    apiVersion: string,
    kind: string,
    options: { namespace?: string } & Selection = {},
  ): Promise<ListResult> {
    const path = await this.path(apiVersion, kind, options.namespace);
    const res = await this.rest.request<{ items: KubeObject[]; metadata: { resourceVersion: string } }>({
      method: "GET",
      path,
      query: { labelSelector: options.labelSelector, fieldSelector: options.fieldSelector },
    });
    // Lists omit apiVersion/kind on items; put them back so items are whole objects.
    const items = res.body.items.map((item) => ({ ...item, apiVersion, kind }));
    return { items, resourceVersion: res.body.metadata.resourceVersion };
  }

  /**
   * Server-side apply (field manager knative-fleet, conflicts forced: we are the source of truth). With
   * `force: false` a field another manager owns is a 409 conflict instead.
   */
  async apply(object: KubeObject, options: ApplyOptions = {}): Promise<KubeObject> {
    return (await this.sendApply(object, options)).body;
  }

  /** `apply` for a caller that reads nothing back: the server is asked not to send the object (WITHOUT_COPY). */
  async write(object: KubeObject, options: ApplyOptions = {}): Promise<void> {
    await this.sendApply(object, options, WITHOUT_COPY);
  }

  private async sendApply(object: KubeObject, options: ApplyOptions, answer?: typeof WITHOUT_COPY) {
    const { apiVersion, kind, metadata } = object;
    const base = await this.path(apiVersion, kind, metadata.namespace, metadata.name);
    return this.rest.request<KubeObject>({
      method: "PATCH",
      path: options.subresource ? `${base}/${options.subresource}` : base,
      query: {
        fieldManager: options.fieldManager ?? FIELD_MANAGER,
        force: options.force ?? true,
        dryRun: options.dryRun ? "All" : undefined,
        ...answer?.query,
      },
      body: object,
      contentType: "application/apply-patch+yaml",
      ...(answer ? { accept: answer.accept } : {}),
    });
  }

  async mergePatch(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    patch: unknown,
  ) {
    const path = await this.path(apiVersion, kind, namespace, name);
    return (
      await this.rest.request<KubeObject>({
        method: "PATCH",
        path,
        body: patch,
        contentType: "application/merge-patch+json",
      })
    ).body;
  }

  /** Deletes; a missing object counts as deleted. Returns false when it was already gone. */
  async delete(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    propagationPolicy: "Background" | "Foreground" | "Orphan" = "Background",
  ): Promise<boolean> {
    try {
      await this.rest.request({
        method: "DELETE",
        path: await this.path(apiVersion, kind, namespace, name),
        body: { kind: "DeleteOptions", apiVersion: "v1", propagationPolicy },
        // A deleted CRD (and any object deleted with finalizers) would be answered with the whole object.
        query: WITHOUT_COPY.query,
        accept: WITHOUT_COPY.accept,
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  private groupVersion(apiVersion: string): Promise<Map<string, ResourceInfo>> {
    let entry = this.discovery.get(apiVersion);
    if (!entry) {
      entry = this.rest
        .request<ApiResourceList>({ method: "GET", path: apiPrefix(apiVersion) })
        .then((res) => {
          const byKind = new Map<string, ResourceInfo>();
          for (const r of res.body.resources) {
            if (!r.name.includes("/")) byKind.set(r.kind, { resource: r.name, namespaced: r.namespaced });
          }
          return byKind;
        })
        .catch((err: unknown) => {
          if (isNotFound(err)) return new Map<string, ResourceInfo>(); // group-version not served (yet)
          this.discovery.delete(apiVersion);
          throw err;
        });
      this.discovery.set(apiVersion, entry);
    }
    return entry;
  }
}

const apiPrefix = (apiVersion: string): string =>
  groupOf(apiVersion) ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
