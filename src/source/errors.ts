import { NETWORK_ERROR_CODES } from "../kube/rest.ts";
/**
 * Why a git operation failed. `network` and `timeout` are transient; `rejected` (a push that lost a race
 * with another push) is transient for the write-back loop; the others need a person (or a config change).
 */
export type GitErrorKind =
  | "network"
  | "timeout"
  | "auth"
  | "not-found"
  | "tls"
  | "rejected"
  | "protocol"
  | "too-large"
  | "internal";

export type GitOperation = "head" | "fetch" | "read" | "push";

export class GitSourceError extends Error {
  readonly kind: GitErrorKind;
  readonly operation: GitOperation;

  constructor(kind: GitErrorKind, operation: GitOperation, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "GitSourceError";
    this.kind = kind;
    this.operation = operation;
  }
}

/** A typed error whose message says what was done to which repository (its URL without credentials). */
export function gitError(
  kind: GitErrorKind,
  operation: GitOperation,
  url: string,
  detail: string,
  cause?: unknown,
): GitSourceError {
  const message = `${operation} ${redactUrl(url)}: ${detail}`;
  return new GitSourceError(kind, operation, message, cause === undefined ? undefined : { cause });
}

export function isTransient(error: GitSourceError): boolean {
  return error.kind === "network" || error.kind === "timeout";
}

const tlsCode = /CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/;

/** Maps an isomorphic-git, Node or HTTP failure to a typed error whose message names no secret. */
export function classifyGitError(err: unknown, operation: GitOperation, url: string): GitSourceError {
  if (err instanceof GitSourceError) return err;
  const { code, data, message } = (err ?? {}) as {
    code?: string;
    data?: { statusCode?: number; reason?: string; prettyDetails?: string };
    message?: string;
  };
  const fail = (kind: GitErrorKind, detail: string) => gitError(kind, operation, url, detail, err);

  switch (code) {
    case "HttpError": {
      const status = data?.statusCode ?? 0;
      if (status === 401 || status === 403) return fail("auth", `HTTP ${status}: credentials were refused`);
      if (status === 404) return fail("not-found", "HTTP 404: no such repository");
      if (status === 408 || status === 429 || status >= 500) return fail("network", `HTTP ${status}`);
      return fail("protocol", `HTTP ${status}`);
    }
    case "NotFoundError":
      return fail("not-found", message ?? "not found");
    case "PushRejectedError":
      return fail("rejected", `push rejected (${data?.reason ?? "not a fast-forward"})`);
    case "GitPushError":
      return fail("rejected", `the server refused the ref update:${data?.prettyDetails ?? ""}`);
    case "SmartHttpError":
    case "ParseError":
    case "RemoteCapabilityError":
    case "UrlParseError":
    case "UnknownTransportError":
      return fail("protocol", message ?? String(code));
  }
  if (code && NETWORK_ERROR_CODES.has(code)) return fail("network", code);
  if (code && tlsCode.test(code)) return fail("tls", `${code}: ${message ?? ""}`);
  return fail("internal", message ?? String(err));
}

/** The URL without user info, so credentials written into it never reach a log line or a status. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = "";
    parsed.password = "";
    return parsed.toString();
  } catch {
    return "<invalid url>";
  }
}
