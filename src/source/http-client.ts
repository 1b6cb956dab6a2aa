import { once } from "node:events";
import type { ClientRequest, IncomingHttpHeaders, IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { createRequire } from "node:module";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { GitHttpRequest, GitHttpResponse, HttpClient } from "isomorphic-git";
import { advertisedCapabilities, withBlobLimit } from "./upload-pack.ts";

// Required, not imported: see src/service/http-server.ts (an ES import of node:http loads Node's undici).
const { request: httpRequest } = createRequire(import.meta.url)("node:http") as typeof import("node:http");

interface HttpClientOptions {
  /** PEM bundle that replaces the system CAs for https URLs. */
  ca?: string;
  /** Aborts every request of one git operation: its deadline. */
  signal: AbortSignal;
  /** Bounds on what a fetch may bring; absent for operations that fetch no pack. */
  fetchLimits?: FetchLimits;
}

/**
 * What a fetch may bring into memory. isomorphic-git holds a fetched pack whole (and several times over
 * while indexing it), so blobs no fleet file can be are filtered out on the server where it can, and a
 * pack is cut off past a size where it cannot.
 */
export interface FetchLimits {
  /** Blobs of this many bytes or more are left out when the server offers the `filter` capability. */
  blobLimitBytes: number;
  /** An upload-pack answer larger than this ends the fetch. */
  maxPackBytes: number;
  /** Filled in as the fetch goes: whether the server filtered, and whether the pack was cut off. */
  outcome: { filtered: boolean; overLimit: boolean };
}

/**
 * isomorphic-git's HTTP plugin on node:http(s): unlike its bundled client it takes a CA bundle and an
 * AbortSignal, so a private-CA server can be trusted and no request outlives its operation's deadline.
 * Bodies stream both ways; packs are never buffered here.
 */
export function createHttpClient({ ca, signal, fetchLimits }: HttpClientOptions): HttpClient {
  let serverFilters = false;
  return {
    async request({
      url,
      method = "GET",
      headers = {},
      body: requestBody,
    }: GitHttpRequest): Promise<GitHttpResponse> {
      const target = new URL(url);
      const uploadPack = target.pathname.endsWith("/git-upload-pack");
      let body: GitHttpRequest["body"] | Uint8Array[] = requestBody;
      if (fetchLimits && uploadPack && serverFilters && Array.isArray(body)) {
        const request = Buffer.concat(body);
        const filtered = withBlobLimit(request, fetchLimits.blobLimitBytes);
        fetchLimits.outcome.filtered ||= filtered.byteLength !== request.byteLength;
        body = [filtered];
      }
      const outgoing: Record<string, string | number> = { ...headers };
      // isomorphic-git hands over whole buffers: a Content-Length spares servers a chunked body.
      if (Array.isArray(body))
        outgoing["content-length"] = body.reduce((n, chunk) => n + chunk.byteLength, 0);
      const req =
        target.protocol === "https:"
          ? httpsRequest(target, { method, headers: outgoing, ...(ca ? { ca } : {}) })
          : httpRequest(target, { method, headers: outgoing });
      abortWith(req, signal);
      // The source aborts every request when its operation ends, and Node emits that abort on a request still
      // holding its socket, after the awaits below have let go of it: without a listener it is uncaught. Any
      // error that matters reaches the caller through them, or through the body's iterator.
      req.on("error", () => {});
      const responded = once(req, "response") as Promise<[IncomingMessage]>;
      responded.catch(() => {}); // rethrown by the await below; a write error must not leave it unhandled
      await pipeline(Readable.from(body ?? []), req);
      const [res] = await responded;
      return {
        url,
        method,
        statusCode: res.statusCode ?? 0,
        statusMessage: res.statusMessage ?? "",
        headers: flattenHeaders(res.headers),
        body: !fetchLimits
          ? res[Symbol.asyncIterator]()
          : uploadPack
            ? capped(res, fetchLimits)
            : target.searchParams.get("service") === "git-upload-pack"
              ? watchCapabilities(res, (filters) => {
                  serverFilters = filters;
                })
              : res[Symbol.asyncIterator](),
      };
    },
  };
}

/**
 * Ends the request when `signal` aborts, as http.request's own `signal` option does, except for a response
 * that arrived whole but was left unread (isomorphic-git leaves a failed POST's error page to a read it does
 * not await): that one is drained. Destroying its request would end it, and hand its keep-alive socket back
 * to the pool, before the abort's error is emitted on that socket, where then nothing listens: an uncaught
 * AbortError (found by the soak as the git server began answering 500).
 */
function abortWith(req: ClientRequest, signal: AbortSignal): void {
  let response: IncomingMessage | undefined;
  req.once("response", (res: IncomingMessage) => {
    response = res;
  });
  const abort = () => {
    if (response?.complete) response.resume();
    else req.destroy(signal.reason);
  };
  if (signal.aborted) abort();
  else {
    signal.addEventListener("abort", abort, { once: true });
    req.once("close", () => signal.removeEventListener("abort", abort));
  }
}

/** Passes the advertisement through, telling whether its first ref line offers `filter`. */
async function* watchCapabilities(
  res: AsyncIterable<Uint8Array>,
  onCapabilities: (filters: boolean) => void,
): AsyncGenerator<Uint8Array> {
  let head: Buffer | undefined = Buffer.alloc(0);
  for await (const chunk of res) {
    if (head) {
      head = Buffer.concat([head, chunk]);
      const capabilities = advertisedCapabilities(head);
      if (capabilities) onCapabilities(capabilities.has("filter"));
      // A first line longer than any real one (65520 bytes is the pkt-line maximum) is not looked at further.
      if (capabilities || head.byteLength > 65_536) head = undefined;
    }
    yield chunk;
  }
}

/** Passes the pack through until it grows past the limit, then ends the fetch. */
async function* capped(res: AsyncIterable<Uint8Array>, limits: FetchLimits): AsyncGenerator<Uint8Array> {
  let total = 0;
  for await (const chunk of res) {
    total += chunk.byteLength;
    if (total > limits.maxPackBytes) {
      limits.outcome.overLimit = true;
      throw new Error(`the pack is over ${limits.maxPackBytes} bytes`);
    }
    yield chunk;
  }
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [
      name,
      Array.isArray(value) ? value.join(", ") : (value ?? ""),
    ]),
  );
}
