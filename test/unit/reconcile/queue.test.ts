import { describe, expect, it, vi } from "vitest";
import { WorkQueue } from "../../../src/reconcile/queue.ts";

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe("work queue", () => {
  it("dedups queued keys and never runs one key twice at once; a re-add while running runs again after", async () => {
    const running = new Set<string>();
    const calls: string[] = [];
    let overlap = false;
    const q = new WorkQueue(
      async (key) => {
        if (running.has(key)) overlap = true;
        running.add(key);
        calls.push(key);
        await tick(20);
        running.delete(key);
        return undefined;
      },
      { concurrency: 4 },
    );
    q.add("a");
    q.add("a");
    q.add("b");
    await tick(5);
    q.add("a"); // while a runs
    q.add("a");
    await q.idle();
    await tick(30);
    await q.idle();
    expect(overlap).toBe(false);
    expect(calls.filter((k) => k === "a")).toHaveLength(2);
    expect(calls.filter((k) => k === "b")).toHaveLength(1);
  });

  it("backs off exponentially per key on failure and resets after a success", async () => {
    let attempts = 0;
    const q = new WorkQueue(
      async () => {
        attempts++;
        if (attempts < 3) throw new Error("boom");
        return undefined;
      },
      { concurrency: 1, baseDelayMs: 10, maxDelayMs: 1000 },
    );
    expect(q.backoffFor("k")).toBe(10);
    q.add("k");
    await tick(5);
    expect(q.backoffFor("k")).toBe(20);
    await tick(60);
    await q.idle();
    expect(attempts).toBe(3);
    expect(q.backoffFor("k")).toBe(10);
  });

  it("requeues after the interval a handler asks for, and shutdown cancels it", async () => {
    let runs = 0;
    const q = new WorkQueue(
      async () => {
        runs++;
        return { requeueAfterMs: 15 };
      },
      { concurrency: 1 },
    );
    q.add("k");
    await tick(50);
    expect(runs).toBeGreaterThanOrEqual(2);
    await q.shutdown();
    const after = runs;
    await tick(40);
    expect(runs).toBe(after);
  });
});

describe("work queue: per-group bound", () => {
  it("a group whose work hangs holds at most perGroup workers; later keys of other groups go ahead", async () => {
    const hang = Promise.withResolvers<undefined>();
    const done: string[] = [];
    const q = new WorkQueue(
      async (key) => {
        if (key.startsWith("dead/")) return hang.promise;
        await tick(2);
        done.push(key);
        return undefined;
      },
      { concurrency: 2, perGroup: 1, groupOf: (key) => key.split("/")[0]! },
    );
    // The dead spoke's two CRs are queued first: without the bound they would take both workers.
    for (const key of ["dead/serving", "dead/eventing", "a/serving", "b/serving", "c/serving"]) q.add(key);
    await tick(40);
    expect(done.sort()).toEqual(["a/serving", "b/serving", "c/serving"]);
    let settled = false;
    void q.groupSettled("dead").then(() => (settled = true));
    await tick(5);
    expect(settled).toBe(false);
    hang.resolve(undefined);
    await q.idle();
    expect(settled).toBe(true);
  });

  it("without a bound one group may take every worker", async () => {
    let running = 0;
    let peak = 0;
    const q = new WorkQueue(
      async () => {
        peak = Math.max(peak, ++running);
        await tick(10);
        running--;
        return undefined;
      },
      { concurrency: 3, groupOf: () => "one-spoke" },
    );
    for (const key of ["x", "y", "z"]) q.add(key);
    await q.idle();
    expect(peak).toBe(3);
  });

  it("groupSettled resolves at once for a group with nothing in flight", async () => {
    const q = new WorkQueue(async () => undefined, { concurrency: 1 });
    await expect(q.groupSettled("nothing")).resolves.toBeUndefined();
  });
});

describe("work queue: groups prepared beside the workers", () => {
  it("a thousand groups that take long to prepare hold no worker: the ready ones queued behind them run at once", async () => {
    const never = new Promise<void>(() => {}); // a black hole: the contact never ends in this test
    const done: string[] = [];
    let farAsked = 0;
    let running = 0;
    let peak = 0;
    const q = new WorkQueue(
      async (key) => {
        peak = Math.max(peak, ++running);
        await tick(1);
        running--;
        done.push(key);
        return undefined;
      },
      {
        concurrency: 2,
        groupOf: (key) => key.split("/")[0]!,
        prepare: (key) => {
          if (!key.startsWith("far-")) return undefined;
          farAsked++;
          return () => never;
        },
        prepareConcurrency: 8,
      },
    );
    // Sorted as a controller's queue is: every unreachable cluster's CR before the reachable ones.
    for (let i = 0; i < 1000; i++) q.add(`far-${String(i).padStart(4, "0")}/serving`);
    for (const key of ["spoke-1/serving", "spoke-2/serving", "spoke-3/serving"]) q.add(key);
    await vi.waitFor(() => expect(done).toHaveLength(3), { timeout: 2_000, interval: 5 });
    expect(done.sort()).toEqual(["spoke-1/serving", "spoke-2/serving", "spoke-3/serving"]);
    expect(peak).toBeLessThanOrEqual(2);
    expect(q.length).toBe(1000);
    // Each waiting group was asked once while the places were full, not at every one of the ~1,000 pumps.
    expect(farAsked).toBe(1000);
  });

  it("at most prepareConcurrency groups prepare at once; a prepared group's key runs once its preparation ends, failed or not", async () => {
    const preparations = new Map<string, PromiseWithResolvers<void>>();
    const ran: string[] = [];
    const q = new WorkQueue(
      async (key) => {
        ran.push(key);
        return undefined;
      },
      {
        concurrency: 4,
        prepare: (key) => () => {
          const p = Promise.withResolvers<void>();
          preparations.set(key, p);
          return p.promise;
        },
        prepareConcurrency: 2,
      },
    );
    for (const key of ["a", "b", "c"]) q.add(key);
    await tick();
    expect([...preparations.keys()]).toEqual(["a", "b"]);
    expect(ran).toEqual([]);
    preparations.get("a")!.reject(new Error("unreachable")); // the handler finds the outcome itself
    await vi.waitFor(() => expect(ran).toEqual(["a"]), { timeout: 1_000, interval: 2 });
    expect([...preparations.keys()]).toEqual(["a", "b", "c"]);
    preparations.get("b")!.resolve();
    preparations.get("c")!.resolve();
    await q.idle();
    expect(ran.sort()).toEqual(["a", "b", "c"]);
  });

  it("a group is prepared again for its next key after one ran; a ready group is not held", async () => {
    const prepared: string[] = [];
    const ran: string[] = [];
    const q = new WorkQueue(
      async (key) => {
        ran.push(key);
        return undefined;
      },
      {
        concurrency: 1,
        prepare: (key) => {
          prepared.push(key);
          return key === "ready" ? undefined : async () => void (await tick(1));
        },
      },
    );
    q.add("far");
    q.add("ready");
    await q.idle();
    q.add("far");
    await q.idle();
    expect(ran).toEqual(["ready", "far", "far"]);
    expect(prepared.filter((k) => k === "far")).toHaveLength(2);
  });
});

describe("work queue: a lane beside the workers", () => {
  /** A queue whose `gone/` keys are in a lane of 3; every key runs until released. */
  function laneQueue(options: { perGroup?: number; groupOf?: (key: string) => string } = {}) {
    const running = new Set<string>();
    const release = new Map<string, () => void>();
    let peakWorkers = 0;
    let peakLane = 0;
    const inLane = (key: string) => key.startsWith("gone/");
    const q = new WorkQueue(
      async (key) => {
        running.add(key);
        peakWorkers = Math.max(peakWorkers, [...running].filter((k) => !inLane(k)).length);
        peakLane = Math.max(peakLane, [...running].filter(inLane).length);
        await new Promise<void>((resolve) => release.set(key, resolve));
        running.delete(key);
        return undefined;
      },
      { concurrency: 2, lane: { has: inLane, concurrency: 3 }, ...options },
    );
    const finish = async (...keys: string[]) => {
      for (const key of keys) release.get(key)!();
      await tick();
    };
    return { q, running, finish, peaks: () => ({ workers: peakWorkers, lane: peakLane }) };
  }

  it("runs the lane's keys while every worker is busy, and the workers' while the lane is full", async () => {
    const { q, running, finish, peaks } = laneQueue();
    for (const key of ["a", "b", "c", "gone/1", "gone/2", "gone/3", "gone/4"]) q.add(key);
    await tick();
    expect([...running].sort()).toEqual(["a", "b", "gone/1", "gone/2", "gone/3"]);
    await finish("gone/1");
    expect(running.has("gone/4")).toBe(true);
    expect(running.has("c")).toBe(false); // a lane's place is not a worker's
    await finish("a");
    expect(running.has("c")).toBe(true);
    await finish("b", "c", "gone/2", "gone/3", "gone/4");
    await q.idle();
    expect(peaks()).toEqual({ workers: 2, lane: 3 });
  });

  it("keeps the per-group bound across the workers and the lane", async () => {
    const { q, running, finish } = laneQueue({ perGroup: 1, groupOf: (key) => key.split("/").pop()! });
    q.add("x"); // group x, a worker
    q.add("gone/x"); // group x too: waits though the lane is free
    q.add("gone/y");
    await tick();
    expect([...running].sort()).toEqual(["gone/y", "x"]);
    await finish("x");
    expect(running.has("gone/x")).toBe(true);
    await finish("gone/x", "gone/y");
    await q.idle();
  });

  it("a thousand keys added while every worker is busy: the lane asked once per key, no key looked at again", async () => {
    // A replica's start: every CR is added at once behind busy workers. Each add looked at every key
    // queued before it (lane.has, groupOf): 500,000 asks for 1,000 keys, seconds of one turn of the loop.
    let laneAsks = 0;
    let groupAsks = 0;
    const release: (() => void)[] = [];
    const q = new WorkQueue(
      () => new Promise<undefined>((resolve) => release.push(() => resolve(undefined))),
      {
        concurrency: 2,
        groupOf: (key) => {
          groupAsks++;
          return key;
        },
        lane: {
          has: (key) => {
            laneAsks++;
            return key.startsWith("gone/");
          },
          concurrency: 3,
        },
      },
    );
    q.add("busy-1");
    q.add("busy-2");
    const [lanes, groups] = [laneAsks, groupAsks];
    for (let i = 0; i < 1_000; i++) q.add(`cr-${i}`);
    expect(laneAsks - lanes).toBe(1_000);
    expect(groupAsks - groups).toBe(0);
    q.add("gone/1"); // the lane is free: it runs at once though a thousand keys wait for the workers
    await tick();
    expect(release).toHaveLength(3);
    for (const done of release.splice(0)) done();
    await q.shutdown();
  });

  it("is idle only when the lane's keys are done too", async () => {
    const { q, finish } = laneQueue();
    q.add("a");
    q.add("gone/1");
    await tick();
    let idle = false;
    void q.idle().then(() => (idle = true));
    await finish("a"); // the workers are done, the lane is not
    expect(idle).toBe(false);
    await finish("gone/1");
    expect(idle).toBe(true);
  });
});
