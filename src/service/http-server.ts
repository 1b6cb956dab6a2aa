import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
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

type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/**
 * The service's one HTTP server: /healthz (answered as long as the event loop turns), /readyz, /metrics
 * in the Prometheus text format, and the push webhook at POST /webhook. Anything else is a 404.
 */
export function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const { metrics, ready, webhook, log } = options;
  const probes = new Set(["GET", "HEAD"]);
  const routes = new Map<string, { methods: Set<string>; handle: Handler }>([
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

  const server = createServer((req, res) => {
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
        log.error({ err: String(err), path: req.url }, "HTTP handler failed");
        if (!res.headersSent) text(res, 500, "internal error");
        else res.destroy();
      });
  });

  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "0.0.0.0", () => {
      server.off("error", reject);
      server.on("error", (err) => log.error({ err: String(err) }, "HTTP server error"));
      const { address, port } = server.address() as AddressInfo;
      log.info({ address, port, webhook: webhook !== undefined }, "HTTP server listening");
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

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(`${body}\n`);
}
