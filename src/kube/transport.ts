import { createSecureContext } from "node:tls";
import { Agent, buildConnector, type Dispatcher, ProxyAgent } from "undici";
import type { RestTransport } from "./rest.ts";

/**
 * The connection fields of a kubeconfig Cluster (clientcmd's `clusters[].cluster`), as a ClusterProfile's
 * access provider or the hub's kubeconfig gives them.
 */
interface ServerConnection {
  /** Base URL, with any path prefix (OCM cluster-proxy: https://proxy:9092/<cluster>) and any port. */
  server: string;
  /** Base64 of the PEM CA bundle that signs the server's certificate; system roots when unset. */
  caData?: string | undefined;
  tlsServerName?: string | undefined;
  insecureSkipTlsVerify?: boolean | undefined;
  /** http:// or https:// proxy, reached with CONNECT for https servers. */
  proxyUrl?: string | undefined;
  disableCompression?: boolean | undefined;
}

/** What one request authenticates with: headers (a bearer token) and/or a TLS client certificate. */
export interface RequestCredential {
  headers: Record<string, string>;
  clientCertificate?: { cert: string; key: string } | undefined;
  /** The server answered 401 to a request made with this credential. */
  rejected?(): void;
}

interface KubeTransportOptions {
  /** The credential for the next request (cached by whoever supplies it). */
  credential(): Promise<RequestCredential>;
  /** Throws when no request may start any more (the client was closed or replaced). */
  checkOpen?(): void;
}

const USER_AGENT = "knative-fleet";
// A server that accepts no connection is down; waiting minutes helps nobody.
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * The one HTTP transport to a Kubernetes API server, on undici's dispatcher API (not fetch, which refuses
 * "bad ports" such as 6666 or 10080; client-go reaches any TCP port). It honours what client-go honours in
 * a kubeconfig Cluster: a server with a path prefix (the REST client sends `<prefix>/api/...`), CA data,
 * tls-server-name, insecure-skip-tls-verify, an http or https proxy-url (CONNECT tunnel) and
 * disable-compression (responses are never asked compressed then). One connection pool per client
 * certificate: a certificate belongs to a connection, so a new one needs new connections, and the old pool
 * closes once its requests finish; tokens travel in a header and share the pool. The pool's connections
 * share one TLS context (CA, client certificate): left to itself, every TLS connection builds its own
 * OpenSSL context from the PEM, a few hundred KiB of native memory each, left fragmented after an install.
 * And a pool holds its newest TLS session, so a new connection resumes it (no certificate chain to verify,
 * no peer certificate to decode); see `resumingConnector`.
 */
export class KubeTransport implements RestTransport {
  readonly server: string;
  readonly #connection: ServerConnection;
  readonly #options: KubeTransportOptions;
  #pool: { clientCertificate: string | undefined; dispatcher: Dispatcher } | undefined;

  constructor(connection: ServerConnection, options: KubeTransportOptions) {
    this.server = connection.server.replace(/\/+$/, "");
    this.#connection = connection;
    this.#options = options;
  }

  async connect(): Promise<{
    dispatcher: Dispatcher;
    headers: Record<string, string>;
    rejected?: () => void;
  }> {
    this.#options.checkOpen?.();
    const credential = await this.#options.credential();
    this.#options.checkOpen?.();
    const headers: Record<string, string> = { "user-agent": USER_AGENT, ...credential.headers };
    if (this.#connection.disableCompression) headers["accept-encoding"] = "identity";
    return {
      dispatcher: this.#dispatcherFor(credential.clientCertificate),
      headers,
      ...(credential.rejected ? { rejected: credential.rejected } : {}),
    };
  }

  /** "drain" lets requests in flight finish; "abort" ends them, failing with `reason` when given. */
  async close(mode: "drain" | "abort", reason?: Error): Promise<void> {
    const dispatcher = this.#pool?.dispatcher;
    this.#pool = undefined;
    if (dispatcher) await (mode === "drain" ? dispatcher.close() : dispatcher.destroy(reason ?? null));
  }

  #dispatcherFor(certificate: { cert: string; key: string } | undefined): Dispatcher {
    const clientCertificate = certificate?.cert;
    if (this.#pool !== undefined && this.#pool.clientCertificate === clientCertificate)
      return this.#pool.dispatcher;
    const previous = this.#pool?.dispatcher;
    const { caData, tlsServerName, insecureSkipTlsVerify, proxyUrl } = this.#connection;
    const tls = {
      secureContext: createSecureContext({
        ...(caData === undefined ? {} : { ca: Buffer.from(caData, "base64").toString("utf8") }),
        ...(certificate ?? {}),
      }),
      ...(tlsServerName === undefined ? {} : { servername: tlsServerName }),
      rejectUnauthorized: !insecureSkipTlsVerify,
    };
    const timeout = CONNECT_TIMEOUT_MS;
    const dispatcher =
      proxyUrl === undefined
        ? new Agent({ connect: resumingConnector({ ...tls, timeout }) })
        : new ProxyAgent({ uri: proxyUrl, requestTls: tls, proxyTls: { timeout }, connectTimeout: timeout });
    this.#pool = { clientCertificate, dispatcher };
    previous?.close().catch(() => undefined); // a pool that fails to close has nothing left to clean up
    return dispatcher;
  }
}

/**
 * undici's connector with TLS session resumption that works. undici caches each origin's newest session
 * through a WeakRef only, so nothing else holds it and the next garbage collection (every few milliseconds
 * with the image's 1 MiB young generation) takes it: every connection made a full handshake (measured
 * against a kube-apiserver: 0 of 40 resumed). The connector keeps the newest session its sockets were given,
 * which keeps undici's weak entry alive: the same object. A resumed connection skips verifying the server's
 * certificate chain and decoding it for the name check (both were done for the session it resumes; Node
 * skips them for a resumed session as well), about a quarter of the client's CPU per connection, and spares
 * the API server the same work. Sessions stay inside one pool: one server, one CA, one client certificate.
 */
function resumingConnector(options: buildConnector.BuildOptions): buildConnector.connector {
  const connect = buildConnector(options);
  const held: { session?: Buffer } = {};
  return (target, callback) =>
    connect(target, (...result) => {
      result[1]?.on("session", (session: Buffer) => {
        held.session = session;
      });
      callback(...result);
    });
}
