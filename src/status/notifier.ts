import { createHmac, randomUUID } from "node:crypto";
import { request } from "undici";
import { isManagedByFleet } from "../api/labels.ts";
import type { KubeClient } from "../kube/client.ts";
import { listHubResources } from "../mirror/mirror.ts";
import type { Logger } from "../observability/log.ts";
import type { NotificationOutcome } from "../observability/metrics.ts";
import { redactSecrets } from "../observability/redact.ts";
import { describeError, readLimited } from "../verify/prometheus.ts";
import { SyncReport } from "./coalesce.ts";
import {
  type FleetReading,
  type Notification,
  type NotificationEvent,
  notificationBody,
  notificationsBetween,
  readFleet,
} from "./notifications.ts";
import { hubCrRow } from "./row.ts";
import type { StatusSync } from "./summary.ts";

// Tells people what happened (notifications.ts) through their webhooks: each message once per transition,
// a repeat of the same event about the same thing within the minimum interval suppressed (a flapping
// cluster is one message), every body signed with HMAC-SHA256 when the endpoint has a secret. A receiver
// that is down costs a few retries and a log line, never the sync or another receiver's message.

interface NotificationEndpoint {
  name: string;
  format: "generic" | "slack" | "teams";
  /** Read on every message: a Slack or Teams URL is a secret, mounted from a Secret. */
  url(): string;
  /** The HMAC key of `X-Knative-Fleet-Signature-256`, read on every message. */
  secret?: () => string;
  /** Only these events; all when absent. */
  events?: ReadonlySet<NotificationEvent>;
}

export interface NotifierSettings {
  endpoints: NotificationEndpoint[];
  fleet: string;
  minIntervalMs: number;
  unhealthyAfterMs: number;
}

interface NotifierOptions extends NotifierSettings {
  hub: KubeClient;
  log: Logger;
  onSent?(outcome: NotificationOutcome): void;
  /** Between retries of one delivery (tests shorten it). */
  retryDelayMs?: number;
}

const ATTEMPTS = 3;

export class Notifier extends SyncReport {
  private readonly options: NotifierOptions;
  private last: FleetReading | undefined;
  /** When each key was last told. */
  private readonly told = new Map<string, number>();
  private dueTimer: NodeJS.Timeout | undefined;
  /** Told by a sync's report, not yet delivered. */
  private readonly pending: Notification[] = [];

  constructor(options: NotifierOptions) {
    // A run lists the hub's CRs: at most one every 5 s, whatever the reconcile reports (1,000 clusters
    // report often), and a message waits no longer than that.
    super(5_000);
    this.options = options;
  }

  /**
   * Every sync's report is a reading of its own, taken at once: runs are coalesced, and a halt that a fix
   * lifts before the next run would otherwise never be told.
   */
  override synced(result: StatusSync): void {
    const reading: FleetReading = {
      ...(result.rollout && { rollout: result.rollout }),
      unhealthySince: this.last?.unhealthySince ?? new Map(),
      at: Date.now(),
    };
    this.pending.push(...this.between(reading));
    super.synced(result);
  }

  /** What happened since the last reading, which `reading` becomes. */
  private between(reading: FleetReading): Notification[] {
    const { fleet, unhealthyAfterMs } = this.options;
    const notes = notificationsBetween(this.last, reading, { fleet, unhealthyAfterMs });
    this.last = reading;
    return notes;
  }

  protected async send(sync: StatusSync): Promise<void> {
    const rows = (await listHubResources(this.options.hub)).filter(isManagedByFleet).map(hubCrRow);
    const now = Date.now();
    const reading = readFleet(sync.rollout, rows, this.last, now);
    const notes = [...this.pending.splice(0), ...this.between(reading)];
    this.wakeWhenDue(reading, now);
    const { minIntervalMs } = this.options;
    for (const note of notes) {
      const told = this.told.get(note.key);
      if (told !== undefined && now - told < minIntervalMs) {
        this.options.onSent?.("suppressed");
        continue;
      }
      this.told.set(note.key, now);
      await Promise.all(
        this.options.endpoints
          .filter((endpoint) => endpoint.events === undefined || endpoint.events.has(note.event))
          .map((endpoint) => this.deliver(endpoint, note)),
      );
    }
  }

  override async stop(): Promise<void> {
    clearTimeout(this.dueTimer);
    await super.stop();
  }

  /** A cluster becomes "unhealthy" by time alone: look again when the first one is due. */
  private wakeWhenDue(reading: FleetReading, now: number): void {
    clearTimeout(this.dueTimer);
    const due = [...reading.unhealthySince.values()]
      .filter((since): since is number => since !== undefined && now - since < this.options.unhealthyAfterMs)
      .map((since) => since + this.options.unhealthyAfterMs - now);
    if (due.length === 0) return;
    this.dueTimer = setTimeout(() => this.request(), Math.min(...due) + 10);
    this.dueTimer.unref();
  }

  private async deliver(endpoint: NotificationEndpoint, note: Notification): Promise<void> {
    const { log } = this.options;
    const body = JSON.stringify(notificationBody(note, endpoint.format));
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      try {
        const secret = endpoint.secret?.();
        const response = await request(endpoint.url(), {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "user-agent": "knative-fleet",
            "x-knative-fleet-event": note.event,
            "x-knative-fleet-delivery": randomUUID(),
            ...(secret && {
              "x-knative-fleet-signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
            }),
          },
          body,
          signal: AbortSignal.timeout(10_000),
        });
        await readLimited(response.body, 64 * 1024);
        if (response.statusCode >= 200 && response.statusCode < 300) {
          this.options.onSent?.("sent");
          return;
        }
        throw new Error(`answered ${response.statusCode}`);
      } catch (error) {
        const message = redactSecrets(describeError(error));
        if (attempt === ATTEMPTS) {
          log.warn(
            { endpoint: endpoint.name, event: note.event, err: message },
            "notification not delivered",
          );
          this.options.onSent?.("failed");
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, (this.options.retryDelayMs ?? 1_000) * attempt));
      }
    }
  }
}
