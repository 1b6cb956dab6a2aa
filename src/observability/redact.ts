/**
 * The one redaction of text that leaves the process: CR status, Events, the Git status files and commit
 * messages, logs and plan output all pass through it. Error texts carry what others wrote (a repository URL
 * with `user:password@`, a plugin's stderr, an API server's answer), so a credential in them is replaced by
 * `<redacted>`, and so are the exact values in `knownSecrets`. The rules are meant for text knative-fleet
 * composes around such values: they leave names, paths, digests and commit ids alone (a plugin's raw stderr
 * gets a stricter pass on top, access/plugin-stderr.ts).
 */
export function redactSecrets(text: string, knownSecrets: readonly string[] = []): string {
  let result = text;
  for (const secret of knownSecrets) if (secret !== "") result = result.replaceAll(secret, REDACTED);
  for (const [pattern, replacement] of RULES) result = result.replace(pattern, replacement);
  return result;
}

export const REDACTED = "<redacted>";

const RULES: [RegExp, string][] = [
  // URL userinfo: scheme://user:password@host (or a token alone as the user).
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi, `$1${REDACTED}@`],
  // PEM blocks, whole or cut off (a key printed on one line, or the first line of one).
  [/-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)/g, REDACTED],
  // Authorization header values.
  [
    /\b(authorization"?[ \t]*[:=][ \t]*"?(?:(?:bearer|basic)[ \t]+)?)(?!<redacted>)[^\s"',;]+/gi,
    `$1${REDACTED}`,
  ],
  // A Bearer/Basic credential elsewhere: a token-like value (so "the bearer token from" stays readable).
  [/\b(bearer|basic) (?!<redacted>)[A-Za-z0-9._~+/=-]{12,}/gi, `$1 ${REDACTED}`],
  // key: value / key=value / "key":"value" for credential keys (a name that ends in one), on one line;
  // a value that opens a structure ({, [) is left alone, so JSON and YAML stay what they were.
  [
    /\b([\w-]*(?:token|password|passwd|secret|credentials?|api[-_]?key|private[-_]?key|client[-_]?key[-_]?data))("?[ \t]*[:=][ \t]*"?)(?!<redacted>)([^\s"',;{}[\]|]+)/gi,
    `$1$2${REDACTED}`,
  ],
  // JWTs (ServiceAccount tokens).
  [/\beyJ[\w-]+\.[\w-]+\.[\w-]*/g, REDACTED],
];
