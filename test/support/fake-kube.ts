import { KubeClient } from "../../src/kube/client.ts";
import { groupOf, isRecord, type KubeObject } from "../../src/kube/object.ts";
import { KubeApiError, RestClient, type RestRequest, type RestResponse } from "../../src/kube/rest.ts";

// An in-memory API server behind a real KubeClient, for unit tests of pure logic only (integration tests use
// the real sandbox). It serves discovery for the kinds it is told about, GET/LIST (label selectors),
// server-side apply (with dryRun=All), merge patch, DELETE (with the garbage collector's cascade through
// owner references) and POST of namespaces, and counts requests by method as the real RestClient does.
// Once told to (serveWatches), it serves watches too: the writes of put and remove, in order, from a list's
// resourceVersion.

const CLUSTER_SCOPED = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "CustomResourceDefinition",
  "MutatingWebhookConfiguration",
  "ValidatingWebhookConfiguration",
  "APIService",
  "PriorityClass",
]);

type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";
interface WatchEvent {
  version: number;
  type: WatchEventType;
  object: KubeObject;
}

interface Served {
  kind: string;
  resource: string;
  namespaced: boolean;
}

/** What a list or a watch of one resource, namespace and label selector holds: one rule for both. */
const scope =
  (apiVersion: string, served: Served, namespace: string | undefined, selector: string) =>
  (o: KubeObject): boolean =>
    o.kind === served.kind &&
    groupOf(o.apiVersion) === groupOf(apiVersion) &&
    (namespace === undefined || o.metadata.namespace === namespace) &&
    matches(o, selector);

class FakeRest extends RestClient {
  readonly store = new Map<string, KubeObject>();
  readonly served = new Map<string, Map<string, Served>>();
  /** Resources (plural, as in the path, or `namespace/plural`) whose requests the fake's RBAC refuses with 403. */
  readonly forbidden = new Set<string>();
  /** Whether watches are served; when not, a watch fails as one without a network does. */
  servesWatches = false;
  /** The resourceVersion of the last change made through FakeKube.put or remove. */
  private version = 1;
  /** Every change made through put and remove, in order; each open watch hears the new ones. */
  private readonly events: WatchEvent[] = [];
  /** The resourceVersion of each object's last change, by store key; "1" for one never changed. */
  private readonly versions = new Map<string, string>();
  readonly watchers = new Set<(event: WatchEvent) => void>();
  private uid = 0;

  constructor() {
    super({
      server: "https://127.0.0.1:6443",
      connect: () => Promise.reject(new Error("the fake API server has no network")),
    });
    this.serve("v1", "Namespace");
    this.serve("v1", "ConfigMap");
    this.serve("v1", "Secret");
    this.serve("discovery.k8s.io/v1", "EndpointSlice");
  }

  serve(apiVersion: string, kind: string): void {
    const kinds = this.served.get(apiVersion) ?? new Map<string, Served>();
    kinds.set(kind, { kind, resource: `${kind.toLowerCase()}s`, namespaced: !CLUSTER_SCOPED.has(kind) });
    this.served.set(apiVersion, kinds);
  }

  override async request<T>(req: RestRequest): Promise<RestResponse<T>> {
    this.requestCounts.set(req.method, (this.requestCounts.get(req.method) ?? 0) + 1);
    const answer = this.answer(req);
    return { status: 200, body: answer as T };
  }

  private answer(req: RestRequest): unknown {
    const route = this.route(req.path);
    if (route.discovery) {
      const kinds = this.served.get(route.apiVersion);
      if (!kinds) throw notFound(req, "the group-version is not served");
      return { resources: [...kinds.values()].map((k) => ({ name: k.resource, ...k })) };
    }
    const { apiVersion, served, namespace, name } = route;
    this.authorize(req.method, req.path, served.resource, namespace);
    const key = (n: string) => `${groupOf(apiVersion)}/${served.kind}/${namespace ?? ""}/${n}`;
    switch (req.method) {
      case "GET": {
        if (name) return this.store.get(key(name)) ?? throwing(notFound(req, "not found"));
        const selected = scope(apiVersion, served, namespace, String(req.query?.labelSelector ?? ""));
        const listed = structuredClone([...this.store.values()].filter(selected));
        // As the API server's: an informer tells a changed object from an unchanged one by it.
        if (this.servesWatches) {
          for (const o of listed) o.metadata.resourceVersion ??= this.versions.get(storeKey(o)) ?? "1";
        }
        return { items: listed, metadata: { resourceVersion: String(this.version) } };
      }
      case "POST": {
        const body = req.body as KubeObject;
        const created = this.stamp(structuredClone(body), undefined);
        if (this.store.has(key(created.metadata.name!))) throw conflict(req);
        this.store.set(key(created.metadata.name!), created);
        return created;
      }
      case "PATCH": {
        const current = this.store.get(key(name!));
        const merged =
          req.contentType === "application/merge-patch+json"
            ? mergePatch(current ?? throwing(notFound(req, "not found")), req.body)
            : structuredClone(req.body as KubeObject);
        const after = this.stamp(merged, current);
        if (req.query?.dryRun !== "All") this.store.set(key(name!), after);
        return after;
      }
      case "DELETE": {
        const current = this.store.get(key(name!)) ?? throwing(notFound(req, "not found"));
        this.store.delete(key(name!));
        this.collect(String(current.metadata.uid));
        return { kind: "Status", status: "Success" };
      }
      default:
        throw new KubeApiError(req.method, req.path, 405, "MethodNotAllowed", "not served by the fake");
    }
  }

  /** A watch from `resourceVersion`: the changes after it, then each new one, until the watcher aborts. */
  override async stream(
    path: string,
    query: RestRequest["query"],
    onLine: (value: unknown) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    if (!this.servesWatches) return super.stream(path, query, onLine, signal);
    const route = this.route(path);
    if (route.discovery) throw new KubeApiError("GET", path, 405, "MethodNotAllowed", "not a resource");
    const { apiVersion, served, namespace } = route;
    this.authorize("GET", path, served.resource, namespace);
    const selected = scope(apiVersion, served, namespace, String(query?.labelSelector ?? ""));
    const tell = ({ type, object }: WatchEvent) => {
      if (!signal?.aborted && selected(object)) onLine({ type, object: structuredClone(object) });
    };
    const from = Number(query?.resourceVersion ?? 0);
    for (const event of this.events) if (event.version > from) tell(event);
    await new Promise<void>((resolve) => {
      const end = () => {
        this.watchers.delete(tell);
        resolve();
      };
      this.watchers.add(tell);
      if (signal?.aborted) end();
      else signal?.addEventListener("abort", end, { once: true });
    });
  }

  /** Records a change for the watches, the object stamped with its resourceVersion. */
  emit(key: string, type: WatchEventType, object: KubeObject): void {
    if (!this.servesWatches) return;
    this.version++;
    this.versions.set(key, String(this.version));
    const event: WatchEvent = {
      version: this.version,
      type,
      object: structuredClone({
        ...object,
        metadata: { ...object.metadata, resourceVersion: String(this.version) },
      }),
    };
    this.events.push(event);
    for (const watcher of this.watchers) watcher(event);
  }

  private authorize(method: string, path: string, resource: string, namespace: string | undefined): void {
    if (this.forbidden.has(resource) || (namespace && this.forbidden.has(`${namespace}/${resource}`))) {
      throw new KubeApiError(method, path, 403, "Forbidden", `${resource} is forbidden`);
    }
  }

  /** The garbage collector: objects owned by a deleted uid go too. */
  private collect(uid: string): void {
    for (const [key, object] of this.store) {
      if (object.metadata.ownerReferences?.some((ref) => ref.uid === uid)) {
        this.store.delete(key);
        this.collect(String(object.metadata.uid));
      }
    }
  }

  private stamp(object: KubeObject, current: KubeObject | undefined): KubeObject {
    object.metadata.uid = current?.metadata.uid ?? `uid-${++this.uid}`;
    object.metadata.generation = Number(current?.metadata.generation ?? 0) + 1;
    if (object.status === undefined && current?.status !== undefined) object.status = current.status;
    if (object.kind === "CustomResourceDefinition") {
      object.status = { conditions: [{ type: "Established", status: "True" }] };
    }
    return object;
  }

  private route(
    path: string,
  ):
    | { discovery: true; apiVersion: string }
    | { discovery: false; apiVersion: string; served: Served; namespace?: string; name?: string } {
    const parts = path.split("/").filter(Boolean);
    const [apiVersion, rest] =
      parts[0] === "api" ? [parts[1]!, parts.slice(2)] : [`${parts[1]}/${parts[2]}`, parts.slice(3)];
    if (rest.length === 0) return { discovery: true, apiVersion };
    const [namespace, tail] =
      rest[0] === "namespaces" && rest.length > 2 ? [rest[1], rest.slice(2)] : [undefined, rest];
    const served = [...(this.served.get(apiVersion)?.values() ?? [])].find((k) => k.resource === tail[0]);
    if (!served) throw new KubeApiError("GET", path, 404, "NotFound", "resource not served");
    return { discovery: false, apiVersion, served, namespace, name: tail[1] };
  }
}

/** An in-memory cluster with a real KubeClient in front of it. */
export class FakeKube {
  private readonly rest = new FakeRest();
  readonly client = new KubeClient(this.rest);

  /** Serves every kind of these objects (as a cluster with their CRDs installed would). */
  serveKindsOf(objects: readonly KubeObject[]): this {
    for (const o of objects) this.rest.serve(o.apiVersion, o.kind);
    return this;
  }

  objects(): KubeObject[] {
    return [...this.rest.store.values()];
  }

  find(kind: string, name: string): KubeObject | undefined {
    return this.objects().find((o) => o.kind === kind && o.metadata.name === name);
  }

  /** Serves watches of every kind it serves (see FakeRest.stream). */
  serveWatches(): this {
    this.rest.servesWatches = true;
    return this;
  }

  /** The watches open now. */
  openWatches(): number {
    return this.rest.watchers.size;
  }

  /** Stores an object as it is, as someone else's write would. */
  put(object: KubeObject): void {
    const key = storeKey(object);
    const existed = this.rest.store.has(key);
    this.rest.store.set(key, object);
    this.rest.emit(key, existed ? "MODIFIED" : "ADDED", object);
  }

  /** Removes an object without a request (and without the garbage collector). */
  remove(kind: string, name: string): void {
    for (const [key, object] of this.rest.store) {
      if (object.kind === kind && object.metadata.name === name) {
        this.rest.store.delete(key);
        this.rest.emit(key, "DELETED", object);
      }
    }
  }

  /**
   * Every Deployment reports Available for its current generation, and every Service with a selector has an
   * EndpointSlice with one ready endpoint, as a healthy cluster has.
   */
  makeDeploymentsAvailable(): void {
    this.makeServicesServed();
    for (const d of this.objects().filter((o) => o.kind === "Deployment")) {
      const replicas = Number(isRecord(d.spec) ? (d.spec.replicas ?? 1) : 1);
      d.status = {
        observedGeneration: d.metadata.generation,
        replicas,
        updatedReplicas: replicas,
        availableReplicas: replicas,
        conditions: [{ type: "Available", status: "True" }],
      };
    }
  }

  /** Every Service with a selector gets an EndpointSlice with one ready endpoint (the EndpointSlice controller). */
  makeServicesServed(): void {
    for (const service of this.objects().filter((o) => o.kind === "Service")) {
      if (!isRecord(service.spec) || !isRecord(service.spec.selector)) continue;
      const { name, namespace } = service.metadata;
      this.put({
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: `${name}-fake`, namespace, labels: { "kubernetes.io/service-name": name! } },
        addressType: "IPv4",
        endpoints: [{ addresses: ["10.0.0.1"], conditions: { ready: true } }],
      });
    }
  }

  /**
   * The fake's RBAC refuses every request to this resource (plural, as in the path) with 403: in `namespace`
   * only when given (a namespaced Role missing there).
   */
  forbid(resource: string, namespace?: string): void {
    this.rest.forbidden.add(namespace === undefined ? resource : `${namespace}/${resource}`);
  }

  /** Undoes forbid (the Role granted at last). */
  allow(resource: string, namespace?: string): void {
    this.rest.forbidden.delete(namespace === undefined ? resource : `${namespace}/${resource}`);
  }

  /** Requests received, by HTTP method. */
  requests(): { reads: number; writes: number } {
    const counts = this.rest.requestCounts;
    const reads = counts.get("GET") ?? 0;
    const total = [...counts.values()].reduce((n, c) => n + c, 0);
    return { reads, writes: total - reads };
  }

  resetCounts(): void {
    this.rest.requestCounts.clear();
  }
}

const storeKey = ({ apiVersion, kind, metadata }: KubeObject): string =>
  `${groupOf(apiVersion)}/${kind}/${metadata.namespace ?? ""}/${metadata.name}`;

/** Equality (`k=v`), set (`k in (a,b)`) and existence (`k`) terms, joined by commas outside parentheses. */
function matches(object: KubeObject, selector: string): boolean {
  if (!selector) return true;
  const labels = object.metadata.labels ?? {};
  return (selector.match(/[^,(]+(\([^)]*\))?/g) ?? []).every((raw) => {
    const term = raw.trim();
    const set = /^(\S+)\s+in\s+\((.*)\)$/.exec(term);
    if (set) return set[2]!.split(",").some((v) => labels[set[1]!] === v.trim());
    if (!term.includes("=")) return labels[term] !== undefined;
    const [k, v] = term.split("=");
    return labels[k!] === v;
  });
}

function mergePatch(target: unknown, patch: unknown): KubeObject {
  const merge = (t: unknown, p: unknown): unknown => {
    if (!isRecord(p)) return p;
    const out: Record<string, unknown> = isRecord(t) ? { ...t } : {};
    for (const [k, v] of Object.entries(p)) {
      if (v === null) delete out[k];
      else out[k] = merge(out[k], v);
    }
    return out;
  };
  return merge(structuredClone(target), patch) as KubeObject;
}

const notFound = (req: RestRequest, message: string) =>
  new KubeApiError(req.method, req.path, 404, "NotFound", message);
const conflict = (req: RestRequest) => new KubeApiError(req.method, req.path, 409, "AlreadyExists", "exists");
function throwing(err: Error): never {
  throw err;
}
