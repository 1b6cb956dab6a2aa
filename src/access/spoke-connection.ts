import { KubeApiError, RestClient } from "../kube/rest.ts";
import { KubeTransport } from "../kube/transport.ts";
import {
  AccessError,
  accessProviderFailed,
  causeText,
  remoteClientCreationFailed,
  rootCause,
} from "./errors.ts";
import type { ExecAuthenticator } from "./exec-authenticator.ts";
import type { PluginCredential } from "./exec-credential.ts";
import { connectionField, type SpokeEndpoint } from "./spoke-endpoint.ts";

/** What GET /version told about a spoke that answered. */
export interface SpokeProbe {
  /** gitVersion, e.g. v1.35.4; undefined when /version answered with an error status (e.g. 403). */
  kubernetesVersion: string | undefined;
  /** Time from sending the request to the end of the response, credential and connection set-up included. */
  elapsedMs: number;
}

/**
 * One spoke's connection: the one transport (src/kube/transport.ts) with the spoke's exec-plugin credential.
 * Every request to a spoke goes through `rest` (reconcile reads and server-side apply, watches,
 * FinalizeRemoteCluster, plan's live dry run, health checks) or `probe` (`knative-fleet clusters` and the
 * first-use check), so the commands and the reconcile cannot disagree about whether a spoke is reachable.
 * A 401 makes the plugin run again and the request is resent once (client-go only renews the credential for
 * the next request). Once closed it refuses requests, with the reason (RemoteClusterStale when its
 * ClusterProfile changed).
 */
export class SpokeConnection {
  readonly endpoint: SpokeEndpoint;
  readonly authenticator: ExecAuthenticator;
  readonly transport: KubeTransport;
  readonly rest: RestClient;
  #lastCredential: PluginCredential | undefined;
  #closedBecause: AccessError | undefined;

  constructor(endpoint: SpokeEndpoint, authenticator: ExecAuthenticator) {
    this.endpoint = endpoint;
    this.authenticator = authenticator;
    this.transport = new KubeTransport(endpoint, {
      checkOpen: () => {
        if (this.#closedBecause) throw this.#closedBecause;
      },
      credential: async () => {
        const credential = await authenticator.credential();
        this.#lastCredential = credential;
        return {
          headers: bearer(credential.token),
          clientCertificate: credential.clientCertificate,
          rejected: () => authenticator.rejected(credential),
        };
      },
    });
    this.rest = new RestClient(this.transport);
  }

  /**
   * GET /version: whether the spoke can be reached and accepts the credential. Throws an AccessError:
   * RemoteClientCreationFailed for connection and TLS failures, AccessProviderFailed for a refused credential.
   */
  async probe(timeoutMs: number): Promise<SpokeProbe> {
    const started = performance.now();
    let kubernetesVersion: string | undefined;
    try {
      kubernetesVersion = await requestKubernetesVersion(this.rest, AbortSignal.timeout(timeoutMs));
    } catch (err) {
      if (err instanceof AccessError) throw err; // closed, or the plugin failed
      if (err instanceof KubeApiError && err.status === 401) {
        throw accessProviderFailed(
          `the spoke ${this.endpoint.server} refused the ${this.#lastCredential?.describe()} from ` +
            `access provider "${this.endpoint.providerName}" (401 Unauthorized), also after the plugin ran again; ` +
            `the plugin returns a credential for another cluster or one the spoke does not trust`,
        );
      }
      // Any other HTTP answer shows the spoke is there and took the credential; the version is a bonus.
      if (!(err instanceof KubeApiError)) {
        throw remoteClientCreationFailed(describeSpokeError(err, this.endpoint), { cause: err });
      }
    }
    return { kubernetesVersion, elapsedMs: performance.now() - started };
  }

  /**
   * Refuses new requests with `reason`. "drain" lets requests in flight finish (the client was replaced);
   * "abort" ends them, failing with the reason (shutdown, or the cluster handed to another shard).
   */
  async close(reason: AccessError, mode: "drain" | "abort"): Promise<void> {
    this.#closedBecause ??= reason;
    this.authenticator.close();
    await this.transport.close(mode, this.#closedBecause);
  }
}

/** GET /version's gitVersion (undefined when the answer has none); errors are the request's. */
export async function requestKubernetesVersion(
  rest: RestClient,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const response = await rest.request<unknown>({
    method: "GET",
    path: "/version",
    ...(signal && { signal }),
  });
  const version = (response.body as { gitVersion?: unknown } | null)?.gitVersion;
  return typeof version === "string" ? version : undefined;
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
function describeSpokeError(err: unknown, endpoint: SpokeEndpoint): string {
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

const bearer = (token: string | undefined): Record<string, string> =>
  token === undefined ? {} : { authorization: `Bearer ${token}` };
