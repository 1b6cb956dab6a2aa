import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient, Selection } from "./client.ts";
import { type KubeObject, nameOf } from "./object.ts";

export type InformerEvent = "ADDED" | "MODIFIED" | "DELETED";
export type InformerHandler = (event: InformerEvent, object: KubeObject, previous?: KubeObject) => void;

interface WatchEvent {
  type: InformerEvent | "BOOKMARK" | "ERROR";
  object: KubeObject & { code?: number };
}

/**
 * List-then-watch cache of one kind (client-go's reflector + store, small): a full list, then a watch
 * from its resourceVersion with bookmarks; on a dropped watch it resumes, on 410 Gone it lists again and
 * reports the differences, so handlers see every change at least once and the cache stays exact.
 */
export class Informer {
  private readonly client: KubeClient;
  private readonly apiVersion: string;
  private readonly kind: string;
  private readonly store = new Map<string, KubeObject>();
  private readonly handlers: InformerHandler[] = [];
  private readonly abort = new AbortController();
  private synced = false;
  private healthy = false;
  /** When the last full list returned (performance.now()): every change since was delivered, while healthy. */
  private listedAtMs = 0;
  private readonly syncWaiters: (() => void)[] = [];
  private readonly onError: (err: unknown) => void;
  /** One namespace (a namespaced Role is then enough), or every namespace when undefined. */
  private readonly namespace: string | undefined;
  /** Only the objects these selectors match are listed and watched. */
  private readonly selection: Selection;

  constructor(
    client: KubeClient,
    apiVersion: string,
    kind: string,
    onError: (err: unknown) => void = () => {},
    namespace?: string,
    selection: Selection = {},
  ) {
    this.client = client;
    this.apiVersion = apiVersion;
    this.kind = kind;
    this.onError = onError;
    this.namespace = namespace;
    this.selection = selection;
  }

  on(handler: InformerHandler): void {
    this.handlers.push(handler);
  }

  start(): void {
    void this.run();
  }

  stop(): void {
    this.abort.abort();
  }

  /** Whether the cache is current: listed, and no list or watch failed since (it is then being retried). */
  get current(): boolean {
    return this.healthy && !this.abort.signal.aborted;
  }

  /**
   * Since when (performance.now()) every change has been delivered: the last full list, while `current`;
   * undefined when it is not. A watch that broke and resumed from its resourceVersion lost nothing; one
   * that had to list again may have missed an object made and removed in between.
   */
  get seamlessSinceMs(): number | undefined {
    return this.current ? this.listedAtMs : undefined;
  }

  /** Resolves after the first full list has been delivered. */
  hasSynced(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.store.get(storeKey(namespace, name));
  }

  list(): KubeObject[] {
    return [...this.store.values()];
  }

  private async run(): Promise<void> {
    let resourceVersion = "";
    let failures = 0;
    while (!this.abort.signal.aborted) {
      try {
        if (!resourceVersion) {
          resourceVersion = await this.relist();
          this.listedAtMs = performance.now();
        }
        this.healthy = true;
        if (!this.synced) {
          this.synced = true;
          for (const resolve of this.syncWaiters.splice(0)) resolve();
        }
        if (this.abort.signal.aborted) return; // a handler of the list stopped it: no watch is opened
        resourceVersion = await this.watch(resourceVersion);
        failures = 0;
      } catch (err) {
        if (this.abort.signal.aborted) return;
        this.healthy = false;
        this.onError(err);
        failures++;
        resourceVersion = "";
        await sleep(Math.min(500 * 2 ** failures, 30_000), undefined, { signal: this.abort.signal }).catch(
          () => {},
        );
      }
    }
  }

  private async relist(): Promise<string> {
    const { items, resourceVersion } = await this.client.list(this.apiVersion, this.kind, {
      namespace: this.namespace,
      ...this.selection,
    });
    const seen = new Set<string>();
    for (const item of items) {
      const key = storeKey(item.metadata.namespace, nameOf(item));
      seen.add(key);
      this.deliver(
        item.metadata.resourceVersion === this.store.get(key)?.metadata.resourceVersion
          ? undefined
          : "MODIFIED",
        item,
      );
    }
    for (const [key, object] of this.store) {
      if (!seen.has(key)) this.deliver("DELETED", object);
    }
    return resourceVersion;
  }

  /** Watches until the server ends the stream; returns the resourceVersion to resume from ("" = relist). */
  private async watch(from: string): Promise<string> {
    let resourceVersion = from;
    const path = await this.client.path(this.apiVersion, this.kind, this.namespace);
    await this.client.rest.stream(
      path,
      { watch: 1, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: 300, ...this.selection },
      (line) => {
        const event = line as WatchEvent;
        if (event.type === "ERROR") {
          resourceVersion = ""; // 410 Gone or similar: start over with a list
          return;
        }
        resourceVersion = String(event.object.metadata.resourceVersion ?? resourceVersion);
        if (event.type !== "BOOKMARK")
          this.deliver(event.type, { ...event.object, apiVersion: this.apiVersion, kind: this.kind });
      },
      this.abort.signal,
    );
    return resourceVersion;
  }

  private deliver(type: InformerEvent | undefined, object: KubeObject): void {
    if (!type) return;
    const key = storeKey(object.metadata.namespace, nameOf(object));
    const previous = this.store.get(key);
    if (type === "DELETED") this.store.delete(key);
    else this.store.set(key, object);
    const effective: InformerEvent = type === "DELETED" ? "DELETED" : previous ? "MODIFIED" : "ADDED";
    for (const handler of this.handlers) handler(effective, object, previous);
  }
}

const storeKey = (namespace: string | undefined, name: string): string => `${namespace ?? ""}/${name}`;
