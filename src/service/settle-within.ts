/**
 * The promise's outcome, or undefined once `ms` passed or `signal` aborted. The RestClient takes no abort
 * signal, so a request that hangs is abandoned rather than cancelled: its late answer or error is dropped,
 * and a write that lands late is one more reason every write is conditional on a resourceVersion.
 */
export function settleWithin<T>(
  promise: Promise<T>,
  ms: number,
  signal?: AbortSignal,
): Promise<T | undefined> {
  promise.catch(() => undefined); // a rejection after it was abandoned must not surface as unhandled
  if (signal?.aborted) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const settle = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", abandon);
    };
    const abandon = () => {
      settle();
      resolve(undefined);
    };
    const timer = setTimeout(abandon, ms);
    signal?.addEventListener("abort", abandon, { once: true });
    promise.then(
      (value) => {
        settle();
        resolve(value);
      },
      (err: unknown) => {
        settle();
        reject(err);
      },
    );
  });
}
