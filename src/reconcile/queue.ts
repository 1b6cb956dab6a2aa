/**
 * A controller work queue in the client-go mould: a key is queued at most once, never processed by two
 * workers at once (a key re-added while in flight runs again after), failures back off exponentially per
 * key, and `addAfter` schedules a level-based re-check (readiness polling).
 *
 * Keys fall into groups (the controller's group is the target cluster): at most `perGroup` keys of one
 * group run at once, and a key whose group is full waits while later keys of other groups go ahead, so
 * a spoke whose requests hang holds at most `perGroup` workers and the other spokes keep the rest.
 *
 * A group may need preparing before its keys run (the controller's: reaching the cluster). Preparations run
 * beside the workers, `prepareConcurrency` at once, and hold no worker: a key waits while its group prepares
 * and later keys of ready groups go ahead, so a thousand clusters that take a timeout each to not answer
 * do not stand in front of the fifty that answer.
 *
 * Some keys may take places of their own beside the workers (`lane`: the controller's CRs being deleted), so
 * that a placement's removal does not queue behind installs, one worker's turn per CR.
 */
interface WorkQueueOptions {
  concurrency: number;
  /** At most this many keys of one group in flight (default: concurrency, i.e. no per-group bound). */
  perGroup?: number;
  /** The group of a key, read when the key is dispatched (default: the key itself). */
  groupOf?(key: string): string;
  /**
   * What must happen before a key of its group runs, asked for the first queued key of a group that is not
   * prepared: undefined when nothing must (the group is ready), else the preparation, started when a place
   * is free. Its outcome is the handler's to find.
   */
  prepare?(key: string): (() => Promise<void>) | undefined;
  /** At most this many preparations at once (default 32). */
  prepareConcurrency?: number;
  /**
   * The keys that run in places of their own, at most `concurrency` at once beside the workers', read when
   * the key is added (a key's change that puts it in the lane comes with an add). The per-group bound holds
   * across both.
   */
  lane?: { has(key: string): boolean; concurrency: number };
  baseDelayMs?: number;
  maxDelayMs?: number;
}

type WorkResult = { requeueAfterMs?: number } | undefined;

export class WorkQueue {
  private readonly queued = new Set<string>();
  /**
   * Queued keys in order: the workers' and, apart, the lane's (as `lane.has` said when each was added). Apart,
   * a pump with every worker busy looks at the lane's keys alone: at a replica's start 1,000 keys are added
   * at once, and each add looked at every key queued before it (lane.has each time): seconds of one turn
   * of the event loop, in which the leader's Lease renewal waited.
   */
  private readonly order: string[] = [];
  private readonly laneOrder: string[] = [];
  /** Keys in flight, the group each was dispatched under and whether it took a place of the lane. */
  private readonly inFlight = new Map<string, { group: string; inLane: boolean }>();
  private readonly runningPerGroup = new Map<string, number>();
  private readonly groupWaiters = new Map<string, (() => void)[]>();
  private readonly dirty = new Set<string>();
  /** Groups being prepared, and those prepared whose next dispatched key has not run yet. */
  private readonly preparing = new Set<string>();
  private readonly prepared = new Set<string>();
  /** Groups found to need preparing while every place was taken: not asked again until one is free. */
  private readonly waitingToPrepare = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly idleWaiters: (() => void)[] = [];
  private readonly options: Required<Omit<WorkQueueOptions, "prepare" | "lane">> &
    Pick<WorkQueueOptions, "prepare" | "lane">;
  private readonly handler: (key: string) => Promise<WorkResult>;
  private stopped = false;
  /** Keys in flight in the workers' places, and in the lane's. */
  private running = 0;
  private runningInLane = 0;

  constructor(handler: (key: string) => Promise<WorkResult>, options: WorkQueueOptions) {
    this.handler = handler;
    this.options = {
      concurrency: options.concurrency,
      perGroup: options.perGroup ?? options.concurrency,
      groupOf: options.groupOf ?? ((key) => key),
      prepare: options.prepare,
      lane: options.lane,
      prepareConcurrency: options.prepareConcurrency ?? 32,
      baseDelayMs: options.baseDelayMs ?? 1_000,
      maxDelayMs: options.maxDelayMs ?? 300_000,
    };
  }

  add(key: string): void {
    if (this.stopped) return;
    this.clearTimer(key);
    if (this.inFlight.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) {
      // Queued for a worker and now in the lane (a CR waiting for its install, then deleted): a lane's place
      // may take it at once.
      const index = this.order.indexOf(key);
      if (index >= 0 && this.options.lane?.has(key)) {
        this.order.splice(index, 1);
        this.laneOrder.push(key);
        this.pump();
      }
      return;
    }
    this.queued.add(key);
    (this.options.lane?.has(key) ? this.laneOrder : this.order).push(key);
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
    return this.order.length + this.laneOrder.length;
  }

  /** Resolves when nothing is queued or running (timers aside). */
  idle(): Promise<void> {
    if (this.length === 0 && this.inFlight.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Resolves when no key of the group is in flight (queued keys aside). */
  groupSettled(group: string): Promise<void> {
    if (!this.runningPerGroup.has(group)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.groupWaiters.get(group) ?? [];
      waiters.push(resolve);
      this.groupWaiters.set(group, waiters);
    });
  }

  /** Stops taking work; resolves when in-flight work has finished. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.order.length = 0;
    this.laneOrder.length = 0;
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
    const { concurrency, lane } = this.options;
    while (!this.stopped) {
      const laneFree = lane !== undefined && this.runningInLane < lane.concurrency;
      const next =
        (laneFree ? this.firstRunnable(this.laneOrder) : undefined) ??
        (this.running < concurrency ? this.firstRunnable(this.order) : undefined);
      if (!next) break;
      const { list, index, group } = next;
      const inLane = list === this.laneOrder;
      const [key] = list.splice(index, 1) as [string];
      this.prepared.delete(group);
      this.queued.delete(key);
      this.inFlight.set(key, { group, inLane });
      this.runningPerGroup.set(group, (this.runningPerGroup.get(group) ?? 0) + 1);
      if (inLane) this.runningInLane++;
      else this.running++;
      void this.process(key);
    }
    if (this.length === 0 && this.inFlight.size === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  /** The first key of `list` its group's bound and preparation let run now. */
  private firstRunnable(list: string[]): { list: string[]; index: number; group: string } | undefined {
    const { perGroup, groupOf } = this.options;
    let group = "";
    const index = list.findIndex((k) => {
      if (this.inFlight.has(k)) return false;
      group = groupOf(k);
      return (this.runningPerGroup.get(group) ?? 0) < perGroup && this.isPrepared(k, group);
    });
    return index < 0 ? undefined : { list, index, group };
  }

  /** Whether key's group is ready to run it; starts the group's preparation when it must be and may be. */
  private isPrepared(key: string, group: string): boolean {
    const { prepare, prepareConcurrency } = this.options;
    if (!prepare || this.prepared.has(group)) return true;
    if (this.preparing.has(group)) return false;
    const full = this.preparing.size >= prepareConcurrency;
    // A full pool and a thousand keys behind it: each pump would ask each of them again.
    if (full && this.waitingToPrepare.has(group)) return false;
    const preparation = prepare(key);
    this.waitingToPrepare.delete(group);
    if (!preparation) return true;
    if (full) {
      this.waitingToPrepare.add(group);
      return false;
    }
    this.preparing.add(group);
    void preparation()
      .catch(() => {}) // its outcome is the handler's to find
      .finally(() => {
        this.preparing.delete(group);
        if (this.stopped) return;
        this.prepared.add(group);
        this.pump();
      });
    return false;
  }

  private finished(key: string): void {
    const { group, inLane } = this.inFlight.get(key)!;
    this.inFlight.delete(key);
    if (inLane) this.runningInLane--;
    else this.running--;
    const left = this.runningPerGroup.get(group)! - 1;
    if (left > 0) {
      this.runningPerGroup.set(group, left);
      return;
    }
    this.runningPerGroup.delete(group);
    for (const resolve of this.groupWaiters.get(group) ?? []) resolve();
    this.groupWaiters.delete(group);
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
      this.finished(key);
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
