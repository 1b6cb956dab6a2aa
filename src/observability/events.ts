import { hostname } from "node:os";
import type { KubeClient } from "../kube/client.ts";
import { isNotFound } from "../kube/rest.ts";
import type { Logger } from "./log.ts";
import { redactSecrets } from "./redact.ts";

/** The object an Event is about: a hub CR. */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; uid?: string };
}

export type EventType = "Normal" | "Warning";

/** The core/v1 Event the recorder writes (what `kubectl describe` shows). */
export interface CoreEvent {
  apiVersion: "v1";
  kind: "Event";
  metadata: { name: string; namespace: string };
  involvedObject: { apiVersion: string; kind: string; name: string; namespace?: string; uid?: string };
  type: EventType;
  reason: string;
  message: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source: { component: string; host: string };
  reportingComponent: string;
  reportingInstance: string;
}

interface EventRecorderOptions {
  client: KubeClient;
  /** source.component and reportingComponent, e.g. "knative-fleet". */
  component: string;
  /** source.host and reportingInstance; the host name (the pod's name) by default. */
  host?: string;
  log: Logger;
  now?: () => Date;
}

/** A repeat within this long of the last occurrence counts on the existing Event (client-go: 10 minutes). */
const AGGREGATION_WINDOW_MS = 10 * 60_000;
/** Distinct messages for one (object, type, reason) within the window before they are combined. */
const MAX_SIMILAR_MESSAGES = 10;
/** Events remembered for aggregation, least recently seen dropped first (client-go's LRU size). */
const CACHE_SIZE = 4096;
/** events.k8s.io's note limit: a longer message is cut, so an error dump cannot bloat etcd. */
const MAX_MESSAGE_LENGTH = 1024;
const COMBINED_PREFIX = "(combined from similar events): ";
/**
 * client-go's EventSourceObjectSpamFilter: each object may have this many Events written at once, and then
 * one per SPAM_REFILL_MS. A thousand clusters that fail every retry write a few thousand Events, not one per
 * retry for as long as they fail.
 */
const SPAM_BURST = 25;
const SPAM_REFILL_MS = 5 * 60_000;

/** What the recorder remembers of an Event it wrote, to count a repeat on it. */
interface SeenEvent {
  namespace: string;
  name: string;
  count: number;
  firstTimestamp: string;
  lastSeenMs: number;
}

interface Occurrence {
  involved: InvolvedObject;
  type: EventType;
  reason: string;
  message: string;
}

/** An object's tokens for the spam filter, as of lastSeenMs. */
interface SpamTokens {
  tokens: number;
  lastSeenMs: number;
}

/** The distinct messages seen for one (object, type, reason), for the similar-event aggregation. */
interface SimilarMessages {
  messages: Set<string>;
  lastSeenMs: number;
}

/**
 * Records core/v1 Events on hub CRs (what `kubectl describe` lists), with client-go's EventRecorder
 * aggregation: a repeat of an Event (same object, type, reason and message) within 10 minutes patches
 * count and lastTimestamp of the existing Event instead of creating another; and once an object has had 10
 * different messages for one reason within 10 minutes, further ones are combined into a single Event, so a
 * reconcile error whose text changes every time cannot flood the namespace. And its spam filter: an object
 * gets SPAM_BURST Event writes, then one per SPAM_REFILL_MS; the rest are dropped.
 *
 * The aggregation state is in memory (the chart grants create and patch on events, not get or list), as in
 * client-go; after a restart a repeat starts a new Event. Recording never throws: an Event is a courtesy
 * to a person, and failing to write one must not fail a reconcile.
 */
export class EventRecorder {
  private readonly client: KubeClient;
  private readonly component: string;
  private readonly host: string;
  private readonly log: Logger;
  private readonly now: () => Date;
  private readonly seen = new Map<string, SeenEvent>();
  private readonly similar = new Map<string, SimilarMessages>();
  private readonly spam = new Map<string, SpamTokens>();
  /** The write in progress per Event key: a repeat waits for it, so two records never race to create. */
  private readonly pending = new Map<string, Promise<void>>();
  private lastNanos = 0n;

  constructor(options: EventRecorderOptions) {
    this.client = options.client;
    this.component = options.component;
    this.host = options.host ?? hostname();
    this.log = options.log;
    this.now = options.now ?? (() => new Date());
  }

  async record(involved: InvolvedObject, type: EventType, reason: string, message: string): Promise<void> {
    if (!this.takeToken(involved)) return;
    const { key, text } = this.aggregate(involved, type, reason, truncate(redactSecrets(message)));
    const occurrence = { involved, type, reason, message: text };
    const previous = this.pending.get(key) ?? Promise.resolve();
    const write = previous.then(() => this.write(key, occurrence));
    this.pending.set(key, write);
    await write;
    if (this.pending.get(key) === write) this.pending.delete(key);
  }

  /** client-go's spam filter: whether the object has a token left (one is taken), keyed as client-go keys it. */
  private takeToken(involved: InvolvedObject): boolean {
    const { name, namespace, uid } = involved.metadata;
    const key = JSON.stringify([
      this.component,
      this.host,
      involved.kind,
      namespace,
      name,
      uid,
      involved.apiVersion,
    ]);
    const nowMs = this.now().getTime();
    const last = this.spam.get(key);
    const refilled = last ? (nowMs - last.lastSeenMs) / SPAM_REFILL_MS : SPAM_BURST;
    const tokens = Math.min(SPAM_BURST, (last?.tokens ?? 0) + refilled);
    const allowed = tokens >= 1;
    remember(this.spam, key, { tokens: allowed ? tokens - 1 : tokens, lastSeenMs: nowMs }, nowMs);
    return allowed;
  }

  /**
   * client-go's EventAggregator. The key an occurrence counts on and the message it carries: its own
   * message, or once the object has had MAX_SIMILAR_MESSAGES distinct messages for this type and reason
   * within the window, one combined Event (keyed without the message) that shows the latest message.
   */
  private aggregate(
    involved: InvolvedObject,
    type: EventType,
    reason: string,
    message: string,
  ): { key: string; text: string } {
    const { name, namespace, uid } = involved.metadata;
    const similarKey = JSON.stringify([
      involved.apiVersion,
      involved.kind,
      namespace,
      name,
      uid,
      type,
      reason,
    ]);
    const nowMs = this.now().getTime();
    let similar = this.similar.get(similarKey);
    if (!similar || nowMs - similar.lastSeenMs > AGGREGATION_WINDOW_MS) {
      similar = { messages: new Set(), lastSeenMs: nowMs };
    }
    similar.messages.add(message);
    similar.lastSeenMs = nowMs;
    remember(this.similar, similarKey, similar, nowMs);
    if (similar.messages.size < MAX_SIMILAR_MESSAGES)
      return { key: `${similarKey}\n${message}`, text: message };
    // As client-go: the set grows no further. An object whose message changes at every occurrence keeps its
    // window open for as long as it fails, and would otherwise keep every message it ever had.
    similar.messages.delete(similar.messages.values().next().value!);
    return { key: similarKey, text: `${COMBINED_PREFIX}${message}` };
  }

  /** Counts a repeat on the Event written for `key`, or creates a new Event; logs a failure. */
  private async write(key: string, occurrence: Occurrence): Promise<void> {
    const { involved, reason, message } = occurrence;
    const at = this.now();
    const lastTimestamp = metaTime(at);
    const seen = this.seen.get(key);
    const repeat = seen && at.getTime() - seen.lastSeenMs <= AGGREGATION_WINDOW_MS ? seen : undefined;
    // Events on a cluster-scoped object live in the default namespace.
    const namespace = involved.metadata.namespace || "default";
    try {
      let written: SeenEvent;
      if (repeat) {
        written = { ...repeat, count: repeat.count + 1, lastSeenMs: at.getTime() };
        try {
          await this.client.mergePatch("v1", "Event", repeat.namespace, repeat.name, {
            count: written.count,
            lastTimestamp,
            message,
          });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          // The API server's event TTL removed it: write it again under its name, count carried over.
          await this.create(occurrence, written, lastTimestamp);
        }
      } else {
        written = {
          namespace,
          name: `${involved.metadata.name}.${this.uniqueNanos(at).toString(16)}`,
          count: 1,
          firstTimestamp: lastTimestamp,
          lastSeenMs: at.getTime(),
        };
        await this.create(occurrence, written, lastTimestamp);
      }
      remember(this.seen, key, written, at.getTime());
    } catch (err) {
      this.log.warn(
        { err: String(err), kind: involved.kind, namespace, name: involved.metadata.name, reason },
        "could not record event",
      );
    }
  }

  /**
   * client-go names an Event `<object>.<UnixNano in hex>`; JavaScript clocks tick in milliseconds, so
   * Events created within one millisecond get successive nanoseconds rather than the same name.
   */
  private uniqueNanos(at: Date): bigint {
    const nanos = BigInt(at.getTime()) * 1_000_000n;
    this.lastNanos = nanos > this.lastNanos ? nanos : this.lastNanos + 1n;
    return this.lastNanos;
  }

  private async create(occurrence: Occurrence, event: SeenEvent, lastTimestamp: string): Promise<void> {
    const { involved, type, reason, message } = occurrence;
    const { name, namespace, uid } = involved.metadata;
    const body: CoreEvent = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: event.name, namespace: event.namespace },
      involvedObject: { apiVersion: involved.apiVersion, kind: involved.kind, name, namespace, uid },
      type,
      reason,
      message,
      count: event.count,
      firstTimestamp: event.firstTimestamp,
      lastTimestamp,
      source: { component: this.component, host: this.host },
      reportingComponent: this.component,
      reportingInstance: this.host,
    };
    await this.client.rest.request({
      method: "POST",
      path: await this.client.path("v1", "Event", event.namespace),
      body,
    });
  }
}

/**
 * Stores an entry as the most recently seen one, dropping those last seen before the aggregation window
 * (nothing counts on them any more) and the least recently seen beyond CACHE_SIZE: the caches hold what the
 * last ten minutes wrote, not what hours of it did.
 */
function remember<T extends { lastSeenMs: number }>(
  cache: Map<string, T>,
  key: string,
  value: T,
  nowMs: number,
): void {
  cache.delete(key);
  cache.set(key, value);
  for (const [oldest, entry] of cache) {
    if (cache.size <= CACHE_SIZE && nowMs - entry.lastSeenMs <= AGGREGATION_WINDOW_MS) break;
    cache.delete(oldest);
  }
}

const truncate = (message: string): string =>
  message.length <= MAX_MESSAGE_LENGTH ? message : `${message.slice(0, MAX_MESSAGE_LENGTH - 3)}...`;

/** metav1.Time: RFC 3339 in whole seconds. */
const metaTime = (at: Date): string => at.toISOString().replace(/\.\d+Z$/, "Z");
