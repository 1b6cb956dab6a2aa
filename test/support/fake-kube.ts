import { KubeClient } from "../../src/kube/client.ts";
import { groupOf, isRecord, type KubeObject } from "../../src/kube/object.ts";
import { KubeApiError, RestClient, type RestRequest, type RestResponse } from "../../src/kube/rest.ts";

// An in-memory API server behind a real KubeClient, for unit tests of pure logic only (integration tests use
// the real sandbox). It serves discovery for the kinds it is told about, GET/LIST (label selectors),
// server-side apply (with dryRun=All), merge patch, DELETE (with the garbage collector's cascade through
// owner references) and POST of namespaces, and counts requests by method as the real RestClient does.

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

interface Served {
  kind: string;
  resource: string;
  namespaced: boolean;
}

class FakeRest extends RestClient {
  readonly store = new Map<string, KubeObject>();
  readonly served = new Map<string, Map<string, Served>>();
  /** Resources (plural, as in the path) whose requests the fake's RBAC refuses with 403. */
  readonly forbidden = new Set<string>();
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
    if (this.forbidden.has(served.resource)) {
      throw new KubeApiError(req.method, req.path, 403, "Forbidden", `${served.resource} is forbidden`);
    }
    const key = (n: string) => `${groupOf(apiVersion)}/${served.kind}/${namespace ?? ""}/${n}`;
    switch (req.method) {
      case "GET": {
        if (name) return this.store.get(key(name)) ?? throwing(notFound(req, "not found"));
        const selector = String(req.query?.labelSelector ?? "");
        const items = [...this.store.values()].filter(
          (o) =>
            o.kind === served.kind &&
            groupOf(o.apiVersion) === groupOf(apiVersion) &&
            (namespace === undefined || o.metadata.namespace === namespace) &&
            matches(o, selector),
        );
        return { items: structuredClone(items), metadata: { resourceVersion: "1" } };
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

  /** Stores an object as it is, as someone else's write would. */
  put(object: KubeObject): void {
    const { apiVersion, kind, metadata } = object;
    this.rest.store.set(
      `${groupOf(apiVersion)}/${kind}/${metadata.namespace ?? ""}/${metadata.name}`,
      object,
    );
  }

  /** Removes an object without a request (and without the garbage collector). */
  remove(kind: string, name: string): void {
    for (const [key, object] of this.rest.store) {
      if (object.kind === kind && object.metadata.name === name) this.rest.store.delete(key);
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

  /** The fake's RBAC refuses every request to this resource (plural, as in the path) with 403. */
  forbid(resource: string): void {
    this.rest.forbidden.add(resource);
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
