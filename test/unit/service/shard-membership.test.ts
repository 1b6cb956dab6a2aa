import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import type { KubeClient } from "../../../src/kube/client.ts";
import { KubeApiError } from "../../../src/kube/rest.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { processIdentity } from "../../../src/service/leader-election.ts";
import { type MemberLease, ShardMembership } from "../../../src/service/sharding.ts";

// ShardMembership's timing over a hub that keeps member Leases (a fake: the membership protocol is logic
// over conditional writes; test/integration/scale/sharding.test.ts runs it on a real hub). Short timings:
// 600 ms lease, 400 ms renew deadline, 100 ms retry period. A member is cut off from the hub by making
// every request it sends hang, as a partition does (the connection accepts and answers nothing until it
// heals; then the answers arrive, late).

const LEASE_MS = 600;
const DEADLINE_MS = 400;
const RETRY_MS = 100;
const CLUSTERS = Array.from({ length: 24 }, (_, i) => `fleet-system/spoke-${i + 1}`);

/** Member Leases kept in memory, with resourceVersions and conditional PUTs as the API server does them. */
function leaseHub() {
  const leases = new Map<string, MemberLease>();
  let version = 0;
  const copy = <T>(value: T): T => structuredClone(value);
  const store = (lease: MemberLease): MemberLease => {
    const stored = copy({ ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } });
    leases.set(lease.metadata.name, stored);
    return copy(stored);
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
      leases.delete(name);
      return {};
    }
    if (body!.metadata.resourceVersion !== current.metadata.resourceVersion) return fail(409, "Conflict");
    return store(body!);
  };
  /** A client of the hub for one member; while `cut()` says so, its requests wait for `heal()`. */
  const held: (() => void)[] = [];
  const heal = () => {
    for (const release of held.splice(0)) release();
  };
  const client = (cut: () => boolean): KubeClient => {
    const answer = <T>(respond: () => T): Promise<T> =>
      cut() ? new Promise<void>((resolve) => held.push(resolve)).then(respond) : sleep(2).then(respond);
    return {
      path: async (_apiVersion: string, _kind: string, namespace: string, name?: string) =>
        `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases${name ? `/${name}` : ""}`,
      list: () => answer(() => ({ items: [...leases.values()].map(copy) })),
      get: (_apiVersion: string, _kind: string, _namespace: string, name: string) =>
        answer(() => copy(leases.get(name))),
      rest: {
        request: ({ method, path, body }: { method: string; path: string; body?: MemberLease }) =>
          answer(() => ({ status: 200, body: write(method, path, body) })),
      },
    } as unknown as KubeClient;
  };
  return { client, heal };
}

interface Member {
  identity: string;
  membership: ShardMembership;
  /** performance.now() of each onNarrowed call. */
  narrowed: number[];
  cut: boolean;
}

const started: ShardMembership[] = [];
const warnings: string[] = [];
const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
process.on("warning", onWarning);
afterEach(async () => {
  expect(warnings.splice(0), "process warnings (a negative timer: a late answer)").toEqual([]);
  await Promise.all(started.splice(0).map((m) => m.stop()));
});

function member(hub: ReturnType<typeof leaseHub>, pod: string): Member {
  const self = { identity: processIdentity(pod), narrowed: [], cut: false } as unknown as Member;
  self.membership = new ShardMembership({
    client: hub.client(() => self.cut),
    namespace: "knative-fleet",
    group: "knative-fleet",
    identity: self.identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    log: silentLogger,
    onNarrowed: () => self.narrowed.push(performance.now()),
    settle: async () => {},
    onWidened: () => {},
    vouch: async () => true,
  });
  self.membership.start();
  started.push(self.membership);
  return self;
}

const owned = (m: Member) => CLUSTERS.filter((c) => m.membership.owns(c));

/** Samples every few ms until `until` says stop; fails at once on a cluster two members own. */
async function watchOwners(members: Member[], until: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    for (const c of CLUSTERS) {
      const owners = members.filter((m) => m.membership.owns(c)).map((m) => m.identity);
      expect(owners.length, `${c} owned by ${owners.join(" and ")}`).toBeLessThanOrEqual(1);
    }
    if (until()) return;
    if (performance.now() > deadline) throw new Error("timed out");
    await sleep(5);
  }
}

describe("a shard member cut off from the hub", () => {
  it("drops every cluster at its renew deadline though its requests hang, before the other takes them", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    const b = member(hub, "replica-b");
    const everyClusterOwned = () => CLUSTERS.every((c) => [a, b].some((m) => m.membership.owns(c)));
    await watchOwners(
      [a, b],
      () => everyClusterOwned() && owned(a).length > 0 && owned(b).length > 0,
      10_000,
    );

    const cutAt = performance.now();
    a.cut = true;
    const narrowedBefore = a.narrowed.length;
    // b takes every cluster once a's Lease expired (seen from b), and never while a still owns one.
    await watchOwners([a, b], () => owned(b).length === CLUSTERS.length, 10_000);
    const droppedAt = a.narrowed[narrowedBefore];
    expect(droppedAt, "a dropped its clusters (onNarrowed)").toBeDefined();
    // Within the renew deadline of its last renewal (sent at most a retry period before the cut), while its
    // requests were hanging: no round of its own got that far.
    expect(droppedAt! - cutAt).toBeLessThan(DEADLINE_MS + 50);
    expect(owned(a)).toEqual([]);

    // The partition heals: a's old requests are answered (late), it rejoins, and the two split the clusters
    // again, never sharing one.
    a.cut = false;
    hub.heal();
    await watchOwners([a, b], () => everyClusterOwned() && owned(a).length > 0, 10_000);
    expect(owned(a).length + owned(b).length).toBe(CLUSTERS.length);
  });

  it("a member alone that cannot renew owns nothing after the deadline, and takes everything back once it can", async () => {
    const hub = leaseHub();
    const a = member(hub, "replica-a");
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 5_000);
    a.cut = true;
    await sleep(DEADLINE_MS + 60);
    expect(owned(a)).toEqual([]);
    a.cut = false;
    hub.heal();
    await watchOwners([a], () => owned(a).length === CLUSTERS.length, 5_000);
  });
});
