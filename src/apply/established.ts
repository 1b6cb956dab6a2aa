import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient, Selection } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import { describeRef, field, type KubeObject, nameOf } from "../kube/object.ts";
import { KubeApiError } from "../kube/rest.ts";

// Waiting for the CRDs an apply pass wrote to become Established: one watch on the cluster, selected as
// narrowly as the API allows, from the resourceVersion of its list (no event lost between the two), stopped
// as soon as every CRD is Established or the wait ends. A failed list or watch falls back to polling, as
// install/deployment-watch.ts does for Deployments.

const CRD_API_VERSION = "apiextensions.k8s.io/v1";
const CRD_KIND = "CustomResourceDefinition";
const POLL_MS = 200;

/** What the wait needs of a list-then-watch cache. */
type CrdCache = Pick<Informer, "on" | "start" | "stop" | "hasSynced" | "list">;

/** Opens the cache of the CRDs `selection` picks; `onError` is told when its list or watch fails. */
export type OpenCrdCache = (
  client: KubeClient,
  selection: Selection,
  onError: (err: unknown) => void,
) => CrdCache;

const openCrdInformer: OpenCrdCache = (client, selection, onError) =>
  new Informer(client, CRD_API_VERSION, CRD_KIND, onError, undefined, selection);

interface EstablishedWaitOptions {
  timeoutMs: number;
  /** Labels every CRD of the pass carries (the apply set's): the watch selects by them. */
  labels: Record<string, string>;
  open?: OpenCrdCache;
  /** Told when the watch failed and the wait went on by polling. */
  onWatchError?(err: unknown): void;
  pollMs?: number;
}

export function isCrdEstablished(crd: KubeObject | undefined): boolean {
  const conditions = field(crd, "status", "conditions");
  return (
    Array.isArray(conditions) &&
    conditions.some((c) => field(c, "type") === "Established" && field(c, "status") === "True")
  );
}

/**
 * The narrowest selection of `names` the API allows: a field selector matches one name only (no set
 * syntax), so one CRD is picked by name and several by the labels they all carry.
 */
export function crdSelection(names: readonly string[], labels: Record<string, string>): Selection {
  const labelSelector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .sort()
    .join(",");
  return {
    ...(labelSelector ? { labelSelector } : {}),
    ...(names.length === 1 ? { fieldSelector: `metadata.name=${names[0]}` } : {}),
  };
}

/** The names, in their order, of those not Established among `live`. */
export function notEstablished(names: readonly string[], live: readonly KubeObject[]): string[] {
  const established = new Set(live.filter(isCrdEstablished).map(nameOf));
  return names.filter((n) => !established.has(n));
}

/** Resolves when every CRD of `crds` is Established on the cluster; throws when the time is up. */
export async function waitEstablished(
  client: KubeClient,
  crds: readonly KubeObject[],
  options: EstablishedWaitOptions,
): Promise<void> {
  const names = [...new Set(crds.map(nameOf))];
  if (names.length === 0) return;
  const deadline = Date.now() + options.timeoutMs;
  const timedOut = (waiting: readonly string[]) =>
    new Error(
      `${describeRef({ apiVersion: CRD_API_VERSION, kind: CRD_KIND, namespace: "", name: waiting[0]! })} did not become Established within ${options.timeoutMs / 1000}s`,
    );
  const watched = await watchEstablished(client, names, deadline, options);
  if (watched.outcome === "established") return;
  if (watched.outcome === "timeout") throw timedOut(watched.waiting);
  options.onWatchError?.(watched.error);
  await pollEstablished(client, watched.waiting, deadline, options.pollMs ?? POLL_MS, timedOut);
}

type WatchOutcome =
  | { outcome: "established" }
  | { outcome: "timeout"; waiting: string[] }
  | { outcome: "failed"; waiting: string[]; error: unknown };

function watchEstablished(
  client: KubeClient,
  names: readonly string[],
  deadline: number,
  options: EstablishedWaitOptions,
): Promise<WatchOutcome> {
  return new Promise((resolve) => {
    let waiting = [...names];
    let done = false;
    const finish = (outcome: WatchOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      cache.stop();
      resolve(outcome);
    };
    const cache = (options.open ?? openCrdInformer)(client, crdSelection(names, options.labels), (error) =>
      finish({ outcome: "failed", waiting, error }),
    );
    const check = () => {
      waiting = notEstablished(names, cache.list());
      if (waiting.length === 0) finish({ outcome: "established" });
    };
    const timer = setTimeout(
      () => finish({ outcome: "timeout", waiting }),
      Math.max(0, deadline - Date.now()),
    );
    cache.on(check);
    cache.start();
    void cache.hasSynced().then(check);
  });
}

/** The fallback: each CRD read until it is Established, every `pollMs`. */
async function pollEstablished(
  client: KubeClient,
  names: readonly string[],
  deadline: number,
  pollMs: number,
  timedOut: (waiting: readonly string[]) => Error,
): Promise<void> {
  for (const [i, name] of names.entries()) {
    while (!isCrdEstablished(await client.get(CRD_API_VERSION, CRD_KIND, undefined, name))) {
      if (Date.now() > deadline) throw timedOut(names.slice(i));
      await sleep(pollMs);
    }
  }
}

/**
 * Resolves when discovery serves the kind of each of `objects` (one read, then another after each miss). The
 * API server sets a new CRD Established before its discovery lists the kind (both follow the CRD, each at
 * its own pace), so a write right after Established can find no such kind: under load that gap was seen to
 * outlast the one re-read a write makes on a miss, and fail an install.
 */
export async function waitServed(
  client: KubeClient,
  objects: readonly { apiVersion: string; kind: string }[],
  options: { timeoutMs: number; pollMs?: number },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  const kinds = new Map(
    objects.map(({ apiVersion, kind }) => [`${apiVersion}/${kind}`, { apiVersion, kind }]),
  );
  for (const { apiVersion, kind } of kinds.values()) {
    for (;;) {
      const served = await client.resourceInfo(apiVersion, kind).then(
        () => true,
        (err: unknown) => {
          if (err instanceof KubeApiError && err.reason === "NoKindMatch") return false;
          throw err;
        },
      );
      if (served) break;
      if (Date.now() > deadline) {
        throw new Error(
          `${kind} (${apiVersion}) is not served ${options.timeoutMs / 1000}s after its CustomResourceDefinition became Established`,
        );
      }
      await sleep(options.pollMs ?? POLL_MS);
    }
  }
}
