import { once } from "node:events";
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { GitHttpRequest, GitHttpResponse, HttpClient } from "isomorphic-git";

export interface HttpClientOptions {
  /** PEM bundle that replaces the system CAs for https URLs. */
  ca?: string;
  /** Aborts every request of one git operation: its deadline. */
  signal: AbortSignal;
}

/**
 * isomorphic-git's HTTP plugin on node:http(s): unlike its bundled client it takes a CA bundle and an
 * AbortSignal, so a private-CA server can be trusted and no request outlives its operation's deadline.
 * Bodies stream both ways; packs are never buffered here.
 */
export function createHttpClient({ ca, signal }: HttpClientOptions): HttpClient {
  return {
    async request({ url, method = "GET", headers = {}, body }: GitHttpRequest): Promise<GitHttpResponse> {
      const target = new URL(url);
      const outgoing: Record<string, string | number> = { ...headers };
      // isomorphic-git hands over whole buffers: a Content-Length spares servers a chunked body.
      if (Array.isArray(body))
        outgoing["content-length"] = body.reduce((n, chunk) => n + chunk.byteLength, 0);
      const req =
        target.protocol === "https:"
          ? httpsRequest(target, { method, headers: outgoing, signal, ...(ca ? { ca } : {}) })
          : httpRequest(target, { method, headers: outgoing, signal });
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
        body: res[Symbol.asyncIterator](),
      };
    },
  };
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [
      name,
      Array.isArray(value) ? value.join(", ") : (value ?? ""),
    ]),
  );
}
