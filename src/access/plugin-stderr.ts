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

const REDACTED = "<redacted>";

const PATTERNS: [RegExp, string][] = [
  // PEM blocks, whole or cut off (a key printed on one line, or the first line of one).
  [/-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)/g, REDACTED],
  // Authorization header values.
  [/\b(bearer|basic)\s+[^\s"',;]+/gi, `$1 ${REDACTED}`],
  // key: value / key=value / "key":"value" for credential-ish keys.
  [
    /\b([\w-]*(?:token|password|passwd|secret|credential|api[-_]?key|private[-_]?key|client[-_]?key[-_]?data|authorization)[\w-]*)("?\s*[:=]\s*"?)(?!(?:bearer|basic)\s|<redacted>)([^\s"',;}]+)/gi,
    `$1$2${REDACTED}`,
  ],
  // JWTs (ServiceAccount tokens) and long opaque strings: base64, base64url or hex of 32+ characters.
  [/\beyJ[\w-]+\.[\w-]+\.[\w-]*/g, REDACTED],
  [/[A-Za-z0-9+/_-]{32,}={0,2}/g, REDACTED],
];

/** Replaces what looks like a credential, and the exact values in `knownSecrets`, with `<redacted>`. */
export function redactCredentials(text: string, knownSecrets: readonly string[] = []): string {
  let result = text;
  for (const secret of knownSecrets) if (secret !== "") result = result.replaceAll(secret, REDACTED);
  for (const [pattern, replacement] of PATTERNS) result = result.replace(pattern, replacement);
  return result;
}
