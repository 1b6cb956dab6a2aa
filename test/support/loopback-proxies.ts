import { readFileSync, writeFileSync } from "node:fs";
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { createServer as createHttpsServer, request as httpsRequest } from "node:https";
import {
  type AddressInfo,
  connect,
  createServer as createTcpServer,
  type Server,
  type Socket,
} from "node:net";
import { join } from "node:path";

// Loopback stand-ins for what sits between a hub and its spokes in real fleets: OCM cluster-proxy's user
// server (a path-prefixed reverse proxy), a corporate CONNECT proxy, and a port forwarder that puts an API
// server on a port WHATWG fetch refuses. Every address is 127.0.0.1.

export interface LoopbackProxy {
  url: string;
  port: number;
  /** Requests (reverse proxy), CONNECT tunnels (proxy) or connections (forwarder) it handled. */
  readonly handled: string[];
  close(): Promise<void>;
}

const closeServer = (server: { close(cb: () => void): void }, sockets: Set<Socket>) =>
  new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    server.close(() => resolve());
  });

function track(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  return sockets;
}

async function listen(server: Server, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** What a proxy answers by itself: text, or a JSON body. */
export interface ProxyAnswer {
  status: number;
  body: string | object;
}

/**
 * Like OCM cluster-proxy's user server: HTTPS on loopback, `/<cluster>/<path>` goes to that cluster's API
 * server as `<path>`, headers (the Authorization the hub sends) passed through. `routes` maps cluster names to
 * upstream base URLs; the upstream's certificate is checked against `upstreamCa`.
 */
export async function startClusterProxy(options: {
  key: string;
  cert: string;
  routes: Record<string, string>;
  upstreamCa: string;
  /**
   * Requests the proxy answers itself instead of forwarding them: a proxy that refuses long-lived streams
   * (watches) with a 403, a stand-in for what a spoke reports (its /version).
   */
  answer?: (method: string, path: string) => ProxyAnswer | undefined;
  /**
   * Speak HTTP/2 as well (ALPN), as the Go servers it stands for do (kube-apiserver, OCM's cluster-proxy):
   * clients that offer it (undici, client-go) then multiplex their requests over one connection per
   * cluster instead of opening one per request in flight. The proxy's own requests upstream stay HTTP/1.1.
   */
  http2?: boolean;
}): Promise<LoopbackProxy & { inFlight(): string[]; connectionsAccepted(): number }> {
  const handled: string[] = [];
  /** Requests forwarded and not answered to the end yet: the open watches, and requests to a hung spoke. */
  const open = new Set<string>();
  let sequence = 0;
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const [, cluster = "", ...rest] = (req.url ?? "/").split("/");
    const upstream = options.routes[cluster];
    if (upstream === undefined) {
      res.writeHead(404, { "content-type": "text/plain" }).end(`no cluster ${cluster}\n`);
      return;
    }
    handled.push(`${req.method} ${req.url}`);
    const path = `/${rest.join("/")}`;
    const own = options.answer?.(req.method ?? "", path);
    if (own !== undefined) {
      const json = typeof own.body !== "string";
      res
        .writeHead(own.status, { "content-type": json ? "application/json" : "text/plain" })
        .end(json ? JSON.stringify(own.body) : own.body);
      return;
    }
    const target = new URL(path, upstream);
    const request = `${sequence++} ${req.method} ${req.url}`;
    open.add(request);
    res.on("close", () => open.delete(request));
    const send = target.protocol === "https:" ? httpsRequest : httpRequest;
    const fromHttp2 = (headers: IncomingHttpHeaders) =>
      req.httpVersionMajor === 2 ? http1Headers(headers) : headers;
    const forwarded = send(
      target,
      {
        method: req.method,
        headers: { ...fromHttp2(req.headers), host: target.host },
        ca: options.upstreamCa,
      },
      (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, fromHttp2(answer.headers));
        answer.pipe(res);
      },
    );
    forwarded.on("error", (err) => res.destroy(err));
    req.pipe(forwarded);
  };
  const tls = { key: options.key, cert: options.cert };
  // HTTP/2's compatibility API has the same request and response methods as HTTP/1.1's.
  const handleHttp2 = (req: Http2ServerRequest, res: Http2ServerResponse) =>
    handle(req as unknown as IncomingMessage, res as unknown as ServerResponse);
  const server = options.http2
    ? createSecureServer({ ...tls, allowHTTP1: true }, handleHttp2)
    : createHttpsServer(tls, handle);
  let accepted = 0;
  server.on("secureConnection", () => accepted++);
  const sockets = track(server);
  const port = await listen(server);
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    handled,
    inFlight: () => [...open].map((r) => r.slice(r.indexOf(" ") + 1)),
    connectionsAccepted: () => accepted,
    close: () => closeServer(server, sockets),
  };
}

/** Headers without HTTP/2's pseudo-headers and HTTP/1.1's per-connection ones, which the other protocol refuses. */
function http1Headers(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const perConnection = new Set([
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
  ]);
  return Object.fromEntries(
    Object.entries(headers).filter(([name]) => !name.startsWith(":") && !perConnection.has(name)),
  );
}

/** An HTTP proxy that only tunnels (CONNECT), as corporate egress proxies do for TLS. */
export async function startConnectProxy(): Promise<LoopbackProxy> {
  const handled: string[] = [];
  const server = createHttpServer((_req, res) => res.writeHead(405).end());
  server.on("connect", (req: IncomingMessage, client: Socket, head: Buffer) => {
    const [host = "", port = ""] = (req.url ?? "").split(":");
    if (host !== "127.0.0.1" && host !== "localhost") {
      client.end("HTTP/1.1 403 Forbidden\r\n\r\n"); // loopback only
      return;
    }
    handled.push(`CONNECT ${req.url}`);
    const upstream = connect(Number(port), "127.0.0.1", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  const sockets = track(server);
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, port, handled, close: () => closeServer(server, sockets) };
}

// Ports WHATWG fetch refuses ("bad port"); any one that is free will do.
const BAD_PORTS = [6666, 6665, 6667, 6668, 6669, 10080, 6000];

/** Forwards TCP from 127.0.0.1 on a fetch "bad port" to `target` (host:port on loopback). */
export async function startBadPortForwarder(target: { host: string; port: number }): Promise<LoopbackProxy> {
  const handled: string[] = [];
  const server = createTcpServer((client) => {
    handled.push(`connection from ${client.remotePort}`);
    const upstream = connect(target.port, target.host);
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  const sockets = track(server);
  for (const candidate of BAD_PORTS) {
    try {
      const port = await listen(server, candidate);
      return { url: `https://127.0.0.1:${port}`, port, handled, close: () => closeServer(server, sockets) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE") throw err;
    }
  }
  throw new Error(`every fetch "bad port" on 127.0.0.1 is taken: ${BAD_PORTS.join(", ")}`);
}

/**
 * A TCP forwarder to `target` (an API server on loopback; TLS passes through, so client certificates work)
 * that can be partitioned: `freeze()` makes every connection, open or new, go silent (accepted, never
 * answered), as a network partition between one client and its server does; `thaw()` drops the frozen
 * connections and forwards new ones again.
 */
export async function startFreezableForwarder(target: {
  host: string;
  port: number;
}): Promise<LoopbackProxy & { freeze(): void; thaw(): void }> {
  const handled: string[] = [];
  let frozen = false;
  const sockets = new Set<Socket>();
  const server = createTcpServer((client) => {
    handled.push(`connection from ${client.remotePort}`);
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    if (frozen) return;
    const upstream = connect(target.port, target.host);
    sockets.add(upstream);
    upstream.on("close", () => sockets.delete(upstream));
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  const port = await listen(server);
  return {
    url: `https://127.0.0.1:${port}`,
    port,
    handled,
    freeze() {
      frozen = true;
      for (const socket of sockets) {
        socket.unpipe();
        socket.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const socket of sockets) socket.destroy();
    },
    close: () => closeServer(server, sockets),
  };
}

/**
 * A freezable forwarder to a hub (startFreezableForwarder) and a copy of its admin kubeconfig, in `dir`,
 * that reaches the hub through it: a replica started with that kubeconfig can be cut off from the hub alone.
 */
export async function freezableHubPath(
  hub: { server: string; adminKubeconfig: string },
  dir: string,
): Promise<{ forwarder: Awaited<ReturnType<typeof startFreezableForwarder>>; kubeconfig: string }> {
  const url = new URL(hub.server);
  const forwarder = await startFreezableForwarder({ host: url.hostname, port: Number(url.port) });
  const kubeconfig = join(dir, `through-forwarder-${forwarder.port}.kubeconfig`);
  writeFileSync(
    kubeconfig,
    readFileSync(hub.adminKubeconfig, "utf8").replace(hub.server, `https://127.0.0.1:${forwarder.port}`),
  );
  return { forwarder, kubeconfig };
}
