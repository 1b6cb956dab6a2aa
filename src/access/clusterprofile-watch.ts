import {
  CustomObjectsApi,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { ClusterProfileResource } from "./clusterprofile-version.ts";
import { causeText } from "./errors.ts";

const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

export type ClusterProfileEvent =
  | { type: "upsert"; object: KubernetesObject }
  | { type: "delete"; object: KubernetesObject };

/**
 * Lists and watches ClusterProfiles on the hub: one informer per allowed namespace (so a namespaced Role is
 * enough), or one for all namespaces. client-node's informer stops on the first error; this one starts it
 * again with backoff, and says whether its view is current (`live`) so readers know when to ask the hub.
 */
export class ClusterProfileWatch {
  readonly #scopes: WatchedScope[];
  readonly #logger: Logger;
  readonly #retryTimers = new Set<NodeJS.Timeout>();
  #stopped = false;

  constructor(
    hub: KubeConfig,
    resource: ClusterProfileResource,
    namespaces: readonly string[] | undefined,
    onEvent: (event: ClusterProfileEvent) => void,
    logger: Logger,
  ) {
    this.#logger = logger;
    const api = hub.makeApiClient(CustomObjectsApi);
    const { group, version, plural } = resource;
    const namespaceScopes: (string | undefined)[] = namespaces === undefined ? [undefined] : [...namespaces];
    this.#scopes = namespaceScopes.map((namespace) => {
      const path =
        namespace === undefined
          ? `/apis/${group}/${version}/${plural}`
          : `/apis/${group}/${version}/namespaces/${namespace}/${plural}`;
      const list = () =>
        (namespace === undefined
          ? api.listClusterCustomObject({ group, version, plural })
          : api.listNamespacedCustomObject({ group, version, namespace, plural })) as Promise<
          KubernetesListObject<KubernetesObject>
        >;
      const informer = makeInformer(hub, path, list);
      informer.on("add", (object) => onEvent({ type: "upsert", object }));
      informer.on("update", (object) => onEvent({ type: "upsert", object }));
      informer.on("delete", (object) => onEvent({ type: "delete", object }));
      // Down until its first list succeeds.
      const scope: WatchedScope = { informer, path, errors: 0, retryMs: FIRST_RETRY_MS, down: true };
      informer.on("error", (err) => this.#failed(scope, err));
      return scope;
    });
  }

  /** True while every informer has listed and is watching: its objects are the hub's, a moment late at most. */
  get live(): boolean {
    return !this.#stopped && this.#scopes.every((scope) => !scope.down);
  }

  /** Starts every informer; resolves once each has listed or failed (failed ones keep retrying). */
  async start(): Promise<void> {
    await Promise.all(this.#scopes.map((scope) => this.#start(scope)));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const timer of this.#retryTimers) clearTimeout(timer);
    this.#retryTimers.clear();
    await Promise.all(this.#scopes.map((scope) => scope.informer.stop()));
  }

  async #start(scope: WatchedScope): Promise<void> {
    if (this.#stopped) return;
    const errorsBefore = scope.errors;
    try {
      await scope.informer.start();
    } catch (err) {
      this.#failed(scope, err);
    }
    if (scope.errors !== errorsBefore || this.#stopped) return;
    if (errorsBefore > 0) this.#logger.info({ path: scope.path }, "ClusterProfile watch resumed");
    scope.down = false;
    scope.retryMs = FIRST_RETRY_MS;
  }

  // client-node's informer stops at its first error; it is started again with exponential backoff.
  #failed(scope: WatchedScope, err: unknown): void {
    scope.errors++;
    scope.down = true;
    if (this.#stopped) return;
    this.#logger.warn(
      { path: scope.path, err: causeText(err), retryInMs: scope.retryMs },
      "ClusterProfile watch failed; retrying",
    );
    const timer = setTimeout(() => {
      this.#retryTimers.delete(timer);
      void this.#start(scope);
    }, scope.retryMs);
    timer.unref();
    this.#retryTimers.add(timer);
    scope.retryMs = Math.min(scope.retryMs * 2, MAX_RETRY_MS);
  }
}

interface WatchedScope {
  informer: Informer<KubernetesObject>;
  path: string;
  errors: number;
  retryMs: number;
  down: boolean;
}
