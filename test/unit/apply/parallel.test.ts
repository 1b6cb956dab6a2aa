import { describe, expect, it } from "vitest";
import { inParallel, mapInParallel } from "../../../src/apply/parallel.ts";

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("inParallel", () => {
  it("runs at most `limit` at once and every item once", async () => {
    let running = 0;
    let most = 0;
    const seen: number[] = [];
    await inParallel([1, 2, 3, 4, 5, 6, 7], 3, async (item) => {
      running += 1;
      most = Math.max(most, running);
      await tick(item % 3);
      seen.push(item);
      running -= 1;
    });
    expect(most).toBe(3);
    expect(seen.sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it("rejects with the first error after the in-flight ones settle, starting no more", async () => {
    const started: number[] = [];
    let settled = 0;
    const run = inParallel([1, 2, 3, 4, 5], 2, async (item) => {
      started.push(item);
      await tick(item === 1 ? 1 : 5);
      settled += 1;
      if (item === 1) throw new Error("one failed");
    });
    await expect(run).rejects.toThrow("one failed");
    expect(started).toEqual([1, 2]);
    expect(settled).toBe(2);
  });
});

describe("mapInParallel", () => {
  it("returns the results in the items' order whatever order they finish in", async () => {
    const results = await mapInParallel([30, 10, 20, 0], 4, async (ms) => {
      await tick(ms);
      return `waited ${ms}`;
    });
    expect(results).toEqual(["waited 30", "waited 10", "waited 20", "waited 0"]);
  });

  it("returns nothing for no items", async () => {
    expect(await mapInParallel([], 4, async () => "never")).toEqual([]);
  });
});
