import type { InformerHandler } from "../../src/kube/informer.ts";
import type { KubeObject } from "../../src/kube/object.ts";

/**
 * A list-then-watch cache driven by hand, for unit tests of what is built over kube/informer.ts's Informer:
 * the test delivers the first list (`sync`) and each later change (`put`), and sees whether it was started
 * or stopped. `opened` is what it was opened for (a namespace, a selection).
 */
export class HandCache<Opened> {
  readonly objects = new Map<string, KubeObject>();
  readonly handlers: InformerHandler[] = [];
  started = false;
  stopped = false;
  readonly opened: Opened;
  readonly onError: (err: unknown) => void;
  private syncedResolve: (() => void) | undefined;
  private readonly synced = new Promise<void>((resolve) => {
    this.syncedResolve = resolve;
  });

  constructor(opened: Opened, onError: (err: unknown) => void) {
    this.opened = opened;
    this.onError = onError;
  }
  on(handler: InformerHandler): void {
    this.handlers.push(handler);
  }
  start(): void {
    this.started = true;
  }
  stop(): void {
    this.stopped = true;
  }
  hasSynced(): Promise<void> {
    return this.synced;
  }
  list(): KubeObject[] {
    return [...this.objects.values()];
  }
  /** The first list arrives with these objects. */
  async sync(...objects: KubeObject[]): Promise<void> {
    for (const o of objects) this.put(o);
    this.syncedResolve!();
    await this.synced;
    await Promise.resolve();
  }
  put(object: KubeObject): void {
    const previous = this.objects.get(object.metadata.name!);
    this.objects.set(object.metadata.name!, object);
    for (const h of this.handlers) h(previous ? "MODIFIED" : "ADDED", object, previous);
  }
}
