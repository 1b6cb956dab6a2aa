import { describe, expect, it } from "vitest";
import { type BackoffPolicy, backoffDelay, retry } from "../../../src/source/retry.ts";

const policy: BackoffPolicy = { attempts: 4, initialDelayMs: 100, maxDelayMs: 1_000, factor: 2 };

describe("backoffDelay", () => {
  it("doubles per retry, between half and all of the step", () => {
    expect(backoffDelay(policy, 0, () => 0)).toBe(50);
    expect(backoffDelay(policy, 0, () => 1)).toBe(100);
    expect(backoffDelay(policy, 1, () => 0)).toBe(100);
    expect(backoffDelay(policy, 2, () => 1)).toBe(400);
  });

  it("is capped at the maximum delay", () => {
    expect(backoffDelay(policy, 10, () => 1)).toBe(1_000);
    expect(backoffDelay(policy, 10, () => 0)).toBe(500);
  });

  it("stays within its bounds for any random value", () => {
    for (let retryNumber = 0; retryNumber < 8; retryNumber++) {
      const ceiling = Math.min(1_000, 100 * 2 ** retryNumber);
      const delay = backoffDelay(policy, retryNumber);
      expect(delay).toBeGreaterThanOrEqual(ceiling / 2);
      expect(delay).toBeLessThanOrEqual(ceiling);
    }
  });
});

describe("retry", () => {
  const fast: BackoffPolicy = { attempts: 3, initialDelayMs: 1, maxDelayMs: 2, factor: 2 };

  it("returns the first success", async () => {
    const tries: number[] = [];
    const result = await retry(
      async (n) => {
        tries.push(n);
        if (n < 3) throw new Error("transient");
        return "ok";
      },
      fast,
      () => true,
    );
    expect(result).toBe("ok");
    expect(tries).toEqual([1, 2, 3]);
  });

  it("throws the last error once the tries are spent", async () => {
    let count = 0;
    await expect(
      retry(
        async (n) => {
          count++;
          throw new Error(`try ${n}`);
        },
        fast,
        () => true,
      ),
    ).rejects.toThrow("try 3");
    expect(count).toBe(3);
  });

  it("does not retry what shouldRetry refuses", async () => {
    let count = 0;
    await expect(
      retry(
        async () => {
          count++;
          throw new Error("permanent");
        },
        fast,
        () => false,
      ),
    ).rejects.toThrow("permanent");
    expect(count).toBe(1);
  });
});
