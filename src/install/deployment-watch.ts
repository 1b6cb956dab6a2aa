import type { KnativeResource } from "../api/knative.ts";
import { formatIdentity, identityOf } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import { Informer, type InformerHandler } from "../kube/informer.ts";
import type { KubeObject } from "../kube/object.ts";
import { deploymentNamespaces, unavailableDeployments } from "./health.ts";

/** What a rollout watch needs of a list-then-watch cache (kube/informer.ts's Informer). */
interface DeploymentCache {
  on(handler: InformerHandler): void;
  start(): void;
  stop(): void;
  hasSynced(): Promise<void>;
  list(): KubeObject[];
}

/** Opens the cache of Deployments in one namespace of a cluster; `onError` is told when its list or watch fails. */
type OpenDeploymentCache = (
  client: KubeClient,
  namespace: string,
  onError: (err: unknown) => void,
) => DeploymentCache;

const openDeploymentInformer: OpenDeploymentCache = (client, namespace, onError) =>
  new Informer(client, "apps/v1", "Deployment", onError, namespace);

interface DeploymentWatchOptions {
  /** Re-checks a CR now: its last Deployment became Available, or a watch it relied on failed. */
  wake(resource: KnativeResource): void;
  /** After a watch of a cluster's namespace failed, that namespace is polled for this long before watching again. */
  fallbackMs: number;
  open?: OpenDeploymentCache;
  onWatchError?(cluster: string, namespace: string, err: unknown): void;
  now?(): number;
}

interface NamespaceWatch {
  cache: DeploymentCache;
  synced: boolean;
  /** CRs waiting on this watch, by identity. */
  waiters: Set<string>;
}

interface Waiter {
  resource: KnativeResource;
  cluster: string;
  /** The install's desired Deployments: all a wait needs of its desired objects, kept while it rolls out. */
  deployments: readonly KubeObject[];
  namespaces: string[];
  woken: boolean;
}

/**
 * The Deployments of installs that are rolling out, watched on their clusters, so a CR is re-checked the
 * moment its last Deployment becomes Available instead of at the next poll: one watch per cluster and
 * namespace, shared by every CR waiting there, stopped when none waits any more (a Ready install costs no
 * watch). A watch that fails is stopped, its CRs are woken, and that namespace goes back to polling every
 * --remote-deployments-poll-interval for `fallbackMs`.
 */
export class DeploymentWatches {
  private readonly options: DeploymentWatchOptions;
  private readonly open: OpenDeploymentCache;
  private readonly watches = new Map<string, NamespaceWatch>();
  private readonly waiters = new Map<string, Waiter>();
  private readonly failedUntil = new Map<string, number>();

  constructor(options: DeploymentWatchOptions) {
    this.options = options;
    this.open = options.open ?? openDeploymentInformer;
  }

  /**
   * The install's live Deployments from the watches' caches, when every namespace it has Deployments in is
   * watched and synced; undefined otherwise (the caller lists them).
   */
  cached(
    cluster: string,
    resource: KnativeResource,
    desired: readonly KubeObject[],
  ): KubeObject[] | undefined {
    const watches = deploymentNamespaces(resource, desired).map((ns) =>
      this.watches.get(watchKey(cluster, ns)),
    );
    if (watches.some((w) => !w?.synced)) return undefined;
    return watches.flatMap((w) => w!.cache.list());
  }

  /**
   * The CR waits for its Deployments: its namespaces are watched (started or joined), and it is woken once
   * when all of them are Available. False when a namespace is back on polling after a failed watch: the
   * caller re-checks after the poll interval.
   */
  await(
    cluster: string,
    client: KubeClient,
    resource: KnativeResource,
    desired: readonly KubeObject[],
  ): boolean {
    const namespaces = deploymentNamespaces(resource, desired);
    const now = this.options.now?.() ?? Date.now();
    if (namespaces.some((ns) => (this.failedUntil.get(watchKey(cluster, ns)) ?? 0) > now)) {
      this.release(resource);
      return false;
    }
    const key = formatIdentity(identityOf(resource));
    // The CR may have moved to another cluster: keep only the watches it still needs.
    this.leave(key, this.waiters.get(key)?.cluster === cluster ? namespaces : []);
    const deployments = desired.filter((o) => o.kind === "Deployment");
    this.waiters.set(key, { resource, cluster, deployments, namespaces, woken: false });
    for (const ns of namespaces) this.join(cluster, client, ns, key);
    this.check(key);
    return true;
  }

  /** The CR waits no more (Ready, failed, deleted): it leaves its watches; a watch nobody waits on stops. */
  release(resource: Pick<KnativeResource, "kind" | "metadata">): void {
    this.leave(formatIdentity(identityOf(resource)), []);
  }

  /** Every CR on a cluster `drop` names waits no more (another replica reconciles it now). */
  releaseClusters(drop: (cluster: string) => boolean): void {
    for (const [key, waiter] of this.waiters) if (drop(waiter.cluster)) this.leave(key, []);
  }

  /** How many watches run, for tests and metrics. */
  get watchCount(): number {
    return this.watches.size;
  }

  stop(): void {
    for (const watch of this.watches.values()) watch.cache.stop();
    this.watches.clear();
    this.waiters.clear();
  }

  private join(cluster: string, client: KubeClient, namespace: string, key: string): void {
    const wk = watchKey(cluster, namespace);
    let watch = this.watches.get(wk);
    if (!watch) {
      const cache = this.open(client, namespace, (err) => this.failed(cluster, namespace, err));
      const created: NamespaceWatch = { cache, synced: false, waiters: new Set() };
      watch = created;
      this.watches.set(wk, created);
      cache.on(() => {
        if (created.synced) for (const k of created.waiters) this.check(k);
      });
      cache.start();
      void cache.hasSynced().then(() => {
        if (this.watches.get(wk) !== created) return;
        created.synced = true;
        for (const k of created.waiters) this.check(k);
      });
    }
    watch.waiters.add(key);
  }

  /** Leaves every watch of the CR but those of `keep`; stops watches left without waiters. */
  private leave(key: string, keep: readonly string[]): void {
    const waiter = this.waiters.get(key);
    if (!waiter) return;
    this.waiters.delete(key);
    for (const ns of waiter.namespaces) {
      if (keep.includes(ns)) continue;
      const wk = watchKey(waiter.cluster, ns);
      const watch = this.watches.get(wk);
      if (!watch) continue;
      watch.waiters.delete(key);
      if (watch.waiters.size === 0) {
        watch.cache.stop();
        this.watches.delete(wk);
      }
    }
  }

  /** Wakes the CR once when every namespace it waits on is synced and all its Deployments are Available. */
  private check(key: string): void {
    const waiter = this.waiters.get(key);
    if (!waiter || waiter.woken) return;
    const live = this.cached(waiter.cluster, waiter.resource, waiter.deployments);
    if (!live || unavailableDeployments(waiter.deployments, live).length > 0) return;
    waiter.woken = true;
    this.options.wake(waiter.resource);
  }

  private failed(cluster: string, namespace: string, err: unknown): void {
    const wk = watchKey(cluster, namespace);
    const watch = this.watches.get(wk);
    if (!watch) return;
    this.options.onWatchError?.(cluster, namespace, err);
    watch.cache.stop();
    this.watches.delete(wk);
    this.failedUntil.set(wk, (this.options.now?.() ?? Date.now()) + this.options.fallbackMs);
    for (const key of watch.waiters) {
      const waiter = this.waiters.get(key);
      if (!waiter) continue;
      this.leave(key, []);
      this.options.wake(waiter.resource);
    }
  }
}

const watchKey = (cluster: string, namespace: string): string => `${cluster}\u0000${namespace}`;
