import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { Logger } from "../observability/log.ts";
import type { FleetMetrics } from "../observability/metrics.ts";

export interface HttpServerOptions {
  port: number;
  /** Default "0.0.0.0". */
  host?: string;
  metrics: FleetMetrics;
  /** /readyz: 200 when true, 503 otherwise. A standby replica is ready: it is able to take over. */
  ready(): boolean;
  /** Mounted at POST /webhook. */
  webhook?: (req: IncomingMessage, res: ServerResponse) => void;
  log: Logger;
}

export interface RunningHttpServer {
  /** The bound port (the kernel's choice when `port` was 0). */
  port: number;
  /** Stops accepting connections and resolves once the requests in flight are answered; idempotent. */
  close(): Promise<void>;
}

// node:http is required, not imported: an ES import reads every export of a built-in, and Node 24's lazy
// `http.WebSocket` then loads Node's bundled undici (2 MiB of the service's resident memory), which nothing
// here uses. test/unit/service/footprint.test.ts holds the service's module graph free of it.
const { createServer } = createRequire(import.meta.url)("node:http") as typeof import("node:http");

type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** A path the server answers, and the methods it answers there. */
interface Route {
  methods: ReadonlySet<string>;
  handle: Handler;
}

/**
 * The service's probes-and-metrics server: /healthz (answered as long as the event loop turns), /readyz,
 * /metrics in the Prometheus text format, and the push webhook at POST /webhook when one is given.
 */
export function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const { metrics, ready, webhook, log } = options;
  const probes = new Set(["GET", "HEAD"]);
  const routes = new Map<string, Route>([
    ["/healthz", { methods: probes, handle: (_req, res) => text(res, 200, "ok") }],
    [
      "/readyz",
      {
        methods: probes,
        handle: (_req, res) => (ready() ? text(res, 200, "ok") : text(res, 503, "not ready")),
      },
    ],
    [
      "/metrics",
      {
        methods: probes,
        handle: async (_req, res) => {
          const body = await metrics.registry.metrics();
          res.writeHead(200, { "content-type": metrics.registry.contentType }).end(body);
        },
      },
    ],
  ]);
  if (webhook) routes.set("/webhook", { methods: new Set(["POST"]), handle: webhook });
  return serveRoutes({ port: options.port, host: options.host, routes, log });
}

/** Limits every listener of the service has: it faces the network, so no client may hold it long. */
const SERVER_LIMITS = {
  /** Time to send the request line and headers (slowloris). */
  headersTimeoutMs: 10_000,
  /** Time to send the whole request, body included. */
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxHeaderBytes: 16 * 1024,
  maxConnections: 256,
} as const;

/**
 * An HTTP server over a route table: anything else is a 404. Every request gets an answer: a handler that
 * throws or rejects is logged and answered 500 (saying nothing more), a malformed request gets Node's
 * 400/408/431, and the server goes on serving.
 */
export function serveRoutes(options: {
  port: number;
  host?: string;
  routes: ReadonlyMap<string, Route>;
  log: Logger;
}): Promise<RunningHttpServer> {
  const { routes, log } = options;
  const server = createServer(
    {
      headersTimeout: SERVER_LIMITS.headersTimeoutMs,
      requestTimeout: SERVER_LIMITS.requestTimeoutMs,
      keepAliveTimeout: SERVER_LIMITS.keepAliveTimeoutMs,
      maxHeaderSize: SERVER_LIMITS.maxHeaderBytes,
    },
    (req, res) => {
      // Routing is by path alone; splitting, unlike URL parsing, cannot throw on a malformed request target.
      const route = routes.get((req.url ?? "/").split("?", 1)[0]!);
      if (!route?.methods.has(req.method ?? "")) {
        req.resume(); // drain an unread body so the connection can be reused
        text(res, 404, "not found");
        return;
      }
      Promise.resolve()
        .then(() => route.handle(req, res))
        .catch((err: unknown) => {
          log.error({ err: String(err), method: req.method }, "HTTP handler failed");
          if (!res.headersSent) text(res, 500, "internal error");
          else res.destroy();
        });
    },
  );
  server.maxConnections = SERVER_LIMITS.maxConnections;

  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "0.0.0.0", () => {
      server.off("error", reject);
      server.on("error", (err) => log.error({ err: String(err) }, "HTTP server error"));
      const { address, port } = server.address() as AddressInfo;
      log.info({ address, port, routes: [...routes.keys()] }, "HTTP server listening");
      let closed: Promise<void> | undefined;
      resolve({
        port,
        close: () =>
          (closed ??= new Promise<void>((done, fail) => {
            server.close((err) => (err ? fail(err) : done()));
            server.closeIdleConnections(); // kept-alive scrapes would otherwise hold close() open
          })),
      });
    });
  });
}

export function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(`${body}\n`);
}

/**
 * The last resort: an error nothing caught (an 'error' event without a listener, a throw in a timer) is
 * logged and the process goes on serving, instead of exiting and taking the leader (and, for a request
 * every replica gets, the standbys too) down with it.
 */
export function keepServingOnUncaughtErrors(log: Logger): () => void {
  const onError = (err: unknown) => log.error({ err: String(err) }, "uncaught error; the service goes on");
  process.on("uncaughtException", onError);
  process.on("unhandledRejection", onError);
  return () => {
    process.off("uncaughtException", onError);
    process.off("unhandledRejection", onError);
  };
}
