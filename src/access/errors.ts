import { TargetClusterReason } from "../api/conditions.ts";

/**
 * Why a spoke cannot be reached, as the TargetClusterResolved reason upstream uses, with a message that says
 * what to check or change. Requests made through a replaced client throw one too (RemoteClusterStale).
 */
export class AccessError extends Error {
  override name = "AccessError";
  readonly reason: TargetClusterReason;

  constructor(reason: TargetClusterReason, message: string, options?: ErrorOptions) {
    super(message, options);
    this.reason = reason;
  }
}

export const accessProviderFailed = (message: string, options?: ErrorOptions): AccessError =>
  new AccessError(TargetClusterReason.AccessProviderFailed, message, options);

export const remoteClientCreationFailed = (message: string, options?: ErrorOptions): AccessError =>
  new AccessError(TargetClusterReason.RemoteClientCreationFailed, message, options);

/** The innermost cause of an error (undici wraps socket errors as TypeError("fetch failed", { cause })). */
export function rootCause(err: unknown): Error {
  let current = err instanceof Error ? err : new Error(String(err));
  while (current.cause instanceof Error) current = current.cause;
  return current;
}

/** `ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443`: the root cause's code and message. */
export function causeText(err: unknown): string {
  const cause = rootCause(err);
  const code = (cause as NodeJS.ErrnoException).code;
  return code ? `${code}: ${cause.message}` : cause.message;
}
