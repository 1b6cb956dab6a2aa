import { describe, expect, it } from "vitest";
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
