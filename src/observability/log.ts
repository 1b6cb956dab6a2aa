import { type DestinationStream, type Logger, type LoggerOptions, pino } from "pino";
import { redactSecrets } from "./redact.ts";

export type { Logger } from "pino";

/**
 * The service's logger: JSON lines (pino). Every message and every string field goes through the one
 * redaction (redact.ts: a URL's user:password@, tokens, keys), and fields named like a credential are
 * censored whole, as a last line of defence; code must not log them in the first place.
 */
export function createLogger(
  level = process.env.LOG_LEVEL ?? "info",
  destination?: DestinationStream,
): Logger {
  const options: LoggerOptions = {
    name: "knative-fleet",
    level,
    redact: {
      paths: [
        "token",
        "*.token",
        "password",
        "*.password",
        "authorization",
        "*.authorization",
        "clientKeyData",
        "*.clientKeyData",
      ],
      censor: "[redacted]",
    },
    formatters: { log: (fields) => redactedFields(fields) as Record<string, unknown> },
    hooks: {
      logMethod(args, method) {
        const redacted = args.map((arg) => (typeof arg === "string" ? redactSecrets(arg) : arg));
        method.apply(this, redacted as Parameters<typeof method>);
      },
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/** Strings anywhere in a log line's fields (a few levels deep), redacted. */
function redactedFields(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return redactSecrets(value);
  if (depth > 4 || value === null || typeof value !== "object" || value instanceof Error) return value;
  if (Array.isArray(value)) return value.map((item) => redactedFields(item, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, redactedFields(item, depth + 1)]),
  );
}

/** A logger that writes nothing, for tests and library callers that pass none. */
export const silentLogger: Logger = pino({ level: "silent" });
