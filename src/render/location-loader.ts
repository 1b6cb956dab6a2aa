import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { type ManifestFile, readManifestFiles } from "./files.ts";
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
}

interface LoadedLocation {
  contentHash: string;
  manifests: readonly Manifest[];
  loadedAt: number;
}

const HTTP_URL = /^https?:\/\//i;

/**
 * Loads the manifests behind a `spec.manifests` / `spec.additionalManifests` entry: an http(s) URL, a file://
 * URL or a local path (file or directory). Results are cached in memory per location and by content hash:
 * within maxAge a location is not read again, and a re-read with unchanged content returns the identical,
 * already parsed objects. Failed reads are not cached.
 */
export class LocationLoader {
  readonly #fetchTimeoutMs: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  readonly #loaded = new Map<string, LoadedLocation>();
  // Concurrent reconciles asking for the same location share one read.
  readonly #reading = new Map<string, Promise<readonly Manifest[]>>();

  constructor(options: LocationLoaderOptions = {}) {
    this.#fetchTimeoutMs = options.fetchTimeoutMs ?? 30_000;
    this.#maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
  }

  load(location: string): Promise<readonly Manifest[]> {
    const loaded = this.#loaded.get(location);
    if (loaded && this.#now() - loaded.loadedAt < this.#maxAgeMs) return Promise.resolve(loaded.manifests);
    let reading = this.#reading.get(location);
    if (!reading) {
      reading = this.#read(location, loaded).finally(() => this.#reading.delete(location));
      this.#reading.set(location, reading);
    }
    return reading;
  }

  async #read(location: string, previous: LoadedLocation | undefined): Promise<readonly Manifest[]> {
    const files = HTTP_URL.test(location) ? [await this.#fetch(location)] : await readLocalFiles(location);
    const contentHash = hashFiles(files);
    const manifests =
      previous?.contentHash === contentHash
        ? previous.manifests
        : files.flatMap((file) => parseManifests(file.text, file.origin));
    this.#loaded.set(location, { contentHash, manifests, loadedAt: this.#now() });
    return manifests;
  }

  async #fetch(url: string): Promise<ManifestFile> {
    let response: Response;
    try {
      // The signal also bounds reading the body: a server that stalls mid-file times out as well.
      const signal = AbortSignal.timeout(this.#fetchTimeoutMs);
      response = await fetch(url, { signal });
      if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`.trimEnd());
      return { origin: url, text: await response.text() };
    } catch (error) {
      const reason =
        error instanceof DOMException && error.name === "TimeoutError"
          ? `timed out after ${this.#fetchTimeoutMs} ms`
          : errorMessage(error);
      throw new Error(`cannot fetch manifests from ${url}: ${reason}`, { cause: error });
    }
  }
}

async function readLocalFiles(location: string): Promise<ManifestFile[]> {
  const path = location.startsWith("file:") ? fileURLToPath(location) : location;
  try {
    return await readManifestFiles(path);
  } catch (error) {
    throw new Error(`cannot read manifests from ${location}: ${errorMessage(error)}`, { cause: error });
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
