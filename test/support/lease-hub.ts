import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient } from "../../src/kube/client.ts";
import { KubeApiError } from "../../src/kube/rest.ts";
import type { MemberLease } from "../../src/service/shard-lease.ts";

// A hub that keeps member Leases in memory, with resourceVersions and conditional PUTs as the API server
// does them: the shard membership protocol is logic over conditional writes (test/integration/scale/
// sharding.test.ts runs it on a real hub). Each member gets its own link to it, which can be cut as a
// partition cuts it (the connection accepts and answers nothing until it heals; then the answers arrive,
// late) or slowed. It serves watches too: every write is an event, in order, from any resourceVersion.

/** One member's link to the hub. */
export interface HubLink {
  /** While true, every request waits until `heal()`. */
  cut: boolean;
  /** How long each answer takes (ms). */
  latencyMs: number;
  /** Answers every request held while cut, and ends the cut. */
  heal(): void;
  /**
   * Holds this link's watch events (the stream stays open and says nothing, as a stalled watch does) until
   * the returned function is called; then they arrive, in order, as a watch resumed from its
   * resourceVersion delivers them.
   */
  stallWatch(): () => void;
  /** While true, a watch is refused at once (a 500), as a hub that cannot serve watches refuses it. */
  failWatch: boolean;
  /** How much later than the write itself its answer arrives (ms): the watch may show the write first. */
  answerDelayMs: number;
  client: KubeClient;
}

export function leaseHub() {
  const leases = new Map<string, MemberLease>();
  let version = 0;
  const copy = <T>(value: T): T => structuredClone(value);
  /** Every version each Lease had: what an adversary may put back. */
  const history = new Map<string, MemberLease[]>();
  /** Every change, in order, as a watch tells it; each open watch hears the new ones. */
  const events: { version: number; type: "ADDED" | "MODIFIED" | "DELETED"; object: MemberLease }[] = [];
  const watchers = new Set<(event: (typeof events)[number]) => void>();
  const emit = (type: "ADDED" | "MODIFIED" | "DELETED", object: MemberLease) => {
    const event = { version, type, object: copy(object) };
    events.push(event);
    for (const watcher of watchers) watcher(event);
  };
  const store = (lease: MemberLease): MemberLease => {
    const existed = leases.has(lease.metadata.name);
    const stored = copy({ ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } });
    leases.set(lease.metadata.name, stored);
    history.set(lease.metadata.name, [...(history.get(lease.metadata.name) ?? []), stored]);
    emit(existed ? "MODIFIED" : "ADDED", stored);
    return copy(stored);
  };
  const remove = (name: string) => {
    const current = leases.get(name);
    if (!current) return;
    leases.delete(name);
    version++;
    emit("DELETED", { ...current, metadata: { ...current.metadata, resourceVersion: String(version) } });
  };
  /**
   * Writes a Lease as one who may write Leases does, unconditionally: `change` gets the current one (or
   * none) and returns what to store, or undefined to delete it.
   */
  const tamper = (name: string, change: (lease: MemberLease | undefined) => MemberLease | undefined) => {
    const next = change(copy(leases.get(name)));
    if (next === undefined) remove(name);
    else store(next);
  };
  const write = (method: string, path: string, body: MemberLease | undefined): MemberLease | object => {
    const name = method === "POST" ? body!.metadata.name : path.split("/").at(-1)!;
    const current = leases.get(name);
    const fail = (status: number, reason: string) => {
      throw new KubeApiError(method, path, status, reason, `${reason}: ${name}`);
    };
    if (method === "POST") return current ? fail(409, "AlreadyExists") : store(body!);
    if (!current) return fail(404, "NotFound");
    if (method === "DELETE") {
      // A delete with a precondition, as the API server takes it: refused once the Lease changed.
      const precondition = (body as { preconditions?: { resourceVersion?: string } } | undefined)
        ?.preconditions;
      if (
        precondition?.resourceVersion !== undefined &&
        precondition.resourceVersion !== current.metadata.resourceVersion
      )
        return fail(409, "Conflict");
      remove(name);
      return {};
    }
    if (body!.metadata.resourceVersion !== current.metadata.resourceVersion) return fail(409, "Conflict");
    return store(body!);
  };

  /** A `key=value` label selector (the only kind the members use), or everything. */
  const selects =
    (selector: string | undefined) =>
    (lease: MemberLease): boolean => {
      if (!selector) return true;
      const [key, value] = selector.split("=");
      return lease.metadata.labels?.[key!] === value;
    };

  const link = (): HubLink => {
    const held: (() => void)[] = [];
    let watchStalled: Promise<void> = Promise.resolve();
    // The request reaches the hub when it is answered: a write held by a cut lands after the heal.
    const answer = <T>(respond: () => T): Promise<T> =>
      self.cut
        ? new Promise<void>((resolve) => held.push(resolve)).then(respond)
        : sleep(self.latencyMs).then(respond);
    const answerLate = <T>(respond: () => T): Promise<T> =>
      answer(respond).then((value) => (self.answerDelayMs > 0 ? sleep(self.answerDelayMs, value) : value));
    const self: HubLink = {
      cut: false,
      latencyMs: 2,
      failWatch: false,
      answerDelayMs: 0,
      stallWatch: () => {
        let release = () => {};
        watchStalled = new Promise<void>((resolve) => {
          release = resolve;
        });
        return release;
      },
      heal: () => {
        self.cut = false;
        for (const release of held.splice(0)) release();
      },
      client: {
        path: async (apiVersion: string, kind: string, namespace: string, name?: string) => {
          if (apiVersion !== "coordination.k8s.io/v1" || kind !== "Lease")
            throw new Error(`this hub serves Leases only, not ${apiVersion} ${kind}`);
          return `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases${name ? `/${name}` : ""}`;
        },
        list: (_apiVersion: string, _kind: string, { labelSelector }: { labelSelector?: string } = {}) =>
          answer(() => ({
            items: [...leases.values()].filter(selects(labelSelector)).map(copy),
            resourceVersion: String(version),
          })),
        get: (_apiVersion: string, _kind: string, _namespace: string, name: string) =>
          answer(() => copy(leases.get(name))),
        rest: {
          request: ({ method, path, body }: { method: string; path: string; body?: MemberLease }) =>
            answerLate(() => ({ status: 200, body: write(method, path, body) })),
          // A watch from `resourceVersion`: the changes after it, then each new one, each answered over the
          // link (a cut holds them, in order, until the heal); it ends when the watcher aborts.
          stream: (
            _path: string,
            query: { resourceVersion?: string; labelSelector?: string },
            onLine: (value: unknown) => void,
            signal?: AbortSignal,
          ) =>
            new Promise<void>((resolve, reject) => {
              if (self.failWatch) {
                reject(new KubeApiError("GET", "watch", 500, "InternalError", "the hub serves no watch now"));
                return;
              }
              const from = Number(query.resourceVersion ?? 0);
              const selected = selects(query.labelSelector);
              // One after the other, as a watch stream delivers them, whatever the link's latency does.
              let delivered = Promise.resolve();
              const tell = (event: (typeof events)[number]) => {
                if (!selected(event.object)) return;
                delivered = delivered.then(async () => {
                  await watchStalled;
                  await answer(() => {
                    if (!signal?.aborted) onLine({ type: event.type, object: event.object });
                  });
                });
              };
              for (const event of events) if (event.version > from) tell(event);
              watchers.add(tell);
              const end = () => {
                watchers.delete(tell);
                resolve();
              };
              if (signal?.aborted) end();
              else signal?.addEventListener("abort", end, { once: true });
            }),
        },
      } as unknown as KubeClient,
    };
    return self;
  };
  // The shard key every member of this hub's deployment reads (service/shard-key.ts keeps it in a Secret).
  /** The watches open now (a member that stopped has closed its own). */
  const openWatches = () => watchers.size;
  return { link, leases, history, tamper, openWatches, key: randomBytes(32) as Uint8Array };
}
