import { setTimeout as sleep } from "node:timers/promises";
import type { Dispatcher } from "undici";

/**
 * A small JSON REST client for one Kubernetes API server, on undici. The transport supplies, request by
 * request, the connection pool (TLS material, proxy) and the auth headers: the hub's kubeconfig, or a
 * spoke's exec-plugin credential. A 401 lets the transport drop the credential and the request is sent once
 * more with a fresh one (the API server authenticates before anything else, so a resend is safe for writes).
 * Objects travel as plain JSON, never through typed models, so no field a manifest sets is ever dropped.
 */
export interface RestTransport {
  /** Base URL, e.g. https://127.0.0.1:6443, or with a path prefix: https://proxy:9092/cluster-a. */
  readonly server: string;
  /** The pool and headers for the next request; `rejected` is called if the server answers 401. */
  connect(): Promise<{ dispatcher: Dispatcher; headers: Record<string, string>; rejected?: () => void }>;
}

/** How long one request may take. */
const REQUEST_TIMEOUT_MS = 30_000;

export class KubeApiError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly method: string;
  readonly path: string;
  /** The server's own message (a meta/v1 Status message). */
  readonly serverMessage: string;
  constructor(method: string, path: string, status: number, reason: string, message: string) {
    super(`${method} ${path}: ${status} ${reason}: ${message}`);
    this.status = status;
    this.reason = reason;
    this.method = method;
    this.path = path;
    this.serverMessage = message;
  }
}

export const isNotFound = (err: unknown): boolean => err instanceof KubeApiError && err.status === 404;
export const isForbidden = (err: unknown): boolean => err instanceof KubeApiError && err.status === 403;

/** Node's and undici's socket-level failures: the server, or the path to it, is down (not misconfigured). */
export const NETWORK_ERROR_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "UND_ERR_SOCKET",
]);

// Socket, DNS, TLS and timeout failures: the request never got an HTTP answer (undici wraps the cause).
const UNANSWERED_CODES = new Set([
  ...NETWORK_ERROR_CODES,
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

/** Whether a request failed without an answer from the server: it is down or cannot be reached. */
export function isUnanswered(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e instanceof KubeApiError) return false;
    if (UNANSWERED_CODES.has((e as NodeJS.ErrnoException).code ?? "")) return true;
  }
  return false;
}
export const isConflict = (err: unknown): boolean => err instanceof KubeApiError && err.status === 409;

export interface RestResponse<T> {
  status: number;
  body: T;
}

export interface RestRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  /** The Accept header, application/json unless given (a metadata-only list asks for more). */
  accept?: string;
  /** Ends the request early (a probe's own deadline). */
  signal?: AbortSignal;
}

/** As client-go: a request the server asked to be sent again later is, up to 10 times. */
const MAX_RETRY_AFTER_RETRIES = 10;
/** A longer Retry-After than this is waited only this long: a pass has its own deadlines. */
const MAX_RETRY_AFTER_MS = 10_000;

/**
 * How long to wait before sending a refused request again, or undefined when it should not be. As
 * client-go's checkWait: a 429 (API Priority and Fairness, or a resource's storage still initialising after
 * its CRD changed) or a 5xx that carries Retry-After in seconds. The server did not act on it, so a write is
 * as safe to resend as a read.
 */
export function retryAfterMs(status: number, retryAfter: string | undefined): number | undefined {
  if (status !== 429 && status < 500) return undefined;
  if (retryAfter === undefined || !/^\s*\d+\s*$/.test(retryAfter)) return undefined;
  return Math.min(Number(retryAfter) * 1000, MAX_RETRY_AFTER_MS);
}

export class RestClient {
  readonly server: string;
  private readonly transport: RestTransport;
  // undici connects to an origin; a server's path prefix goes in front of every request path.
  private readonly origin: string;
  private readonly pathPrefix: string;
  /** Requests sent, by HTTP method: the figures behind "a no-op reconcile writes nothing". */
  readonly requestCounts = new Map<string, number>();

  constructor(transport: RestTransport) {
    this.transport = transport;
    this.server = transport.server.replace(/\/+$/, "");
    ({ origin: this.origin, pathPrefix: this.pathPrefix } = splitServer(this.server));
  }

  async request<T>(req: RestRequest): Promise<RestResponse<T>> {
    let res = await this.send<T>(req);
    let refreshed = false;
    for (let retries = 0; retries < MAX_RETRY_AFTER_RETRIES; retries++) {
      if (res.status === 401 && res.rejected && !refreshed) {
        res.rejected();
        refreshed = true;
      } else {
        const wait = retryAfterMs(res.status, res.retryAfter);
        if (wait === undefined || req.signal?.aborted) break;
        await sleep(wait, undefined, req.signal ? { signal: req.signal } : undefined).catch(() => {});
        if (req.signal?.aborted) break;
      }
      res = await this.send<T>(req);
    }
    if (res.status < 300) return res;
    const status = res.body as { reason?: string; message?: string } | string;
    const reason = typeof status === "object" ? (status.reason ?? "") : "";
    const message = typeof status === "object" ? (status.message ?? "") : String(status).slice(0, 500);
    throw new KubeApiError(req.method, req.path, res.status, reason, message);
  }

  /** A streaming GET (watch): onLine gets every JSON line; resolves when the server ends the stream. */
  async stream(
    path: string,
    query: RestRequest["query"],
    onLine: (value: unknown) => void,
    signal?: AbortSignal,
  ) {
    const { dispatcher, headers, rejected } = await this.transport.connect();
    this.count("WATCH");
    let response: Dispatcher.ResponseData;
    try {
      response = await dispatcher.request({
        origin: this.origin,
        path: this.pathWithQuery(path, query),
        method: "GET",
        headers: { accept: "application/json", ...headers },
        signal,
        bodyTimeout: 0,
      });
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
    if (response.statusCode >= 300) {
      if (response.statusCode === 401) rejected?.();
      const text = await response.body.text();
      throw new KubeApiError("GET", path, response.statusCode, "WatchFailed", text.slice(0, 300));
    }
    let buffer = "";
    try {
      for await (const chunk of response.body) {
        buffer += (chunk as Buffer).toString("utf8");
        for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (line) onLine(JSON.parse(line));
        }
      }
    } catch (err) {
      if (!signal?.aborted) throw err;
    }
  }

  private async send<T>(
    req: RestRequest,
  ): Promise<RestResponse<T> & { rejected?: () => void; retryAfter?: string }> {
    const { dispatcher, headers, rejected } = await this.transport.connect();
    const payload =
      req.body === undefined ? undefined : typeof req.body === "string" ? req.body : JSON.stringify(req.body);
    this.count(req.method);
    const timeout = REQUEST_TIMEOUT_MS;
    const response = await dispatcher.request({
      origin: this.origin,
      path: this.pathWithQuery(req.path, req.query),
      method: req.method,
      headers: {
        accept: req.accept ?? "application/json",
        ...(payload !== undefined ? { "content-type": req.contentType ?? "application/json" } : {}),
        ...headers,
      },
      body: payload,
      signal: req.signal,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    });
    const text = await response.body.text();
    let body: unknown = text;
    const contentType = String(response.headers["content-type"] ?? "");
    if (text && contentType.includes("json")) {
      try {
        body = JSON.parse(text);
      } catch {
        // keep the text
      }
    }
    const retryAfter = response.headers["retry-after"];
    return {
      status: response.statusCode,
      body: body as T,
      rejected,
      retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
    };
  }

  private pathWithQuery(path: string, query: RestRequest["query"]): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) params.set(k, String(v));
    const search = params.toString();
    return `${this.pathPrefix}${path}${search ? `?${search}` : ""}`;
  }

  private count(method: string): void {
    this.requestCounts.set(method, (this.requestCounts.get(method) ?? 0) + 1);
  }
}

/** Splits a server URL into the origin undici connects to and the path prefix every request path gets. */
function splitServer(server: string): { origin: string; pathPrefix: string } {
  const url = new URL(server);
  return { origin: url.origin, pathPrefix: url.pathname.replace(/\/+$/, "") };
}
