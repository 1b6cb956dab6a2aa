import { causeText, rootCause } from "../access/errors.ts";
import { KubeApiError } from "../kube/rest.ts";

// How a command says, in one line, that the hub could not be read: `status`, `approve` and `plan` (whose
// live plan then falls back to offline) word the same failure the same way.

/** Socket and TLS failures in words, before the code that Node.js gives them. */
const CODE_WORDS: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  EPIPE: "connection closed",
  ENOTFOUND: "host name not found",
  EAI_AGAIN: "host name lookup failed",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  ETIMEDOUT: "timed out",
  UND_ERR_SOCKET: "connection closed",
  UND_ERR_CONNECT_TIMEOUT: "timed out connecting",
  UND_ERR_HEADERS_TIMEOUT: "no answer in time",
  UND_ERR_BODY_TIMEOUT: "no answer in time",
  CERT_HAS_EXPIRED: "its certificate has expired",
  DEPTH_ZERO_SELF_SIGNED_CERT: "its certificate is not trusted",
  SELF_SIGNED_CERT_IN_CHAIN: "its certificate is not trusted",
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "its certificate is not trusted",
  ERR_TLS_CERT_ALTNAME_INVALID: "its certificate is not for this host name",
};

/**
 * Why the hub could not be read, naming its server: an API refusal as the server said it (`reading` says
 * what was being read), else the socket's cause in words with its code
 * (`cannot reach the hub https://10.0.0.1:6443: connection refused (ECONNREFUSED: connect ECONNREFUSED …)`).
 */
export function hubErrorText(server: string, err: unknown, reading: string): string {
  if (err instanceof KubeApiError) return `cannot ${reading} on the hub ${server}: ${err.message}`;
  const code = (rootCause(err) as NodeJS.ErrnoException).code;
  const words = code === undefined ? undefined : CODE_WORDS[code];
  return `cannot reach the hub ${server}: ${words ? `${words} (${causeText(err)})` : causeText(err)}`;
}
