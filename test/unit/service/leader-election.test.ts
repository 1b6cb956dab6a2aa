import { afterEach, describe, expect, it } from "vitest";
import type { KubeClient } from "../../../src/kube/client.ts";
import { KubeApiError, type RestRequest } from "../../../src/kube/rest.ts";
import { type Logger, silentLogger } from "../../../src/observability/log.ts";
import {
  type LeaderElectionOptions,
  LeaderElector,
  processIdentity,
} from "../../../src/service/leader-election.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import { waitUntil } from "../../support/wait.ts";

// Short timings keep the tests fast; the ratios are the defaults' (15 s / 10 s / 2 s).
const TIMING = { leaseDurationMs: 750, renewDeadlineMs: 500, retryPeriodMs: 100 };
const LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";

interface StoredLease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity: string;
    leaseDurationSeconds: number;
    acquireTime: string;
    renewTime: string;
    leaseTransitions: number;
  };
}

/**
 * One Lease kept in memory with the API server's optimistic concurrency (a write must carry the current
 * resourceVersion), reached through one client per replica. A replica's client can be cut off: its
 * requests then hang, as across a network partition. `afterWrite` is told of each write the server stored;
 * the client hears of it once what it returns has settled (a slow answer).
 */
function leaseServer() {
  let lease: StoredLease | undefined;
  let version = 0;
  const stored = () => structuredClone(lease);
  /** Requests the server answered, by method (GET for reads). */
  const requests = { GET: 0, POST: 0, PUT: 0 };
  const clientFor = (afterWrite: (method: string) => Promise<void> | undefined = () => undefined) => {
    let cut = false;
    const hang = () => new Promise<never>(() => {});
    const client = {
      path: async (_apiVersion: string, _kind: string, _namespace: string, name?: string) =>
        name ? `${LEASE_PATH}/${name}` : LEASE_PATH,
      get: async () => {
        if (cut) return hang();
        requests.GET++;
        return stored();
      },
      rest: {
        request: async (req: RestRequest) => {
          if (cut) return hang();
          requests[req.method as "POST" | "PUT"]++;
          const body = structuredClone(req.body) as StoredLease;
          if (req.method === "POST" && lease)
            throw new KubeApiError("POST", req.path, 409, "AlreadyExists", "");
          if (req.method === "PUT" && body.metadata.resourceVersion !== lease?.metadata.resourceVersion) {
            throw new KubeApiError("PUT", req.path, 409, "Conflict", "the object has been modified");
          }
          lease = { ...body, metadata: { ...body.metadata, resourceVersion: String(++version) } };
          const answer = { status: 200, body: stored() };
          await afterWrite(req.method);
          return answer;
        },
      },
    } as unknown as KubeClient;
    return { client, cut: () => (cut = true) };
  };
  /** Another client's write that leaves the spec as it is (a label, say): the resourceVersion moves on. */
  const touch = () => {
    if (lease) lease = { ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } };
  };
  /** Another replica's write taking the Lease (as after this one was cut off from the hub). */
  const takeOver = (holder: string) => {
    const now = new Date().toISOString().replace("Z", "000Z");
    if (lease)
      lease = {
        metadata: { ...lease.metadata, resourceVersion: String(++version) },
        spec: {
          ...lease.spec,
          holderIdentity: holder,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: 1,
        },
      };
  };
  return { clientFor, lease: () => lease, requests, touch, takeOver };
}

/** A replica: its elector, and a log of its callbacks with the time each was called. */
function replica(
  server: ReturnType<typeof leaseServer>,
  identity: string,
  callbacks: Partial<Pick<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading">> = {},
  afterWrite?: (method: string) => Promise<void> | undefined,
  log: Logger = silentLogger,
) {
  const { client, cut } = server.clientFor(afterWrite);
  const calls: { call: "started" | "stopped"; atMs: number }[] = [];
  const elector = new LeaderElector({
    client,
    namespace: "ns",
    name: "fleet",
    identity,
    log,
    ...TIMING,
    onStartedLeading: () => {
      calls.push({ call: "started", atMs: performance.now() });
      return callbacks.onStartedLeading?.();
    },
    onStoppedLeading: () => {
      calls.push({ call: "stopped", atMs: performance.now() });
      return callbacks.onStoppedLeading?.();
    },
  });
  electors.push(elector);
  return { elector, calls, cut };
}

const electors: LeaderElector[] = [];
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.stop()));
});

/** Replica "a" leading on a fresh Lease, then replica "b" started as a candidate. */
async function leaderAndCandidate(leaderLog?: Logger) {
  const server = leaseServer();
  const a = replica(server, "a", {}, undefined, leaderLog);
  a.elector.start();
  await until("a leads", () => a.elector.isLeader);
  const b = replica(server, "b");
  b.elector.start();
  return { server, a, b };
}

const until = (what: string, condition: () => boolean) =>
  waitUntil(what, async () => (condition() ? true : undefined), 5_000);

describe("processIdentity", () => {
  it("names the pod and differs for every process, so a restarted container is a new candidate", () => {
    const [first, restarted] = [processIdentity("fleet-0"), processIdentity("fleet-0")];
    expect(first).toMatch(/^fleet-0_[0-9a-f-]{36}$/);
    expect(restarted).not.toBe(first);
    expect(processIdentity(undefined)).toMatch(/^.+_[0-9a-f-]{36}$/);
  });
});

describe("leader election", () => {
  it("refuses timings under which a leader could still act after another took over", () => {
    const options = {
      client: {} as KubeClient,
      namespace: "ns",
      name: "l",
      identity: "a",
      log: silentLogger,
    };
    const callbacks = { onStartedLeading() {}, onStoppedLeading() {} };
    expect(() => new LeaderElector({ ...options, ...callbacks, leaseDurationMs: 10_000 })).toThrow(
      /leaseDurationMs/,
    );
    expect(() => new LeaderElector({ ...options, ...callbacks, retryPeriodMs: 9_000 })).toThrow(
      /retryPeriodMs/,
    );
    expect(() => new LeaderElector({ ...options, ...callbacks, identity: "" })).toThrow(/identity/);
  });

  it("lets exactly one of two replicas lead, renewing the Lease without a new transition", async () => {
    const server = leaseServer();
    const a = replica(server, "a");
    const b = replica(server, "b");
    a.elector.start();
    b.elector.start();
    await until("a leader", () => a.elector.isLeader || b.elector.isLeader);
    const first = server.lease()!.spec;
    const leader = first.holderIdentity === "a" ? a : b;
    for (let i = 0; i < 10; i++) {
      expect([a.elector.isLeader, b.elector.isLeader].filter(Boolean)).toHaveLength(1);
      await new Promise((r) => setTimeout(r, TIMING.retryPeriodMs));
    }
    const later = server.lease()!.spec;
    expect(leader.elector.isLeader).toBe(true);
    expect(later).toMatchObject({
      holderIdentity: first.holderIdentity,
      leaseDurationSeconds: 1,
      acquireTime: first.acquireTime,
      leaseTransitions: 0,
    });
    expect(later.renewTime > first.renewTime).toBe(true);
    expect(later.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(leader.calls.map((c) => c.call)).toEqual(["started"]);
  });

  it("renews with one write and no read while the Lease is as the leader left it; reads again once it moved", async () => {
    const server = leaseServer();
    const log = capturingLogger();
    const a = replica(server, "a", {}, undefined, log.logger);
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    const renewals = (n: number) => {
      const after = server.requests.PUT + n;
      return until(`${n} renewals`, () => server.requests.PUT >= after);
    };
    await renewals(1);
    const reads = server.requests.GET;
    await renewals(4);
    // client-go's fast path: a busy replica's renewal is one request to wait on, not two.
    expect(server.requests.GET).toBe(reads);

    server.touch(); // the next optimistic write gets a 409: read, then write at the new version
    const renewTime = server.lease()!.spec.renewTime;
    await until("renewed after the Lease moved", () => server.lease()!.spec.renewTime > renewTime);
    expect(server.requests.GET).toBe(reads + 1);
    expect(log.lines()).toContainEqual(
      expect.objectContaining({
        level: 20,
        msg: "could not renew over its last write; reading the Lease",
        err: expect.stringContaining("409"),
      }),
    );
    expect(a.elector.isLeader).toBe(true);
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "a", leaseTransitions: 0 });
    expect(a.calls.map((c) => c.call)).toEqual(["started"]);
  });

  it("a leader that finds the Lease another's never writes over it, though its last read carries the version", async () => {
    const server = leaseServer();
    const a = replica(server, "a");
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    server.takeOver("b");
    // a's renewals: the optimistic write gets a 409, the read finds b's record, and every later renewal
    // must read again rather than write over b's version, until a steps down at renewDeadline.
    await until("a stepped down", () => a.calls.map((c) => c.call).includes("stopped"));
    expect(server.lease()!.spec.holderIdentity).toBe("b");
    expect(server.requests.GET).toBeGreaterThan(1);
    // b never renews: once its record expired, a takes the Lease (a transition), and its renewals keep it.
    await until("a leads again", () => a.elector.isLeader);
    const taken = server.lease()!.spec;
    expect(taken).toMatchObject({ holderIdentity: "a", leaseTransitions: 2 });
    const puts = server.requests.PUT;
    await until("renewed twice", () => server.requests.PUT >= puts + 2);
    expect(server.lease()!.spec).toMatchObject({
      holderIdentity: "a",
      acquireTime: taken.acquireTime,
      leaseTransitions: 2,
      leaseDurationSeconds: 1,
    });
    expect(server.lease()!.spec.renewTime > taken.renewTime).toBe(true);
  });

  it("releases the Lease on stop, after onStoppedLeading, so the standby takes over at its next poll", async () => {
    const server = leaseServer();
    let holderWhileStopping: string | undefined;
    const a = replica(server, "a", {
      onStoppedLeading: () => {
        holderWhileStopping = server.lease()!.spec.holderIdentity;
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    const b = replica(server, "b");
    b.elector.start();
    await new Promise((r) => setTimeout(r, 3 * TIMING.retryPeriodMs));
    expect(b.elector.isLeader).toBe(false);

    const stoppedAt = performance.now();
    await a.elector.stop();
    expect(holderWhileStopping).toBe("a"); // the work stopped while the Lease was still held
    expect(a.calls.map((c) => c.call)).toEqual(["started", "stopped"]);
    await until("b leads", () => b.elector.isLeader);
    // Well under the lease duration: at most one jittered poll (retry period × 2.2).
    expect(performance.now() - stoppedAt).toBeLessThan(2.2 * TIMING.retryPeriodMs + 250);
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
  });

  it("releases the Lease on stop though a renewal of its own, still unanswered, moved it on", async () => {
    const server = leaseServer();
    // The stop comes while a renewal is stored but not yet answered: the leader's last known
    // resourceVersion is already old when it releases (a renewal on another connection, a slow answer).
    let stopOnRenewal = false;
    let stopping: Promise<void> | undefined;
    const a = replica(server, "a", {}, (method) => {
      if (method !== "PUT" || !stopOnRenewal || stopping) return undefined;
      stopping = a.elector.stop();
      return new Promise((answer) => setTimeout(answer, 50));
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    stopOnRenewal = true;
    await until("a renewed and stopped", () => stopping !== undefined);
    await stopping;
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1 });
  });

  it("a cut-off leader stops after renewDeadline, before the standby takes over after leaseDuration, and says why", async () => {
    const log = capturingLogger();
    const { server, a, b } = await leaderAndCandidate(log.logger);
    await new Promise((r) => setTimeout(r, 2 * TIMING.retryPeriodMs));

    const cutAt = performance.now();
    a.cut();
    await until("b leads", () => b.elector.isLeader);
    const stoppedAt = a.calls.find((c) => c.call === "stopped")!.atMs;
    const startedAt = b.calls.find((c) => c.call === "started")!.atMs;
    expect(a.elector.isLeader).toBe(false);
    expect(stoppedAt - cutAt).toBeLessThanOrEqual(TIMING.renewDeadlineMs + 100); // timers may fire late
    expect(startedAt).toBeGreaterThan(stoppedAt);
    expect(startedAt - cutAt).toBeGreaterThanOrEqual(TIMING.leaseDurationMs - TIMING.retryPeriodMs);
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
    // An unanswered renewal is said as it happens, not only the loss it leads to.
    const said = log.lines().map((line) => [line.level, line.msg]);
    const unanswered = said.findIndex(([, msg]) => msg === "the Lease renewal got no answer in time");
    expect(said[unanswered]).toEqual([40, "the Lease renewal got no answer in time"]);
    const waitedMs = log.lines()[unanswered]!.waitedMs as number;
    expect(waitedMs).toBeGreaterThan(0);
    expect(waitedMs).toBeLessThanOrEqual(TIMING.renewDeadlineMs);
    expect(said.findIndex(([, msg]) => String(msg).startsWith("lost leadership"))).toBeGreaterThan(
      unanswered,
    );
    expect(
      said.filter(([, msg]) => msg === "the Lease renewal got no answer in time").length,
    ).toBeLessThanOrEqual(Math.ceil(TIMING.renewDeadlineMs / TIMING.retryPeriodMs));
  });

  it("a leader that steps down while a renewal is out does not call it unanswered", async () => {
    const log = capturingLogger();
    const { a } = await leaderAndCandidate(log.logger);
    a.cut();
    await new Promise((r) => setTimeout(r, TIMING.retryPeriodMs + 20)); // a renewal is out, unanswered
    await a.elector.stop();
    expect(log.text()).not.toContain("the Lease renewal got no answer in time");
  });

  it("steps down when onStartedLeading fails, releasing the Lease, and runs for leader again", async () => {
    const server = leaseServer();
    let attempts = 0;
    const a = replica(server, "a", {
      onStartedLeading: async () => {
        if (++attempts === 1) throw new Error("hub unreachable");
      },
    });
    a.elector.start();
    await until("a leads a second time", () => attempts === 2 && a.elector.isLeader);
    expect(a.calls.map((c) => c.call)).toEqual(["started", "stopped", "started"]);
    // Released (transitions kept), then acquired afresh: one transition.
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "a", leaseTransitions: 1 });
  });

  it("stops promptly as a candidate, without ever leading", async () => {
    const { server, b } = await leaderAndCandidate();
    const stoppedAt = performance.now();
    await b.elector.stop();
    expect(performance.now() - stoppedAt).toBeLessThan(50);
    expect(b.calls).toEqual([]);
    expect(server.lease()!.spec.holderIdentity).toBe("a");
  });
});
