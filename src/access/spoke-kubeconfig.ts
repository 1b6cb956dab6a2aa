import {
  type ApiConstructor,
  type ApiType,
  createConfiguration,
  HttpMethod,
  IsomorphicFetchHttpLibrary,
  KubeConfig,
  RequestContext,
  type ResponseContext,
  ServerConfiguration,
  setHeaderMiddleware,
  wrapHttpLibrary,
} from "@kubernetes/client-node";
import { Agent, type Dispatcher, ProxyAgent } from "undici";
import {
  AccessError,
  accessProviderFailed,
  causeText,
  remoteClientCreationFailed,
  rootCause,
} from "./errors.ts";
import type { ExecAuthenticator } from "./exec-authenticator.ts";
import type { PluginCredential } from "./exec-credential.ts";
import { connectionField, profileKey, type SpokeEndpoint } from "./spoke-endpoint.ts";

const USER_AGENT = "knative-fleet";
// A spoke that accepts no connection or sends no response headers is down; waiting minutes helps nobody.
const CONNECT_TIMEOUT_MS = 10_000;
const HEADERS_TIMEOUT_MS = 60_000;

/** What GET /version told about a spoke that answered. */
export interface SpokeProbe {
  /** gitVersion, e.g. v1.35.4; undefined when /version answered with an error status (e.g. 403). */
  kubernetesVersion: string | undefined;
  /** Time from sending the request to the end of the response, credential and connection set-up included. */
  elapsedMs: number;
}

/**
 * A @kubernetes/client-node KubeConfig for one spoke, usable wherever a KubeConfig is (makeApiClient,
 * KubernetesObjectApi.makeApiClient, Watch). Unlike the stock one it
 * - takes every request's credential from the spoke's exec authenticator (token header or client certificate),
 * - keeps one connection pool per credential, where the stock KubeConfig builds a new one (a new TLS
 *   handshake) for every request,
 * - answers a 401 by asking the plugin again and resending the request once (client-go only renews the
 *   credential for the next request),
 * - refuses requests once closed, with the reason (RemoteClusterStale when its ClusterProfile changed).
 */
export class SpokeKubeConfig extends KubeConfig {
  readonly endpoint: SpokeEndpoint;
  readonly authenticator: ExecAuthenticator;
  readonly #transport = new IsomorphicFetchHttpLibrary();
  readonly #credentialOf = new WeakMap<RequestContext, PluginCredential>();
  #pool: { clientCertificate: string | undefined; dispatcher: Dispatcher } | undefined;
  #closedBecause: AccessError | undefined;

  constructor(endpoint: SpokeEndpoint, authenticator: ExecAuthenticator) {
    super();
    this.endpoint = endpoint;
    this.authenticator = authenticator;
    // The cluster entry is for code that reads it (Watch builds its URL from it); the user entry is empty
    // because credentials come from the authenticator, request by request.
    this.loadFromClusterAndUser(
      {
        name: profileKey(endpoint.profile),
        server: endpoint.server,
        caData: endpoint.caData,
        tlsServerName: endpoint.tlsServerName,
        skipTLSVerify: endpoint.insecureSkipTlsVerify,
        proxyUrl: endpoint.proxyUrl,
      },
      { name: endpoint.providerName },
    );
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    this.#checkOpen();
    const credential = await this.authenticator.credential();
    this.#checkOpen();
    if (credential.token !== undefined) context.setHeaderParam("Authorization", `Bearer ${credential.token}`);
    if (this.endpoint.disableCompression) context.setHeaderParam("Accept-Encoding", "identity");
    context.setDispatcher(this.#dispatcherFor(credential));
    this.#credentialOf.set(context, credential);
  }

  override makeApiClient<T extends ApiType>(apiClientType: ApiConstructor<T>): T {
    return new apiClientType(
      createConfiguration({
        baseServer: new ServerConfiguration(this.endpoint.server, {}),
        authMethods: { default: this },
        httpApi: wrapHttpLibrary({ send: (request) => this.#send(request) }),
        middleware: [setHeaderMiddleware("User-Agent", USER_AGENT)],
      }),
    );
  }

  /**
   * GET /version: whether the spoke can be reached and accepts the credential. Throws an AccessError:
   * RemoteClientCreationFailed for connection and TLS failures, AccessProviderFailed for a refused credential.
   */
  async probe(timeoutMs: number): Promise<SpokeProbe> {
    const started = performance.now();
    const request = new RequestContext(`${this.endpoint.server}/version`, HttpMethod.GET);
    request.setHeaderParam("Accept", "application/json");
    request.setHeaderParam("User-Agent", USER_AGENT);
    request.setSignal(AbortSignal.timeout(timeoutMs));
    await this.applySecurityAuthentication(request);
    let response: ResponseContext;
    let body: string;
    try {
      response = await this.#send(request);
      body = await response.body.text();
    } catch (err) {
      if (err instanceof AccessError) throw err; // the plugin failed when asked again after a 401
      throw remoteClientCreationFailed(describeSpokeError(err, this.endpoint), { cause: err });
    }
    if (response.httpStatusCode === 401) {
      throw accessProviderFailed(
        `the spoke ${this.endpoint.server} refused the ${this.#credentialOf.get(request)?.describe()} from ` +
          `access provider "${this.endpoint.providerName}" (401 Unauthorized), also after the plugin ran again; ` +
          `the plugin returns a credential for another cluster or one the spoke does not trust`,
      );
    }
    const ok = response.httpStatusCode >= 200 && response.httpStatusCode < 300;
    return { kubernetesVersion: ok ? gitVersionOf(body) : undefined, elapsedMs: performance.now() - started };
  }

  /**
   * Refuses new requests with `reason`. "drain" lets requests in flight finish (the client was replaced);
   * "abort" ends them (shutdown).
   */
  async close(reason: AccessError, mode: "drain" | "abort"): Promise<void> {
    this.#closedBecause ??= reason;
    this.authenticator.close();
    const dispatcher = this.#pool?.dispatcher;
    this.#pool = undefined;
    if (dispatcher) await (mode === "drain" ? dispatcher.close() : dispatcher.destroy());
  }

  #checkOpen(): void {
    if (this.#closedBecause) throw this.#closedBecause;
  }

  async #send(request: RequestContext): Promise<ResponseContext> {
    const response = await this.#transport.send(request).toPromise();
    const used = this.#credentialOf.get(request);
    if (response.httpStatusCode !== 401 || used === undefined) return response;
    this.authenticator.rejected(used);
    await response.body.text(); // read to the end, so the connection goes back to the pool
    // The API server authenticates before anything else, so the refused request did nothing and sending it
    // again, with the credential the plugin returns now, is safe for writes too.
    await this.applySecurityAuthentication(request);
    return this.#transport.send(request).toPromise();
  }

  // TLS client certificates belong to a connection, so a new certificate needs new connections; the old pool
  // closes once its requests finish. Tokens travel in a header and share the pool.
  #dispatcherFor(credential: PluginCredential): Dispatcher {
    const clientCertificate = credential.clientCertificate?.cert;
    if (this.#pool !== undefined && this.#pool.clientCertificate === clientCertificate)
      return this.#pool.dispatcher;
    const previous = this.#pool?.dispatcher;
    const { caData, tlsServerName, insecureSkipTlsVerify, proxyUrl } = this.endpoint;
    const tls = {
      ...(caData === undefined ? {} : { ca: Buffer.from(caData, "base64").toString("utf8") }),
      ...(tlsServerName === undefined ? {} : { servername: tlsServerName }),
      ...(credential.clientCertificate ?? {}),
      rejectUnauthorized: !insecureSkipTlsVerify,
    };
    const dispatcher =
      proxyUrl === undefined
        ? new Agent({ connect: { ...tls, timeout: CONNECT_TIMEOUT_MS }, headersTimeout: HEADERS_TIMEOUT_MS })
        : new ProxyAgent({ uri: proxyUrl, requestTls: tls, headersTimeout: HEADERS_TIMEOUT_MS });
    this.#pool = { clientCertificate, dispatcher };
    previous?.close().catch(() => undefined); // a pool that fails to close has nothing left to clean up
    return dispatcher;
  }
}

// Any HTTP answer shows the spoke is there and took the credential; the version is a bonus.
function gitVersionOf(body: string): string | undefined {
  try {
    const version = (JSON.parse(body) as { gitVersion?: unknown }).gitVersion;
    return typeof version === "string" ? version : undefined;
  } catch {
    return undefined;
  }
}

const UNTRUSTED_CERTIFICATE = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
]);

/**
 * Says in words what went wrong talking to a spoke, and which ClusterProfile field to check: a TLS trust
 * failure, a name mismatch, a refused or timed-out connection. Errors it does not recognise keep their message.
 */
export function describeSpokeError(err: unknown, endpoint: SpokeEndpoint): string {
  const field = connectionField(endpoint.profile, endpoint.providerName);
  const server = endpoint.server;
  const cause = rootCause(err);
  const code = (cause as NodeJS.ErrnoException).code ?? "";
  const detail = causeText(err);
  if (UNTRUSTED_CERTIFICATE.has(code)) {
    return endpoint.caData === undefined
      ? `TLS: the serving certificate of ${server} is not signed by a CA this host trusts (${detail}); set certificate-authority-data in ${field}`
      : `TLS: the serving certificate of ${server} is not signed by the CA in ${field}.certificate-authority-data (${detail}); the CA there is wrong or outdated`;
  }
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID") {
    return `TLS: the serving certificate of ${server} is not valid for the name used (${detail}); fix ${field}.server or set tls-server-name`;
  }
  if (code === "CERT_HAS_EXPIRED" || code === "CERT_NOT_YET_VALID") {
    return `TLS: the serving certificate of ${server} is outside its validity period (${detail})`;
  }
  if (code === "ECONNREFUSED")
    return `cannot connect to ${server}: connection refused; check ${field}.server`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN")
    return `cannot resolve the host of ${server} (${detail}); check ${field}.server`;
  if (
    cause.name === "TimeoutError" ||
    code === "UND_ERR_CONNECT_TIMEOUT" ||
    code === "UND_ERR_HEADERS_TIMEOUT"
  ) {
    return `no answer from ${server} in time (${detail}); the spoke's API server is down or unreachable from the hub`;
  }
  return `request to ${server} failed: ${detail}`;
}
