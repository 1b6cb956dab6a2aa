import { type ScheduledTask, schedule, validate } from "node-cron";
import { type GitErrorKind, GitSourceError, isTransient } from "./errors.ts";
import type { GitSource, Snapshot } from "./git-source.ts";
import { type BackoffPolicy, defaultBackoff, retry } from "./retry.ts";

export interface PollerOptions {
  source: Pick<GitSource, "headOf" | "sync" | "contentOrigin">;
  /** node-cron expression (5 fields, or 6 with seconds). Default: every minute. */
  schedule?: string;
  /** Each scheduled poll waits a random 0..jitterMs first, so a fleet of reconcilers does not poll in step. */
  jitterMs?: number;
  /** Retries of a transient failure (network, timeout) within one poll. */
  backoff?: BackoffPolicy;
  /** Receives each snapshot whose fleet content differs from the last one delivered. */
  onSnapshot: (snapshot: Snapshot) => void | Promise<void>;
  /**
   * A poll failed: a GitSourceError once retries are spent, or whatever `onSnapshot` threw. Nothing is
   * emitted then, so the caller keeps acting on the last good snapshot (and never prunes on a failure).
   */
  onError: (error: unknown) => void;
  /** Every fetch (the head asked for, and the fetch when it moved), how long it took, and its error kind. */
  onFetched?: (fetch: { durationMs: number; error?: GitErrorKind }) => void;
  /** Every poll's outcome, once it ended (after `onError` for a failed one). */
  onPolled?: (outcome: PollOutcome) => void;
}

/** What one poll did. */
type PollOutcome = "head-unchanged" | "content-unchanged" | "emitted" | "failed";

/**
 * Polls the source on a cron schedule. A poll first asks the server for the branch head (ls-refs, no
 * objects) and stops there when it has not moved; otherwise it fetches and reads a snapshot, and emits it
 * unless only files outside the fleet changed (the bot's own status commits, a README).
 */
export class Poller {
  private readonly options: PollerOptions;
  private task: ScheduledTask | undefined;
  private running: Promise<PollOutcome> | undefined;
  private queued: Promise<PollOutcome> | undefined;
  private lastHead: string | undefined;
  private lastDigest: string | undefined;

  constructor(options: PollerOptions) {
    if (options.schedule !== undefined && !validate(options.schedule)) {
      throw new Error(`invalid poll schedule "${options.schedule}"`);
    }
    this.options = options;
  }

  /** Polls now, then on the schedule. */
  start(): void {
    if (this.task) return;
    void this.syncNow();
    // node-cron cancels only the latest jitter wait on destroy: with a schedule shorter than the jitter,
    // earlier waits still fire afterwards. Those must not poll for a stopped poller (a replica that stepped
    // down would sync into the hub beside the new leader), nor keep a stopping process alive (unref).
    const task: ScheduledTask = schedule(
      this.options.schedule ?? "* * * * *",
      () => (this.task === task ? this.syncNow() : undefined),
      { name: "knative-fleet-git-poll", maxRandomDelay: this.options.jitterMs ?? 10_000, unref: true },
    );
    this.task = task;
  }

  /** Stops the schedule and waits for a poll in flight. */
  async stop(): Promise<void> {
    await this.task?.destroy();
    this.task = undefined;
    await this.queued;
    await this.running;
  }

  /**
   * Polls at once (a webhook's push, a person's request). A call during a poll does not start a second
   * one beside it: all such calls share one poll that runs right after, so a push is never missed.
   */
  syncNow(): Promise<PollOutcome> {
    if (this.running) {
      this.queued ??= this.running.then(() => {
        this.queued = undefined;
        return this.syncNow();
      });
      return this.queued;
    }
    this.running = this.poll()
      .then((outcome) => {
        this.options.onPolled?.(outcome);
        return outcome;
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async poll(): Promise<PollOutcome> {
    const backoff = this.options.backoff ?? defaultBackoff;
    const transient = (error: unknown) => error instanceof GitSourceError && isTransient(error);
    const started = performance.now();
    const fetched = (error?: unknown) =>
      this.options.onFetched?.({
        durationMs: performance.now() - started,
        ...(error !== undefined && { error: error instanceof GitSourceError ? error.kind : "internal" }),
      });
    let snapshot: Snapshot;
    try {
      const head = await retry(() => this.options.source.headOf(), backoff, transient);
      if (head === this.lastHead) {
        fetched();
        return "head-unchanged";
      }
      snapshot = await retry(() => this.options.source.sync(), backoff, transient);
      fetched();
    } catch (error) {
      fetched(error);
      this.options.onError(error);
      return "failed";
    }
    try {
      if (snapshot.digest === this.lastDigest) {
        this.lastHead = snapshot.commit;
        return "content-unchanged";
      }
      // Named by the commit that brought the content, which a status commit may already sit on.
      await this.options.onSnapshot({
        ...snapshot,
        commit: await this.options.source.contentOrigin(snapshot),
      });
      // Only now: a snapshot the caller failed to take is emitted again by the next poll.
      this.lastHead = snapshot.commit;
      this.lastDigest = snapshot.digest;
      return "emitted";
    } catch (error) {
      this.options.onError(error);
      return "failed";
    }
  }
}
