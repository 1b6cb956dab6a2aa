import type { StatusSync } from "./summary.ts";

/**
 * One writer's schedule: runs `run` at most once per interval, requests in between coalesced into the next
 * run; a run that ends with work left (it failed, or more was requested) is run again after the interval.
 * `notBefore` holds every run back further (a Git host's rate limit). Never two runs at once.
 */
class CoalescedRun {
  readonly #run: () => Promise<void>;
  readonly #intervalMs: number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #dirty = false;
  #lastRun = 0;
  #notBefore = 0;
  #stopped = false;

  /** `run` throws to say its work is left to do (it is tried again after the interval). */
  constructor(run: () => Promise<void>, intervalMs: number) {
    this.#run = run;
    this.#intervalMs = intervalMs;
  }

  /** No run before this time (ms since the epoch). */
  holdUntil(time: number): void {
    this.#notBefore = Math.max(this.#notBefore, time);
  }

  request(): void {
    if (this.#stopped) return;
    this.#dirty = true;
    if (this.#timer || this.#running) return;
    const wait = Math.max(0, this.#lastRun + this.#intervalMs - Date.now(), this.#notBefore - Date.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#running = this.#once().finally(() => {
        this.#running = undefined;
        if (this.#dirty) this.request();
      });
    }, wait);
    this.#timer.unref();
  }

  /** Runs now what is pending (at shutdown, and in tests). */
  async flush(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    await this.#running;
    if (this.#dirty) await this.#once();
  }

  async stop(): Promise<void> {
    await this.flush().catch(() => undefined);
    this.#stopped = true;
  }

  async #once(): Promise<void> {
    this.#dirty = false;
    this.#lastRun = Date.now();
    try {
      await this.#run();
    } catch {
      this.#dirty = true; // tried again after the interval
    }
  }
}

/**
 * A report back to Git of the last sync (the status files, the commit statuses): told of every sync and of
 * every change the summary shows, it sends on its own schedule, the last sync at the time it runs.
 */
export abstract class SyncReport {
  readonly #schedule: CoalescedRun;
  #lastSync: StatusSync | undefined;

  protected constructor(intervalMs: number) {
    this.#schedule = new CoalescedRun(async () => {
      if (this.#lastSync) await this.send(this.#lastSync);
    }, intervalMs);
  }

  /** Sends what the sync says; throws when something is left to send (tried again after the interval). */
  protected abstract send(sync: StatusSync): Promise<void>;

  /** No run before this time (a Git host's rate limit). */
  protected holdUntil(time: number): void {
    this.#schedule.holdUntil(time);
  }

  /** A sync finished: its result is what the next run reports. */
  synced(result: StatusSync): void {
    this.#lastSync = result;
    this.request();
  }

  /** Something the report shows may have changed (a CR's status). */
  request(): void {
    if (this.#lastSync) this.#schedule.request();
  }

  /** Sends now what is pending (at shutdown, and in tests). */
  flush(): Promise<void> {
    return this.#schedule.flush();
  }

  stop(): Promise<void> {
    return this.#schedule.stop();
  }
}
