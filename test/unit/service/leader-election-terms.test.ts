import { afterEach, describe, expect, it, vi } from "vitest";
import type { KubeClient } from "../../../src/kube/client.ts";
import { KubeApiError } from "../../../src/kube/rest.ts";
import { type Logger, silentLogger } from "../../../src/observability/log.ts";
import { type LeaderElectionOptions, LeaderElector } from "../../../src/service/leader-election.ts";
import type { Lease, LeaseSpec } from "../../../src/service/lease.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";

// The terms replicas and operators rely on, one by one, against a Lease server whose every request can be
// seen, delayed or failed. Timings have the defaults' ratios (15 s / 10 s / 2 s).
const TIMING = { leaseDurationMs: 750, renewDeadlineMs: 500, retryPeriodMs: 100 };
const LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";

interface Request {
  who: string;
  method: "GET" | "POST" | "PUT";
  path: string;
  body?: Lease;
  atMs: number;
}
/** Runs before the server answers a request: may delay it (await), fail it (throw) or hang it. */
type Hook = (request: Request) => Promise<void> | void;

function leaseServer(initial?: LeaseSpec) {
  let version = 1;
  let lease: Lease | undefined = initial && {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: "fleet", namespace: "ns", resourceVersion: "1" },
    spec: initial,
  };
  const requests: Request[] = [];
  const clientFor = (
    who: string,
    hook: Hook = () => undefined,
    answer = (_r: Request, body: Lease) => body,
  ) =>
    ({
      path: async (_apiVersion: string, _kind: string, _namespace: string, name?: string) =>
        name ? `${LEASES}/${name}` : LEASES,
      get: async () => {
        const request: Request = { who, method: "GET", path: `${LEASES}/fleet`, atMs: performance.now() };
        requests.push(request);
        await hook(request);
        return structuredClone(lease);
      },
      rest: {
        request: async ({ method, path, body }: { method: "POST" | "PUT"; path: string; body: Lease }) => {
          const request: Request = {
            who,
            method,
            path,
            body: structuredClone(body),
            atMs: performance.now(),
          };
          requests.push(request);
          await hook(request);
          // The API server's routes: a create on the collection, an update on the named object.
          const expected = method === "POST" ? LEASES : `${LEASES}/${body.metadata.name}`;
          if (path !== expected) throw new KubeApiError(method, path, 404, "NotFound", "no such path");
          if (method === "POST" && lease) throw new KubeApiError(method, path, 409, "AlreadyExists", "");
          if (method === "PUT" && body.metadata.resourceVersion !== lease?.metadata.resourceVersion)
            throw new KubeApiError(method, path, 409, "Conflict", "the object has been modified");
          lease = {
            ...structuredClone(body),
            metadata: { ...body.metadata, resourceVersion: String(++version) },
          };
          return { status: 200, body: answer(request, structuredClone(lease)) };
        },
      },
    }) as unknown as KubeClient;
  return { clientFor, requests, lease: () => lease };
}

const electors: LeaderElector[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(electors.splice(0).map((e) => e.stop()));
});

function replica(
  server: ReturnType<typeof leaseServer>,
  identity: string,
  options: {
    hook?: Hook;
    /** What the replica hears of a stored write. */
    answer?: (request: Request, body: Lease) => Lease;
    log?: Logger;
    onStartedLeading?: () => void | Promise<void>;
    onStoppedLeading?: () => void | Promise<void>;
  } = {},
) {
  const calls: string[] = [];
  const elector = new LeaderElector({
    client: server.clientFor(identity, options.hook, options.answer),
    namespace: "ns",
    name: "fleet",
    identity,
    log: options.log ?? silentLogger,
    ...TIMING,
    onStartedLeading: () => {
      calls.push("started");
      return options.onStartedLeading?.();
    },
    onStoppedLeading: () => {
      calls.push("stopped");
      return options.onStoppedLeading?.();
    },
  });
  electors.push(elector);
  return { elector, calls };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, condition: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}
const said = (log: ReturnType<typeof capturingLogger>, msg: string) =>
  log.lines().filter((l) => l.msg === msg);
const isRelease = (r: Request) => r.method === "PUT" && r.body?.spec?.holderIdentity === "";
const conflict = () =>
  new KubeApiError("PUT", `${LEASES}/fleet`, 409, "Conflict", "the object has been modified");
const serverError = (method = "GET") =>
  new KubeApiError(method, `${LEASES}/fleet`, 500, "InternalError", "etcd");

describe("leader election options", () => {
  const base = {
    client: {} as KubeClient,
    namespace: "ns",
    name: "fleet",
    identity: "a",
    log: silentLogger,
    onStartedLeading() {},
    onStoppedLeading() {},
  } satisfies LeaderElectionOptions;

  it("refuses a lease duration not above the renew deadline, and says which", () => {
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 10_000 })).toThrow(
      "leaseDurationMs must be greater than renewDeadlineMs",
    );
  });

  it("refuses a renew deadline not above 1.2 retry periods (the acquire jitter), equality included", () => {
    const timing = { leaseDurationMs: 2_000, retryPeriodMs: 1_000 };
    expect(() => new LeaderElector({ ...base, ...timing, renewDeadlineMs: 1_200 })).toThrow(
      "renewDeadlineMs must be greater than 1.2 × retryPeriodMs",
    );
    expect(() => new LeaderElector({ ...base, ...timing, renewDeadlineMs: 1_201 })).not.toThrow();
  });

  it("refuses an empty identity, with which any replica could renew another's term", () => {
    expect(() => new LeaderElector({ ...base, identity: "" })).toThrow(
      "leader election needs a non-empty identity",
    );
  });

  it("refuses a second start, which would run two candidates under one identity", () => {
    const { elector } = replica(leaseServer(), "a");
    elector.start();
    expect(() => elector.start()).toThrow("the leader elector was already started");
  });
});

describe("leader election terms", () => {
  it("creates the Lease as a coordination.k8s.io/v1 Lease on the collection, then updates it by name", async () => {
    const server = leaseServer();
    const a = replica(server, "a");
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await until("a renewed", () => server.requests.some((r) => r.method === "PUT"));
    const created = server.requests.find((r) => r.method === "POST")!;
    expect(created.body).toMatchObject({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "fleet", namespace: "ns" },
      spec: { holderIdentity: "a", leaseDurationSeconds: 1, leaseTransitions: 0 },
    });
    expect(server.lease()).toMatchObject({ kind: "Lease", spec: { holderIdentity: "a" } });
  });

  it("logs, with the Lease and identity on every line, running, becoming leader and stepping down", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    const a = replica(server, "a", { log: log.logger });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    const messages = log
      .lines()
      .filter((l) => (l.level as number) >= 30)
      .map((l) => l.msg);
    expect(messages).toEqual(["running for leader", "became leader", "stepping down", "released the Lease"]);
    for (const line of log.lines()) expect(line).toMatchObject({ lease: "ns/fleet", identity: "a" });
  });

  it("names a new leader once, as a candidate sees it, never itself nor an empty holder", async () => {
    const server = leaseServer();
    const [logA, logB] = [capturingLogger(), capturingLogger()];
    const a = replica(server, "a", { log: logA.logger });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    const b = replica(server, "b", { log: logB.logger });
    b.elector.start();
    await sleep(4 * TIMING.retryPeriodMs); // a renews several times: new records, the same holder
    await a.elector.stop(); // an empty holder, which b sees before it takes the Lease
    await until("b leads", () => b.elector.isLeader);
    expect(said(logB, "new leader observed").map((l) => l.leader)).toEqual(["a"]);
    expect(said(logB, "new leader observed")[0]).toMatchObject({ level: 30, identity: "b" });
    expect(said(logA, "new leader observed")).toEqual([]);
  });

  it("takes over a Lease with no holder at once", async () => {
    const server = leaseServer({ leaseDurationSeconds: 60, leaseTransitions: 2 });
    const a = replica(server, "a");
    const startedAt = performance.now();
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    expect(performance.now() - startedAt).toBeLessThan(TIMING.retryPeriodMs);
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "a", leaseTransitions: 3 });
  });

  it("reads a Lease without a duration as lasting this replica's lease duration", async () => {
    const server = leaseServer({ holderIdentity: "z", leaseTransitions: 0 });
    const a = replica(server, "a");
    const startedAt = performance.now();
    a.elector.start();
    await until("a leads", () => a.elector.isLeader, 2_000);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(TIMING.leaseDurationMs);
  });

  it("keeps the transition count when it releases the Lease", async () => {
    const server = leaseServer({ holderIdentity: "", leaseDurationSeconds: 1, leaseTransitions: 4 });
    const a = replica(server, "a");
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    expect(server.lease()!.spec).toMatchObject({
      holderIdentity: "",
      leaseDurationSeconds: 1,
      leaseTransitions: 5,
    });
  });

  it("spreads a candidate's polls over 1 to 2.2 retry periods (client-go's jitter)", async () => {
    const server = leaseServer({ holderIdentity: "z", leaseDurationSeconds: 60, leaseTransitions: 0 });
    vi.spyOn(Math, "random").mockReturnValue(0.99); // the longest pause: 1 + 0.99 × 1.2 retry periods
    const b = replica(server, "b");
    b.elector.start();
    await until("three polls", () => server.requests.length >= 3);
    const times = server.requests.map((r) => r.atMs);
    for (const [i, at] of times.slice(1).entries()) {
      expect(at - times[i]!).toBeGreaterThanOrEqual(2.188 * TIMING.retryPeriodMs - 2);
      expect(at - times[i]!).toBeLessThan(2.2 * TIMING.retryPeriodMs + 60);
    }
  });

  it("says a lost race (409) at debug level, not as a failure, and tries again", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    let raced = false;
    const a = replica(server, "a", {
      log: log.logger,
      hook: (r) => {
        if (r.method === "POST" && !raced) {
          raced = true;
          throw new KubeApiError("POST", r.path, 409, "AlreadyExists", "");
        }
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    expect(said(log, "lost a race for the Lease")).toMatchObject([{ level: 20 }]);
    expect(log.lines().filter((l) => (l.level as number) >= 40)).toEqual([]);
  });

  it("never leads while it cannot read the Lease, and warns with the error", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    const b = replica(server, "b", {
      log: log.logger,
      hook: () => {
        throw serverError();
      },
    });
    b.elector.start();
    await sleep(3 * TIMING.retryPeriodMs);
    expect(b.elector.isLeader).toBe(false);
    expect(b.calls).toEqual([]);
    const warned = said(log, "could not acquire or renew the Lease");
    expect(warned.length).toBeGreaterThan(0);
    expect(warned[0]).toMatchObject({ level: 40, err: expect.stringContaining("500 InternalError") });
    expect(said(log, "lost a race for the Lease")).toEqual([]);
  });

  it("a leader that lost the Lease does not write it again (no release): it may be another's", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    // Every request fails (a leader renews without a read while its record holds: failing reads alone
    // would not do); a release would still be recorded by the server.
    let failing = false;
    const a = replica(server, "a", {
      log: log.logger,
      hook: () => {
        if (failing) throw serverError();
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    failing = true;
    await until("a lost", () => a.calls.includes("stopped"));
    await sleep(20);
    expect(said(log, "lost leadership: the Lease was not renewed in time")).toHaveLength(1);
    expect(server.requests.filter(isRelease)).toEqual([]);
    expect(server.lease()!.spec!.holderIdentity).toBe("a");
  });

  it("stopping just as its winning write comes back, releases the Lease without ever leading", async () => {
    const server = leaseServer();
    let stopping: Promise<void> | undefined;
    // The stop lands after the winning write settled but before the elector acted on it: two microtasks
    // after the elector first reads the answer's spec (its answer settles in between).
    const stopOnFirstRead = (body: Lease): Lease => {
      let spec = body.spec;
      let read = false;
      return Object.defineProperty(body, "spec", {
        get: () => {
          if (!read)
            queueMicrotask(() =>
              queueMicrotask(() => {
                stopping = a.elector.stop();
              }),
            );
          read = true;
          return spec;
        },
        set: (value: LeaseSpec) => {
          spec = value;
        },
        enumerable: true,
      });
    };
    const a = replica(server, "a", {
      answer: (r, body) => (r.method === "POST" ? stopOnFirstRead(body) : body),
    });
    a.elector.start();
    await until("a stopping", () => stopping !== undefined);
    await stopping;
    expect(a.calls).toEqual([]);
    expect(server.lease()!.spec).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1 });
  });

  it("stops, releasing the Lease, when stopped from within onStartedLeading", async () => {
    const server = leaseServer();
    let stopping: Promise<void> | undefined;
    const a = replica(server, "a", {
      onStartedLeading: () => {
        stopping = a.elector.stop();
      },
    });
    a.elector.start();
    await until("a stopping", () => stopping !== undefined);
    const stopped = await Promise.race([stopping!.then(() => true), sleep(1_000).then(() => false)]);
    expect(stopped).toBe(true);
    expect(a.calls).toEqual(["started", "stopped"]);
    expect(server.lease()!.spec!.holderIdentity).toBe("");
  });

  it("when onStartedLeading rejects, logs the error and steps down", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    let attempts = 0;
    const a = replica(server, "a", {
      log: log.logger,
      onStartedLeading: async () => {
        if (++attempts === 1) throw new Error("hub unreachable");
      },
    });
    a.elector.start();
    await until("a leads again", () => attempts === 2 && a.elector.isLeader);
    expect(said(log, "onStartedLeading failed; stepping down")).toMatchObject([
      { level: 50, err: "Error: hub unreachable" },
    ]);
    expect(said(log, "stepping down")).toHaveLength(1);
  });

  it("logs a rejecting onStoppedLeading and still releases the Lease", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    const a = replica(server, "a", {
      log: log.logger,
      onStoppedLeading: async () => {
        throw new Error("drain failed");
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    expect(said(log, "onStoppedLeading failed")).toMatchObject([{ level: 50, err: "Error: drain failed" }]);
    expect(server.lease()!.spec!.holderIdentity).toBe("");
  });

  it("after stepping down, sends no renewal: the release is the only write", async () => {
    const server = leaseServer();
    let stoppedAt = Number.POSITIVE_INFINITY;
    const a = replica(server, "a", {
      onStoppedLeading: async () => {
        stoppedAt = performance.now();
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    const after = server.requests.filter((r) => r.atMs >= stoppedAt);
    expect(after.map((r) => [r.method, r.body?.spec?.holderIdentity])).toEqual([["PUT", ""]]);
  });

  it("waits up to renewDeadline for a slow answer to its release", async () => {
    const server = leaseServer();
    const a = replica(server, "a", {
      hook: async (r) => {
        if (isRelease(r)) await sleep(30);
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    expect(server.lease()!.spec!.holderIdentity).toBe("");
  });

  it("gives up an unanswered release after renewDeadline and says the Lease expires instead", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    const a = replica(server, "a", {
      log: log.logger,
      hook: (r) => (isRelease(r) ? new Promise<never>(() => {}) : undefined),
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    const stoppingAt = performance.now();
    await a.elector.stop();
    expect(performance.now() - stoppingAt).toBeLessThan(TIMING.renewDeadlineMs + 150);
    expect(said(log, "released the Lease")).toEqual([]);
    expect(said(log, "could not release the Lease; it expires instead")).toMatchObject([
      { level: 40, err: `Error: no answer within ${TIMING.renewDeadlineMs} ms` },
    ]);
  });

  it("tries a release that keeps conflicting three times, then leaves the Lease to expire", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    const a = replica(server, "a", {
      log: log.logger,
      hook: async (r) => {
        if (!isRelease(r)) return;
        await sleep(1); // an answer over the network: a retry loop that never ends still yields to timers
        throw conflict();
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    expect(server.requests.filter(isRelease)).toHaveLength(3);
    expect(said(log, "could not release the Lease; it expires instead")).toMatchObject([
      { level: 40, err: expect.stringContaining("409 Conflict") },
    ]);
  });

  it("does not retry a release that failed otherwise than by a conflict", async () => {
    const log = capturingLogger();
    const server = leaseServer();
    const a = replica(server, "a", {
      log: log.logger,
      hook: async (r) => {
        if (!isRelease(r)) return;
        await sleep(1);
        throw serverError("PUT");
      },
    });
    a.elector.start();
    await until("a leads", () => a.elector.isLeader);
    await a.elector.stop();
    expect(server.requests.filter(isRelease)).toHaveLength(1);
    expect(said(log, "could not release the Lease; it expires instead")).toHaveLength(1);
  });
});
