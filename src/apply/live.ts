import type { KubeClient } from "../kube/client.ts";
import { type KubeObject, type ObjectRef, objectKey } from "../kube/object.ts";
import { inParallel } from "./parallel.ts";

const LIST_CONCURRENCY = 4;

/**
 * The one live reader: the objects of these kinds that carry `labelSelector`, by objectKey. A kind that is
 * not served (yet: its CRD comes with this apply; or any more) has none.
 */
export async function readLive(
  client: KubeClient,
  kinds: readonly Pick<ObjectRef, "apiVersion" | "kind">[],
  labelSelector: string,
): Promise<Map<string, KubeObject>> {
  const distinct = new Map(
    kinds.map(({ apiVersion, kind }) => [`${apiVersion}/${kind}`, { apiVersion, kind }]),
  );
  const live = new Map<string, KubeObject>();
  await inParallel([...distinct.values()], LIST_CONCURRENCY, async ({ apiVersion, kind }) => {
    const list = await client.list(apiVersion, kind, { labelSelector }).catch((err: unknown) => {
      ignoreNoKind(err);
      return { items: [] };
    });
    for (const item of list.items) live.set(objectKey(item), item);
  });
  return live;
}

/** Treats "this kind is not served" as already deleted / nothing live (returns false); rethrows the rest. */
export function ignoreNoKind(err: unknown): false {
  const { reason, status } = isErrorLike(err) ? err : {};
  if (reason === "NoKindMatch" || status === 404) return false;
  throw err;
}

const isErrorLike = (err: unknown): err is { reason?: unknown; status?: unknown } =>
  typeof err === "object" && err !== null;
