import { readKubernetesVersion } from "../access/target.ts";
import type { KubeClient } from "../kube/client.ts";
import { KubeApiError } from "../kube/rest.ts";
import type { SpokeFacts } from "./preflight.ts";

// What the preflight reads of a spoke: GET /version and the names of its CRDs, in one metadata-only list
// (PartialObjectMetadataList: names and labels, not the CRDs' schemas, which run to megabytes with Istio and
// cert-manager installed), served from the API server's watch cache (resourceVersion=0). Kept per cluster
// for a TTL, so a sync over a thousand clusters lists each cluster's CRDs at most once per TTL.

const CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/** PartialObjectMetadataList first; a server that does not offer it answers the plain list. */
const METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const DEFAULT_TTL_MS = 5 * 60_000;

interface SurveyOptions {
  /** The cluster's Kubernetes version when the caller keeps it already (the target resolver does). */
  kubernetesVersion?: () => Promise<string | undefined>;
}

/**
 * Reads the facts the preflight needs of one cluster. A refused read (an HTTP error status) is an unknown
 * fact, said in the facts; a cluster that cannot be reached throws.
 */
export async function surveySpoke(client: KubeClient, options: SurveyOptions = {}): Promise<SpokeFacts> {
  const [kubernetesVersion, crds] = await Promise.all([
    options.kubernetesVersion ? options.kubernetesVersion() : readKubernetesVersion(client),
    listCrdNames(client),
  ]);
  return { kubernetesVersion, ...crds };
}

async function listCrdNames(client: KubeClient): Promise<Pick<SpokeFacts, "crds" | "crdsError">> {
  try {
    const { body } = await client.rest.request<{ items?: { metadata?: { name?: unknown } }[] }>({
      method: "GET",
      path: CRDS_PATH,
      query: { resourceVersion: "0" },
      accept: METADATA_ONLY,
    });
    const names = (body?.items ?? []).map((item) => item?.metadata?.name);
    return { crds: new Set(names.filter((name): name is string => typeof name === "string")) };
  } catch (err) {
    if (!(err instanceof KubeApiError)) throw err;
    const why =
      err.status === 403
        ? "the cluster's credential may not list customresourcedefinitions (apiextensions.k8s.io): grant list on them"
        : `listing the cluster's CustomResourceDefinitions failed: ${err.message}`;
    return { crds: undefined, crdsError: why };
  }
}

interface SpokeSurveysOptions {
  /** How long one cluster's facts are used before they are read again (default 5 minutes). */
  ttlMs?: number;
  /** The clock, for tests. */
  now?: () => number;
}

interface Entry {
  client: KubeClient;
  at: number;
  facts: Promise<SpokeFacts>;
}

/**
 * surveySpoke behind a cache keyed by cluster: concurrent checks of one cluster share one survey, a survey
 * is used for `ttlMs`, a failed one is not kept, and a new client for the cluster (its ClusterProfile's
 * connection changed) reads afresh. Expired entries are dropped as new ones come in.
 */
export class SpokeSurveys {
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();

  constructor(options: SpokeSurveysOptions = {}) {
    this.#ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
    this.#now = options.now ?? Date.now;
  }

  facts(cluster: string, client: KubeClient, options: SurveyOptions = {}): Promise<SpokeFacts> {
    const now = this.#now();
    const kept = this.#entries.get(cluster);
    if (kept && kept.client === client && now - kept.at < this.#ttlMs) return kept.facts;
    this.#dropExpired(now);
    const entry: Entry = { client, at: now, facts: surveySpoke(client, options) };
    this.#entries.set(cluster, entry);
    entry.facts.catch(() => {
      if (this.#entries.get(cluster) === entry) this.#entries.delete(cluster);
    });
    return entry.facts;
  }

  /** Forgets a cluster's facts (after installing a prerequisite, say): the next check reads them again. */
  forget(cluster?: string): void {
    if (cluster === undefined) this.#entries.clear();
    else this.#entries.delete(cluster);
  }

  #dropExpired(now: number): void {
    for (const [cluster, entry] of this.#entries) {
      if (now - entry.at >= this.#ttlMs) this.#entries.delete(cluster);
    }
  }
}
