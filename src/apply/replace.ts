import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient } from "../kube/client.ts";
import { describeRef, groupOf, type KubeObject, nameOf, refOf } from "../kube/object.ts";
import { KubeApiError } from "../kube/rest.ts";

/**
 * A Job's pod template (and selector) cannot change once it exists: the API server answers 422 "field is
 * immutable". The upstream operator replaces such a Job (delete, then create); so does this, so a CR is
 * never stuck retrying an apply that can never succeed (a Job another operator created with a different
 * template, or a release that changes a Job without renaming it). Only Jobs: for any other kind an
 * immutable-field error is a real problem and is reported as it is.
 */
const isReplaceable = (object: Pick<KubeObject, "apiVersion" | "kind">): boolean =>
  object.kind === "Job" && groupOf(object.apiVersion) === "batch";

const isImmutableFieldError = (err: unknown): boolean =>
  err instanceof KubeApiError && err.status === 422 && /field is immutable/.test(err.message);

/** How long a deleted Job may take to go before the create is tried anyway (and fails, to be retried). */
const GONE_TIMEOUT_MS = 30_000;

/** Server-side applies `desired`; a Job refused for an immutable field is deleted and created again. */
export async function applyOrReplace(
  client: Pick<KubeClient, "write" | "delete" | "get">,
  desired: KubeObject,
  goneTimeoutMs = GONE_TIMEOUT_MS,
): Promise<{ replaced: boolean }> {
  try {
    await client.write(desired);
    return { replaced: false };
  } catch (err) {
    if (!isReplaceable(desired) || !isImmutableFieldError(err)) throw err;
  }
  const { apiVersion, kind, metadata } = desired;
  const name = nameOf(desired);
  const old = await client.get(apiVersion, kind, metadata.namespace, name);
  // Background: the Job goes at once and the garbage collector takes its pods.
  await client.delete(apiVersion, kind, metadata.namespace, name, "Background");
  const deadline = Date.now() + goneTimeoutMs;
  for (;;) {
    const current = await client.get(apiVersion, kind, metadata.namespace, name);
    if (!current || current.metadata.uid !== old?.metadata.uid) break;
    if (Date.now() > deadline)
      throw new Error(`${describeRef(refOf(desired))} was deleted to be replaced but is still there`);
    await sleep(200);
  }
  await client.write(desired);
  return { replaced: true };
}
