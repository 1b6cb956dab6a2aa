import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import type { KubeClient } from "../kube/client.ts";
import { isConflict } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";
import { getLease, LEASE_API_VERSION, type Lease, type LeaseSpec, leasePath, microTime } from "./lease.ts";
import { settleWithin } from "./settle-within.ts";

/**
 * "<pod name>_<uuid>", as client-go builds it from the hostname: the pod name says who leads, the uuid keeps a
 * restarted container (same pod name) from renewing the Lease its killed predecessor held, so a standby takes
 * over after the lease duration instead of racing a process that never saw the Lease. With the Pod's UID in
 * place of a random one it is a shard member's identity: bound to one Pod, which vouching checks.
 */
export function processIdentity(podName: string | undefined, podUid?: string): string {
  return `${podName || hostname()}_${podUid || randomUUID()}`;
}

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  /** Unique per process (see processIdentity): two live processes with one identity would both lead. */
  identity: string;
  /** How long others wait, after they last saw the Lease change, before taking it over (default 15 s). */
  leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it gives up leading (default 10 s). */
  renewDeadlineMs?: number;
  /** Pause between attempts to acquire or renew (default 2 s). */
  retryPeriodMs?: number;
  log: Logger;
  /**
   * Called on becoming leader. Not awaited before renewals start; should start the work and return. If it
   * rejects, this replica steps down (and runs for leader again), so a leader that cannot work does not
   * keep the Lease from one that can.
   */
  onStartedLeading(): void | Promise<void>;
  /**
   * Called once per term, when leadership is lost (no renewal for renewDeadline) or given up (`stop()`).
   * Awaited: the Lease is released only after it returns, and the elector runs for leader again only then.
   */
  onStoppedLeading(): void | Promise<void>;
}

/** The Lease record as this replica last saw it change, and when (performance.now()): the basis of expiry. */
interface ObservedRecord {
  record: string;
  holder: string;
  durationMs: number;
  atMs: number;
}

/** client-go's wait.JitterUntil factor for the acquire loop: candidates spread their polls. */
const ACQUIRE_JITTER = 1.2;

/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's leaderelection semantics:
 *
 * - Every write is a create or an update that carries the resourceVersion last read or written, so of two
 *   replicas racing for the Lease exactly one wins (the other gets a 409). A replica whose last seen Lease
 *   names it renews over that write and reads only when that fails (client-go's fast path); others read.
 * - Expiry is judged on the local monotonic clock from when this replica last saw the Lease record change,
 *   never from renewTime, so clock skew between replicas cannot cut a term short.
 * - The leader renews every retry period and gives up leading when no renewal has succeeded for
 *   renewDeadline; as renewDeadline < leaseDuration, it stops before any other replica may take over.
 * - A replica that stops while leading releases the Lease (empty holder, 1 s duration), so a standby takes
 *   over at its next poll instead of after leaseDuration.
 *
 * Unlike client-go, whose Run returns after the first term, a replica that lost leadership runs for leader
 * again after onStoppedLeading returned, so it stays a standby that can take over.
 */
export class LeaderElector {
  private readonly client: KubeClient;
  private readonly namespace: string;
  private readonly name: string;
  private readonly identity: string;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly log: Logger;
  private readonly callbacks: Pick<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading">;
  private readonly stopping = new AbortController();
  private leading = false;
  private running?: Promise<void>;
  /** The Lease as last read or written: its resourceVersion guards the release. */
  private lease?: Lease;
  private observed?: ObservedRecord;
  /** When the last write that made or kept this replica the holder was sent (performance.now()). */
  private lastHeldWriteSentMs = 0;

  constructor(options: LeaderElectionOptions) {
    this.client = options.client;
    this.namespace = options.namespace;
    this.name = options.name;
    this.identity = options.identity;
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.log = options.log.child({
      lease: `${options.namespace}/${options.name}`,
      identity: options.identity,
    });
    this.callbacks = options;
    if (!options.identity) throw new Error("leader election needs a non-empty identity");
    if (this.leaseDurationMs <= this.renewDeadlineMs) {
      throw new Error("leaseDurationMs must be greater than renewDeadlineMs");
    }
    if (this.renewDeadlineMs <= ACQUIRE_JITTER * this.retryPeriodMs) {
      throw new Error(`renewDeadlineMs must be greater than ${ACQUIRE_JITTER} × retryPeriodMs`);
    }
  }

  /** Runs for leader until `stop()`. */
  start(): void {
    if (this.running) throw new Error("the leader elector was already started");
    this.running = this.run();
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** Stops for good: a leader calls onStoppedLeading, then releases the Lease. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private async run(): Promise<void> {
    this.log.info("running for leader");
    while (await this.acquire()) await this.lead();
  }

  /** Polls until this replica holds the Lease (true) or is stopped (false). */
  private async acquire(): Promise<boolean> {
    while (!this.stopping.signal.aborted) {
      if (await settleWithin(this.tryAcquireOrRenew(), this.renewDeadlineMs, this.stopping.signal)) {
        if (!this.stopping.signal.aborted) return true;
        await this.release(); // stopped just as the winning write came back
        return false;
      }
      const pause = this.retryPeriodMs * (1 + Math.random() * ACQUIRE_JITTER);
      if (!(await sleep(pause, this.stopping.signal))) return false;
    }
    return false;
  }

  /** One term: renew until leadership is lost or given up, then onStoppedLeading, then release if held. */
  private async lead(): Promise<void> {
    this.leading = true;
    this.log.info("became leader");
    const startFailed = new AbortController();
    const stepDown = AbortSignal.any([this.stopping.signal, startFailed.signal]);
    invoke(this.callbacks.onStartedLeading).catch((err: unknown) => {
      this.log.error({ err: String(err) }, "onStartedLeading failed; stepping down");
      startFailed.abort();
    });

    // Renewals go on while onStoppedLeading drains the work, so the Lease cannot expire under it.
    const renewing = new AbortController();
    const renewal = this.renew(renewing.signal);
    const lost = await Promise.race([renewal.then((held) => !held), aborted(stepDown).then(() => false)]);
    this.leading = false;
    this.log.info(lost ? "lost leadership: the Lease was not renewed in time" : "stepping down");
    await invoke(this.callbacks.onStoppedLeading).catch((err: unknown) =>
      this.log.error({ err: String(err) }, "onStoppedLeading failed"),
    );
    renewing.abort();
    if (await renewal) await this.release();
  }

  /**
   * Renews every retry period until `done` aborts (true: still held) or no renewal has succeeded for
   * renewDeadline (false: lost). The deadline counts from when the last successful write was sent, which
   * is no later than the API server stored it and so no later than any other replica saw it.
   */
  private async renew(done: AbortSignal): Promise<boolean> {
    const deadlineMs = () => this.lastHeldWriteSentMs + this.renewDeadlineMs;
    while (await sleep(this.retryPeriodMs, done)) {
      const remainingMs = deadlineMs() - performance.now();
      // No time left: the check below reports the loss in this turn (so `> 0` or `>= 0`, or none, differ
      // only by a warning said just before it; mutation testing lists them as survivors).
      if (
        remainingMs > 0 &&
        (await settleWithin(this.tryAcquireOrRenew(), remainingMs, done)) === undefined
      ) {
        // Said, as an error would be: a hub too slow to answer, or this process too busy to hear it.
        if (!done.aborted)
          this.log.warn({ waitedMs: Math.round(remainingMs) }, "the Lease renewal got no answer in time");
      }
      if (performance.now() >= deadlineMs()) return false;
    }
    return true;
  }

  /**
   * client-go's tryAcquireOrRenew: one read and at most one conditional write. True when this replica
   * holds the Lease; false when another holds it unexpired, or on any error (logged). A holder renews
   * first without the read (client-go's fast path): one request a renewal instead of two, which is what
   * a busy replica's renewal waits on.
   */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const sentMs = performance.now();
    const nowIso = microTime(new Date());
    const spec: LeaseSpec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000),
      acquireTime: nowIso,
      renewTime: nowIso,
      leaseTransitions: 0,
    };
    if (await this.renewOptimistically(nowIso)) return this.held(sentMs);
    try {
      const current = await getLease(this.client, this.namespace, this.name);
      if (!current) {
        this.lease = await this.write("POST", {
          apiVersion: LEASE_API_VERSION,
          kind: "Lease",
          metadata: { name: this.name, namespace: this.namespace },
          spec,
        });
        return this.held(sentMs);
      }
      this.lease = current;
      const observed = this.observe(current.spec);
      if (observed.holder !== "" && observed.holder !== this.identity && !this.expired(observed))
        return false;
      if (observed.holder === this.identity) {
        spec.acquireTime = current.spec?.acquireTime ?? nowIso;
        spec.leaseTransitions = current.spec?.leaseTransitions ?? 0;
      } else {
        spec.leaseTransitions = (current.spec?.leaseTransitions ?? 0) + 1;
      }
      this.lease = await this.write("PUT", { ...current, spec });
      return this.held(sentMs);
    } catch (err) {
      // A 409 is another replica's write landing first: an ordinary lost race.
      if (isConflict(err)) this.log.debug("lost a race for the Lease");
      else this.log.warn({ err: String(err) }, "could not acquire or renew the Lease");
      return false;
    }
  }

  /**
   * When the Lease as this replica last saw it names this replica: its renewTime moved on, written over that
   * resourceVersion.
   * Another's write since makes it a 409, and any failure falls back to the read (false), as in client-go.
   * client-go also asks that it leads and that the record has not expired; here neither adds a case: a
   * replica that lost leadership without releasing would renew the same Lease after the read too, and a
   * leader stops before its own record can expire.
   */
  private async renewOptimistically(renewTime: string): Promise<boolean> {
    const last = this.lease;
    if (last?.spec?.holderIdentity !== this.identity) return false;
    try {
      this.lease = await this.write("PUT", { ...last, spec: { ...last.spec, renewTime } });
      return true;
    } catch (err) {
      this.log.debug({ err: String(err) }, "could not renew over its last write; reading the Lease");
      return false;
    }
  }

  /** Notes a successful write of this replica as holder, sent at `sentMs`. */
  private held(sentMs: number): true {
    this.observe(this.lease?.spec);
    this.lastHeldWriteSentMs = Math.max(this.lastHeldWriteSentMs, sentMs);
    return true;
  }

  /**
   * client-go's release: an empty holder and a 1 s duration, conditional on the resourceVersion, so a
   * Lease another replica has taken meanwhile is left alone. A renewal of this replica's own that was
   * still out when it stopped leading may land first (409): then the Lease is read again and, while this
   * replica still holds it, released at its new version; otherwise the standby would wait out the lease.
   */
  private async release(): Promise<void> {
    const deadlineMs = performance.now() + this.renewDeadlineMs;
    const within = <T>(request: Promise<T>) =>
      settleWithin(request, Math.max(0, deadlineMs - performance.now())).then((answer) => {
        if (answer === undefined) throw new Error(`no answer within ${this.renewDeadlineMs} ms`);
        return answer;
      });
    for (let attempt = 1; ; attempt++) {
      const lease = this.lease;
      const spec = lease?.spec;
      if (!lease || spec?.holderIdentity !== this.identity) return;
      const nowIso = microTime(new Date());
      const releasedSpec = {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: nowIso,
        renewTime: nowIso,
        leaseTransitions: spec.leaseTransitions ?? 0,
      };
      try {
        this.lease = await within(this.write("PUT", { ...lease, spec: releasedSpec }));
        this.log.info("released the Lease");
        return;
      } catch (err) {
        if (isConflict(err) && attempt < 3) {
          this.lease = await within(getLease(this.client, this.namespace, this.name)).catch(() => undefined);
          continue;
        }
        this.log.warn({ err: String(err) }, "could not release the Lease; it expires instead");
        return;
      }
    }
  }

  private async write(method: "POST" | "PUT", lease: Lease): Promise<Lease> {
    const path = await leasePath(this.client, this.namespace, method === "PUT" ? this.name : undefined);
    return (await this.client.rest.request<Lease>({ method, path, body: lease })).body;
  }

  /** Notes the Lease record; its observation time moves only when the record changed. */
  private observe(spec: LeaseSpec | undefined): ObservedRecord {
    const holder = spec?.holderIdentity ?? "";
    const record = JSON.stringify([
      holder,
      spec?.leaseDurationSeconds,
      spec?.acquireTime,
      spec?.renewTime,
      spec?.leaseTransitions,
    ]);
    if (this.observed?.record !== record) {
      if (this.observed?.holder !== holder && holder !== "" && holder !== this.identity)
        this.log.info({ leader: holder }, "new leader observed");
      const durationMs = (spec?.leaseDurationSeconds ?? this.leaseDurationMs / 1000) * 1000;
      this.observed = { record, holder, durationMs, atMs: performance.now() };
    }
    return this.observed;
  }

  private expired(observed: ObservedRecord): boolean {
    return performance.now() >= observed.atMs + observed.durationMs;
  }
}

const invoke = async (callback: () => void | Promise<void>): Promise<void> => callback();

/** Waits `ms`; false when `signal` aborted first. */
async function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  return delay(ms, true, { signal }).catch(() => false);
}

const aborted = (signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
