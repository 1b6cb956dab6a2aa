import { LAST_APPLIED_ANNOTATION } from "../api/labels.ts";

// A plan is posted where many people read it (a pull-request comment, a CI log), so nothing secret may
// reach it: Secret data, fields whose name says they hold a credential, and values that look like one.

/** What a masked value prints as. */
export const MASKED = "(masked)";

/** Fields of a Secret that hold its values; their keys are shown, their values never. */
const SECRET_DATA_FIELDS = new Set(["data", "stringData"]);

/** A key that names a credential: `password`, `client-secret`, `apiKey`, `bearer-token`, `basic-auth`. */
const CREDENTIAL_KEY =
  /pass(word|wd)?|secret|token|api[-_.]?key|credential|private[-_.]?key|\bauth\b|authorization/i;
/** A key that only points at a credential (`secretName`, `tokenPath`, `credentialsRef`): safe to show. */
const CREDENTIAL_POINTER_KEY = /(name|ref|namespace|path|file|dir|mode|type|ttl|duration|seconds)$/i;

/** Values that are credentials whatever their field is called. */
const CREDENTIAL_VALUES = [
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  /\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}/, // a JWT (service-account and OIDC tokens)
  /\b(bearer|basic)\s+[\w+/=.~-]{8,}/i,
  /\b(AKIA|ASIA)[0-9A-Z]{16}\b/, // an AWS access key id
  /\b(ghp|gho|ghs|ghu|github_pat|glpat)[_-][\w-]{16,}/, // GitHub and GitLab tokens
];

/** `scheme://user:password@host`: the credentials part of a URL. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@:]+(:[^\s/@]*)?@/gi;

/**
 * Whether the value at `path` (keys and list indexes from the object's root; a list element matched by
 * name counts as its name) of an object of `kind` must be masked: a Secret's data; a string whose field
 * names a credential (`clientSecret`, or `env[name=DB_PASSWORD].value`) unless it only points at one
 * (`secretName`); or a string that looks like a credential wherever it is.
 */
export function isSensitive(kind: string, path: readonly PropertyKey[], value: unknown): boolean {
  if (kind === "Secret" && SECRET_DATA_FIELDS.has(String(path[0]))) return true;
  // The last-applied annotation is a copy of the whole object, credentials included: never shown.
  if (path[0] === "metadata" && path[1] === "annotations" && path[2] === LAST_APPLIED_ANNOTATION) return true;
  if (typeof value !== "string" || value === "") return false;
  const keys = path.filter((segment): segment is string => typeof segment === "string");
  // A `value` belongs to the name beside it: env vars, key-value lists.
  const field = keys.at(-1) === "value" ? keys.at(-2) : keys.at(-1);
  if (field !== undefined && CREDENTIAL_KEY.test(field) && !CREDENTIAL_POINTER_KEY.test(field)) return true;
  return looksLikeCredential(value);
}

function looksLikeCredential(text: string): boolean {
  return CREDENTIAL_VALUES.some((pattern) => pattern.test(text)) || new RegExp(URL_CREDENTIALS).test(text);
}

/**
 * Free text (an error message, a repository URL) with the credentials in it masked: a URL keeps its host,
 * anything else that looks like a credential makes the whole text masked.
 */
export function maskText(text: string): string {
  const withoutUrlCredentials = text.replace(URL_CREDENTIALS, `$1${MASKED}@`);
  return CREDENTIAL_VALUES.some((pattern) => pattern.test(withoutUrlCredentials))
    ? MASKED
    : withoutUrlCredentials;
}
