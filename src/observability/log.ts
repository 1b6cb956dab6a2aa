import { type Logger, pino } from "pino";

export type { Logger } from "pino";

/**
 * The service's logger: JSON lines (pino). Fields that could carry a credential are redacted wherever
 * they appear, as a last line of defence; code must not log them in the first place.
 */
export function createLogger(level = process.env.LOG_LEVEL ?? "info"): Logger {
  return pino({
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
  });
}

/** A logger that writes nothing, for tests and library callers that pass none. */
export const silentLogger: Logger = pino({ level: "silent" });
