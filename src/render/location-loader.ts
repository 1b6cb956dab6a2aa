import { createHash } from "node:crypto";
import { Agent, fetch, type Response } from "undici";
import {
  checkUrl,
  DEFAULT_LOCATION_POLICY,
  type LocationPolicy,
  LocationRefusedError,
  withoutPin,
} from "../admission/locations.ts";
import { type ManifestFile, readManifestFiles } from "./files.ts";
import { checkedLookup, checkLocation } from "./location-policy.ts";
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

/** How many of one CR's locations are read at once: the rest wait, so a long list costs no more memory. */
export const LOCATIONS_AT_ONCE = 4;

/**
 * What one CR's locations may still hold together (manifestLocations.maxBytesPerResource), charged with
 * every chunk as it arrives, across all of them: a CR with many large locations is refused once their bytes
 * so far pass the limit, not after each has been read whole. It also lets only LOCATIONS_AT_ONCE load at once.
 */
export class ByteBudget {
  readonly #limit: number;
  #remaining: number;
  #loading = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    this.#limit = limit;
    this.#remaining = limit;
  }

  get remaining(): number {
    return Math.max(0, this.#remaining);
  }

  /** Takes `bytes`; throws once the CR's locations together hold more than the limit (and every time after). */
  charge(bytes: number): void {
    this.#remaining -= bytes;
    if (this.#remaining < 0) {
      throw new LocationRefusedError(
        `the manifest locations of this CR hold more than ${this.#limit} bytes ` +
          "(manifestLocations.maxBytesPerResource)",
      );
    }
  }

  /** Runs `load` once fewer than LOCATIONS_AT_ONCE of this CR's locations are loading. */
  async run<T>(load: () => Promise<T>): Promise<T> {
    if (this.#loading >= LOCATIONS_AT_ONCE) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#loading++;
    try {
      this.charge(0); // spent while waiting: fail without reading
      return await load();
    } finally {
      this.#loading--;
      this.#waiting.shift()?.();
    }
  }
}

interface LoadedLocation {
  contentHash: string;
  bytes: number;
  manifests: readonly Manifest[];
  loadedAt: number;
}

/** A CR waiting for a read, charged with every chunk; one over its budget leaves with that error. */
interface Reader {
  budget: ByteBudget | undefined;
  reject(error: unknown): void;
}

/** One read in progress, shared by every CR that asks for the location meanwhile. */
interface Reading {
  /** Bytes read so far: a CR that joins is charged them at once. */
  bytes: number;
  readers: Set<Reader>;
  /** Stops the read once no CR waits for it any more. */
  abort: AbortController;
  done: Promise<LoadedLocation>;
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
  readonly #reading = new Map<string, Reading>();

  constructor(options: LocationLoaderOptions = {}) {
    this.#fetchTimeoutMs = options.fetchTimeoutMs ?? 30_000;
    this.#maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
    this.#now = options.now ?? Date.now;
    this.#policy = options.policy ?? DEFAULT_LOCATION_POLICY;
    this.#kodataDir = options.kodataDir;
    this.#agent = new Agent({ connect: { lookup: checkedLookup(this.#policy) } });
  }

  /** The location's manifests; `budget` (one CR's) is charged as its bytes arrive, and refuses past zero. */
  load(location: string, budget?: ByteBudget): Promise<readonly Manifest[]> {
    const load = async () => (await this.#loadCharged(location, budget)).manifests;
    return budget ? budget.run(load) : load();
  }

  /** A fresh budget for one CR. */
  budget(): ByteBudget {
    return new ByteBudget(this.#policy.maxBytesPerResource);
  }

  #loadCharged(location: string, budget: ByteBudget | undefined): Promise<LoadedLocation> {
    const loaded = this.#loaded.get(location);
    if (loaded && this.#now() - loaded.loadedAt < this.#maxAgeMs) {
      budget?.charge(loaded.bytes);
      return Promise.resolve(loaded);
    }
    const shared = this.#reading.get(location);
    const reading = shared && !shared.abort.signal.aborted ? shared : this.#startReading(location, loaded);
    return new Promise((resolve, reject) => {
      const reader: Reader = { budget, reject };
      try {
        budget?.charge(reading.bytes);
      } catch (error) {
        if (reading.readers.size === 0) reading.abort.abort();
        reject(error);
        return;
      }
      reading.readers.add(reader);
      reading.done.then(resolve, reject).finally(() => this.#leave(reading, reader));
    });
  }

  #startReading(location: string, previous: LoadedLocation | undefined): Reading {
    const state = { bytes: 0, readers: new Set<Reader>(), abort: new AbortController() };
    const arrived = (bytes: number) => {
      state.bytes += bytes;
      for (const reader of state.readers) {
        try {
          reader.budget?.charge(bytes);
        } catch (error) {
          this.#leave(state, reader);
          reader.reject(error);
        }
      }
    };
    const done = this.#read(location, previous, arrived, state.abort.signal).finally(() => {
      if (this.#reading.get(location) === reading) this.#reading.delete(location);
    });
    done.catch(() => {}); // every reader handles it; with none left it was stopped on purpose
    const reading: Reading = Object.assign(state, { done });
    this.#reading.set(location, reading);
    return reading;
  }

  /** A reader is done or over its budget; a read nobody waits for any more is stopped. */
  #leave(reading: Pick<Reading, "readers" | "abort">, reader: Reader): void {
    if (reading.readers.delete(reader) && reading.readers.size === 0) reading.abort.abort();
  }

  async #read(
    location: string,
    previous: LoadedLocation | undefined,
    arrived: (bytes: number) => void,
    signal: AbortSignal,
  ): Promise<LoadedLocation> {
    const limit = this.#policy.maxBytesPerLocation;
    const checked = await checkLocation(location, this.#policy, this.#kodataDir);
    const { files, sha256 } =
      checked.kind === "url"
        ? await this.#fetch(checked.url, limit, arrived, signal)
        : await readLocalFiles(location, checked.path, limit, arrived);
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

  async #fetch(
    start: URL,
    limit: number,
    arrived: (bytes: number) => void,
    stopped: AbortSignal,
  ): Promise<{ files: ManifestFile[]; sha256: string }> {
    const shown = `${start.origin}${start.pathname}`;
    const timeout = AbortSignal.timeout(this.#fetchTimeoutMs);
    const signal = AbortSignal.any([timeout, stopped]);
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
        const body = await readLimited(response, limit, arrived);
        const sha256 = createHash("sha256").update(body).digest("hex");
        return { files: [{ origin: shown, text: new TextDecoder().decode(body) }], sha256 };
      }
    } catch (error) {
      if (error instanceof LocationRefusedError) throw error;
      // The checked DNS lookup refuses inside fetch, which wraps it.
      if (error instanceof Error && error.cause instanceof LocationRefusedError) throw error.cause;
      const reason = timeout.aborted ? `timed out after ${this.#fetchTimeoutMs} ms` : errorMessage(error);
      throw new Error(`cannot fetch manifests from ${shown}: ${reason}`, { cause: error });
    }
  }
}

/** The body, refused as soon as it passes `limit` bytes (declared or streamed); each chunk reported as it comes. */
async function readLimited(
  response: Response,
  limit: number,
  arrived: (bytes: number) => void,
): Promise<Buffer> {
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
    arrived(chunk.length);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

async function readLocalFiles(
  location: string,
  path: string,
  limit: number,
  arrived: (bytes: number) => void,
): Promise<{ files: ManifestFile[]; sha256: string }> {
  let files: ManifestFile[];
  try {
    files = await readManifestFiles(path, limit);
  } catch (error) {
    throw new Error(`cannot read manifests from ${withoutPin(location)}: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  arrived(files.reduce((sum, file) => sum + Buffer.byteLength(file.text), 0));
  const hash = createHash("sha256");
  for (const file of files) hash.update(file.text);
  return { files, sha256: hash.digest("hex") };
}

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
