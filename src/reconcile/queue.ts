/**
 * A controller work queue in the client-go mould: a key is queued at most once, never processed by two
 * workers at once (a key re-added while in flight runs again after), failures back off exponentially per
 * key, and `addAfter` schedules a level-based re-check (readiness polling).
 */
export interface WorkQueueOptions {
  concurrency: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export type WorkResult = { requeueAfterMs?: number } | undefined;

export class WorkQueue {
  private readonly queued = new Set<string>();
  private readonly order: string[] = [];
  private readonly inFlight = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly options: Required<WorkQueueOptions>;
  private readonly handler: (key: string) => Promise<WorkResult>;
  private stopped = false;
  private running = 0;

  constructor(handler: (key: string) => Promise<WorkResult>, options: WorkQueueOptions) {
    this.handler = handler;
    this.options = { baseDelayMs: 1_000, maxDelayMs: 300_000, ...options };
  }

  add(key: string): void {
    if (this.stopped) return;
    this.clearTimer(key);
    if (this.inFlight.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.order.push(key);
    this.pump();
  }

  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    const existing = this.timers.get(key);
    if (existing) clearTimeout(existing);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, timer);
  }

  /** The backoff the next failure of key would wait: base * 2^failures, capped. */
  backoffFor(key: string): number {
    const n = this.failures.get(key) ?? 0;
    return Math.min(this.options.baseDelayMs * 2 ** n, this.options.maxDelayMs);
  }

  get length(): number {
    return this.order.length;
  }

  /** Resolves when nothing is queued or running (timers aside). */
  idle(): Promise<void> {
    if (this.order.length === 0 && this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking work; resolves when in-flight work has finished. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.order.length = 0;
    this.queued.clear();
    await this.idle();
  }

  private clearTimer(key: string): void {
    const timer = this.timers.get(key);
    if (timer) {
      clearTimeout(timer);
      this.timers.delete(key);
    }
  }

  private pump(): void {
    while (!this.stopped && this.running < this.options.concurrency) {
      const index = this.order.findIndex((k) => !this.inFlight.has(k));
      if (index < 0) break;
      const [key] = this.order.splice(index, 1) as [string];
      this.queued.delete(key);
      this.inFlight.add(key);
      this.running++;
      void this.process(key);
    }
    if (this.order.length === 0 && this.running === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  private async process(key: string): Promise<void> {
    try {
      const result = await this.handler(key);
      this.failures.delete(key);
      if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    } catch {
      const delay = this.backoffFor(key);
      this.failures.set(key, (this.failures.get(key) ?? 0) + 1);
      this.addAfter(key, delay);
    } finally {
      this.inFlight.delete(key);
      this.running--;
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
