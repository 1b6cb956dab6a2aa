import { createHash } from "node:crypto";
import { Agent, fetch, type Response } from "undici";
import { type ManifestFile, readManifestFiles } from "./files.ts";
import {
  checkedLookup,
  checkLocation,
  checkUrl,
  DEFAULT_LOCATION_POLICY,
  type LocationPolicy,
  LocationRefusedError,
} from "./location-policy.ts";
import { type Manifest, parseManifests } from "./manifest.ts";

export interface LocationLoaderOptions {
  /** Limit for one HTTP fetch, body included. Default 30 s. */
  fetchTimeoutMs?: number;
  /**
   * How long a loaded location is used without reading it again. Release URLs are versioned (`${VERSION}`), so
   * re-reads rarely find new content; when they find the same bytes the same objects come back. Default 10 min.
   */
  maxAgeMs?: number;
  /** The clock, for tests. */
  now?: () => number;
  /** Which locations may be read, and how much of them. Default: no URL, local paths in kodata only. */
  policy?: LocationPolicy;
  /** The only directory local paths may point into. */
  kodataDir?: string;
}

/** What one CR's locations may still hold together; each load takes its share. */
export interface ByteBudget {
  remaining: number;
}

interface LoadedLocation {
  contentHash: string;
  bytes: number;
  manifests: readonly Manifest[];
  loadedAt: number;
}

const MAX_REDIRECTS = 5;

/**
 * Loads the manifests behind a `spec.manifests` / `spec.additionalManifests` entry: an http(s) URL, a file://
 * URL or a local path (file or directory), each checked against the policy first, redirects included.
 * Results are cached in memory per location and by content hash: within maxAge a location is not read again,
 * and a re-read with unchanged content returns the identical, already parsed objects. Failed reads are not
 * cached. Error messages name the location and never quote what was read.
 */
export class LocationLoader {
  readonly #fetchTimeoutMs: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  readonly #policy: LocationPolicy;
  readonly #kodataDir: string | undefined;
  readonly #agent: Agent;
  readonly #loaded = new Map<string, LoadedLocation>();
  // Concurrent reconciles asking for the same location share one read.
  readonly #reading = new Map<string, Promise<LoadedLocation>>();

  constructor(options: LocationLoaderOptions = {}) {
    this.#fetchTimeoutMs = options.fetchTimeoutMs ?? 30_000;
    this.#maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
    this.#policy = options.policy ?? DEFAULT_LOCATION_POLICY;
    this.#kodataDir = options.kodataDir;
    this.#agent = new Agent({ connect: { lookup: checkedLookup(this.#policy) } });
  }

  /** The location's manifests; `budget` (one CR's) is charged with its size, and refuses past zero. */
  async load(location: string, budget?: ByteBudget): Promise<readonly Manifest[]> {
    const loaded = await this.#loadCached(location, budget);
    if (budget) {
      budget.remaining -= loaded.bytes;
      if (budget.remaining < 0) {
        throw new LocationRefusedError(
          `the manifest locations of this CR hold more than ${this.#policy.maxBytesPerResource} bytes ` +
            "(manifestLocations.maxBytesPerResource)",
        );
      }
    }
    return loaded.manifests;
  }

  /** A fresh budget for one CR. */
  budget(): ByteBudget {
    return { remaining: this.#policy.maxBytesPerResource };
  }

  #loadCached(location: string, budget: ByteBudget | undefined): Promise<LoadedLocation> {
    const loaded = this.#loaded.get(location);
    if (loaded && this.#now() - loaded.loadedAt < this.#maxAgeMs) return Promise.resolve(loaded);
    let reading = this.#reading.get(location);
    if (!reading) {
      const limit = Math.min(this.#policy.maxBytesPerLocation, budget?.remaining ?? Number.POSITIVE_INFINITY);
      reading = this.#read(location, loaded, limit).finally(() => this.#reading.delete(location));
      this.#reading.set(location, reading);
    }
    return reading;
  }

  async #read(
    location: string,
    previous: LoadedLocation | undefined,
    limit: number,
  ): Promise<LoadedLocation> {
    const checked = await checkLocation(location, this.#policy, this.#kodataDir);
    const { files, sha256 } =
      checked.kind === "url"
        ? await this.#fetch(checked.url, limit)
        : await readLocalFiles(location, checked.path, limit);
    if (checked.sha256 !== undefined && checked.sha256 !== sha256) {
      throw new LocationRefusedError(
        `manifests at ${withoutPin(location)} do not match their sha256 pin (got ${sha256})`,
      );
    }
    const bytes = files.reduce((sum, file) => sum + Buffer.byteLength(file.text), 0);
    const contentHash = hashFiles(files);
    const manifests =
      previous?.contentHash === contentHash
        ? previous.manifests
        : files.flatMap((file) => parseWithoutQuoting(file, location));
    const loaded = { contentHash, bytes, manifests, loadedAt: this.#now() };
    this.#loaded.set(location, loaded);
    return loaded;
  }

  async #fetch(start: URL, limit: number): Promise<{ files: ManifestFile[]; sha256: string }> {
    const shown = `${start.origin}${start.pathname}`;
    const signal = AbortSignal.timeout(this.#fetchTimeoutMs);
    try {
      let url = start;
      for (let hop = 0; ; hop++) {
        // The signal also bounds reading the body: a server that stalls mid-file times out as well.
        const response = await fetch(url, { signal, redirect: "manual", dispatcher: this.#agent });
        const next = response.headers.get("location");
        if (response.status >= 300 && response.status < 400 && next !== null) {
          await response.body?.cancel();
          if (hop === MAX_REDIRECTS) throw new Error(`more than ${MAX_REDIRECTS} redirects`);
          url = new URL(next, url);
          checkUrl(url, this.#policy); // a redirect must be a location the policy allows too
          continue;
        }
        if (!response.ok) {
          await response.body?.cancel();
          throw new Error(`HTTP ${response.status}`);
        }
        const body = await readLimited(response, limit);
        const sha256 = createHash("sha256").update(body).digest("hex");
        return { files: [{ origin: shown, text: new TextDecoder().decode(body) }], sha256 };
      }
    } catch (error) {
      if (error instanceof LocationRefusedError) throw error;
      // The checked DNS lookup refuses inside fetch, which wraps it.
      if (error instanceof Error && error.cause instanceof LocationRefusedError) throw error.cause;
      const reason = signal.aborted ? `timed out after ${this.#fetchTimeoutMs} ms` : errorMessage(error);
      throw new Error(`cannot fetch manifests from ${shown}: ${reason}`, { cause: error });
    }
  }
}

/** The body as text, refused as soon as it passes `limit` bytes (declared or streamed). */
async function readLimited(response: Response, limit: number): Promise<Buffer> {
  const declared = Number(response.headers.get("content-length") ?? 0);
  if (declared > limit) {
    await response.body?.cancel();
    throw new LocationRefusedError(`the manifests are over ${limit} bytes (manifestLocations size limits)`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.length;
    if (size > limit) {
      await response.body?.cancel().catch(() => {});
      throw new LocationRefusedError(`the manifests are over ${limit} bytes (manifestLocations size limits)`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

async function readLocalFiles(
  location: string,
  path: string,
  limit: number,
): Promise<{ files: ManifestFile[]; sha256: string }> {
  let files: ManifestFile[];
  try {
    files = await readManifestFiles(path, limit);
  } catch (error) {
    throw new Error(`cannot read manifests from ${withoutPin(location)}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  const hash = createHash("sha256");
  for (const file of files) hash.update(file.text);
  return { files, sha256: hash.digest("hex") };
}

const withoutPin = (location: string): string => location.replace(/#sha256=.*$/i, "");

/**
 * Parse errors say where, never what: the bytes came from somewhere the CR's author chose, and the message
 * goes to CR status, the status file and PR comments.
 */
function parseWithoutQuoting(file: ManifestFile, location: string): readonly Manifest[] {
  try {
    return parseManifests(file.text, file.origin);
  } catch {
    throw new Error(
      `the content at ${withoutPin(location)} is not Kubernetes manifests (multi-document YAML of objects)`,
    );
  }
}

function hashFiles(files: readonly ManifestFile[]): string {
  const hash = createHash("sha256");
  for (const file of files) hash.update(file.origin).update("\0").update(file.text).update("\0");
  return hash.digest("hex");
}

function errorMessage(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch() reports network failures as "fetch failed" with the real reason in `cause`.
  return error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message;
}
