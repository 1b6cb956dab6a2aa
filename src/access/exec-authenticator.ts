import type { Logger } from "pino";
import type { ExecClusterInfo, PluginCredential } from "./exec-credential.ts";
import { type ExecPlugin, runExecPlugin } from "./exec-plugin.ts";

interface ExecAuthenticatorOptions {
  /** How long one plugin run may take before it is killed. */
  pluginTimeoutMs: number;
  /** Credentials are renewed this long before they expire, so none expires while a request is in flight. */
  refreshBeforeExpiryMs: number;
  logger: Logger;
  now?: () => Date;
  /** Called after every plugin run, for metrics. */
  onPluginRun?(run: { durationMs: number; error: boolean }): void;
  /** Places shared by every spoke's plugin runs in the process (a run waits for one before it starts). */
  runs?: PluginRunSlots;
}

/**
 * At most `limit` plugin runs at once in the process. A plugin is a process that starts, reads its
 * credential source and answers: CPU, where waiting for a spoke is none. Reaching a thousand clusters at
 * once must not start a thousand of them on a hub replica's CPU, starving its own Lease renewals.
 */
export class PluginRunSlots {
  readonly #limit: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Resolves when a place is free, with the function that gives it back. */
  async take(): Promise<() => void> {
    if (this.#running >= this.#limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const next = this.#waiting.shift();
      if (next)
        next(); // the place passes straight on
      else this.#running--;
    };
  }
}

/**
 * One spoke's credentials from its exec plugin: cached until shortly before they expire, fetched by a single
 * plugin run however many requests wait for them, and fetched again when the spoke rejects them (401).
 * client-go does the same except that it has no plugin timeout and renews only once a credential has expired.
 */
export class ExecAuthenticator {
  readonly plugin: ExecPlugin;
  readonly #cluster: ExecClusterInfo;
  readonly #options: ExecAuthenticatorOptions;
  readonly #now: () => Date;
  readonly #closing = new AbortController();
  #cached: PluginCredential | undefined;
  #running: Promise<PluginCredential> | undefined;
  #runs = 0;

  constructor(plugin: ExecPlugin, cluster: ExecClusterInfo, options: ExecAuthenticatorOptions) {
    this.plugin = plugin;
    this.#cluster = cluster;
    this.#options = options;
    this.#now = options.now ?? (() => new Date());
  }

  /** How often the plugin has been started. */
  get pluginRuns(): number {
    return this.#runs;
  }

  /** A credential that is valid now and for a while: the cached one, or one the plugin is asked for. */
  credential(): Promise<PluginCredential> {
    const cached = this.#cached;
    if (cached !== undefined && !this.#renewalDue(cached)) return Promise.resolve(cached);
    this.#running ??= this.#run();
    return this.#running;
  }

  /**
   * The spoke answered 401 to a request made with `credential`. It is dropped unless a newer one has
   * replaced it already, which happens when many requests fail with the same stale credential at once.
   */
  rejected(credential: PluginCredential): void {
    if (this.#cached === credential) this.#cached = undefined;
  }

  /** Stops a plugin run in progress; later calls fail. */
  close(): void {
    this.#closing.abort();
    this.#cached = undefined;
  }

  async #run(): Promise<PluginCredential> {
    const release = await this.#options.runs?.take();
    this.#runs++;
    const started = performance.now();
    let failed = true;
    try {
      const credential = await runExecPlugin(this.plugin, this.#cluster, {
        timeoutMs: this.#options.pluginTimeoutMs,
        logger: this.#options.logger,
        signal: this.#closing.signal,
        now: this.#now,
      });
      this.#cached = credential;
      failed = false;
      return credential;
    } finally {
      release?.();
      this.#running = undefined;
      this.#options.onPluginRun?.({ durationMs: performance.now() - started, error: failed });
    }
  }

  /**
   * Renew `refreshBeforeExpiryMs` before expiry, but never in the first half of a credential's life: a
   * short-lived credential would otherwise be renewed on every request.
   */
  #renewalDue(credential: PluginCredential): boolean {
    if (credential.expiresAt === undefined) return false;
    const expires = credential.expiresAt.getTime();
    const halfLife = credential.obtainedAt.getTime() + (expires - credential.obtainedAt.getTime()) / 2;
    return this.#now().getTime() >= Math.max(halfLife, expires - this.#options.refreshBeforeExpiryMs);
  }
}
