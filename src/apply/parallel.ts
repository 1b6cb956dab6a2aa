/** Runs fn over items with at most `limit` at once; the first error rejects after in-flight ones settle. */
export async function inParallel<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (failure === undefined && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure;
}

/** Like inParallel, the results in the items' order. */
export async function mapInParallel<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = [];
  await inParallel([...items.keys()], limit, async (index) => {
    results[index] = await fn(items[index]!);
  });
  return results;
}
