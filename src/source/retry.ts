import { setTimeout as sleep } from "node:timers/promises";

export interface BackoffPolicy {
  /** Tries in all, the first included. */
  attempts: number;
  initialDelayMs: number;
  maxDelayMs: number;
  /** Each retry waits this many times longer than the one before. */
  factor: number;
}

export const defaultBackoff: BackoffPolicy = {
  attempts: 4,
  initialDelayMs: 1_000,
  maxDelayMs: 15_000,
  factor: 2,
};

/**
 * The wait before retry number `retry` (0 for the first retry): exponential, capped, with "equal jitter"
 * (half fixed, half random) so replicas that failed together do not retry together, yet never retry at once.
 */
export function backoffDelay(
  policy: BackoffPolicy,
  retry: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** retry);
  return ceiling / 2 + random() * (ceiling / 2);
}

/**
 * Runs `attempt` until it succeeds, `shouldRetry` says no, or the policy's tries are spent; then throws
 * the last error. `attempt` receives the 1-based try number.
 */
export async function retry<T>(
  attempt: (tryNumber: number) => Promise<T>,
  policy: BackoffPolicy,
  shouldRetry: (error: unknown) => boolean,
  signal?: AbortSignal,
): Promise<T> {
  for (let tryNumber = 1; ; tryNumber++) {
    try {
      return await attempt(tryNumber);
    } catch (error) {
      if (tryNumber >= policy.attempts || !shouldRetry(error) || signal?.aborted) throw error;
      await sleep(backoffDelay(policy, tryNumber - 1), undefined, { signal });
    }
  }
}
