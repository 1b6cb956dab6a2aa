import { REDACTED, redactSecrets } from "../observability/redact.ts";

/**
 * What a credential plugin printed on stderr, made fit to show: status conditions, Events, the Git status
 * file and logs all get it. Plugins print the Secret they read, a kubeconfig, a token in a debug line; none
 * of that may leave the controller. So the text is reduced to its meaningful line (cobra-style plugins print
 * `Error: ...` and then a usage banner; Go panics print `panic: ...` first) and anything that looks like a
 * credential is replaced by `<redacted>`.
 */
export function pluginStderrLine(stderr: string, knownSecrets: readonly string[] = []): string {
  const lines = stderr
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const meaningful =
    lines.findLast((line) => /^(error|fatal|panic)\b[:\s]/i.test(line)) ??
    lines.find((line) => /\b(error|failed|cannot|unable)\b/i.test(line)) ??
    lines.at(-1) ??
    "";
  // A PEM block spans lines: if the chosen line is inside one, the block is the only thing said.
  const line = redactCredentials(meaningful, knownSecrets);
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}

// A plugin's raw output has no shape to rely on: on top of the shared rules, any Bearer/Basic value and any
// long opaque string (base64, base64url or hex of 32+ characters: a token printed bare) go too, except an
// object path (lower-case names joined by "/": `creds/spoke-1`, `/api/v1/namespaces/creds/secrets/spoke-1`),
// which is what an operator needs to fix a mapping and which a random token is all but never shaped like.
const RAW_OUTPUT_RULES: [RegExp, (match: string, ...groups: string[]) => string][] = [
  [/\b(bearer|basic)\s+(?!<redacted>)[^\s"',;]+/gi, (_, scheme) => `${scheme} ${REDACTED}`],
  [/[A-Za-z0-9+/_-]{32,}={0,2}/g, (match) => (isObjectPath(match) ? match : REDACTED)],
];

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function isObjectPath(text: string): boolean {
  const parts = text.split("/");
  return parts.length > 1 && parts.every((part, i) => (part === "" ? i === 0 : DNS_LABEL.test(part)));
}

/** The shared redaction (observability/redact.ts) plus the rules for a plugin's raw output. */
export function redactCredentials(text: string, knownSecrets: readonly string[] = []): string {
  let result = redactSecrets(text, knownSecrets);
  for (const [pattern, replacement] of RAW_OUTPUT_RULES) result = result.replace(pattern, replacement);
  return result;
}
