// The placeholders a rollout gate's query or URL may hold (docs/rollout.md#verification-gates): Go-template
// spelling, as Flagger's metric templates and Argo Rollouts' analysis users write them, but a closed set
// read here and nowhere else. The policy's schema rejects any other `{{ … }}` at its file:line, and a
// placeholder of a PromQL query that is not inside a string literal (where its value is escaped; bare, a
// ClusterProfile property could rewrite the query). src/verify renders them.

/** What a placeholder stands for: a field of the cluster the gate is evaluated for. */
export type PlaceholderField =
  | { kind: "name" }
  | { kind: "namespace" }
  | { kind: "labels"; key: string }
  | { kind: "properties"; key: string };

interface Placeholder {
  /** The placeholder as written, `{{ .cluster.labels.env }}`. */
  text: string;
  field: PlaceholderField;
}

/** A template split into literal text and placeholders, in order. */
export type TemplatePart = string | Placeholder;

const PLACEHOLDER_HELP =
  "{{ .cluster.name }}, {{ .cluster.namespace }}, {{ .cluster.labels.<key> }} or {{ .cluster.properties.<name> }}";

// A label key or property name: letters, digits, '-', '_', '.', and '/' for a prefix.
const FIELD = /^\.cluster\.(?:(name|namespace)|(labels|properties)\.([A-Za-z0-9][-A-Za-z0-9_./]*))$/;

/** The template's parts, or the first problem with its placeholders. */
export function parseTemplate(text: string): { parts: TemplatePart[] } | { problem: string } {
  const parts: TemplatePart[] = [];
  let at = 0;
  for (;;) {
    const open = text.indexOf("{{", at);
    if (open === -1) break;
    const close = text.indexOf("}}", open + 2);
    if (close === -1) return { problem: `"{{" at character ${open + 1} is never closed with "}}"` };
    const placeholder = text.slice(open, close + 2);
    const match = FIELD.exec(text.slice(open + 2, close).trim());
    if (!match) return { problem: `unknown placeholder ${placeholder}; use ${PLACEHOLDER_HELP}` };
    if (open > at) parts.push(text.slice(at, open));
    const field: PlaceholderField = match[1]
      ? { kind: match[1] as "name" | "namespace" }
      : { kind: match[2] as "labels" | "properties", key: match[3]! };
    parts.push({ text: placeholder, field });
    at = close + 2;
  }
  if (at < text.length) parts.push(text.slice(at));
  return { parts };
}

/** Where a placeholder of a PromQL query stands: in a string literal (and which quote), or elsewhere. */
type PromqlSlot = { quote: '"' | "'"; regex: boolean } | { quote: undefined };

/**
 * The slot of each placeholder of a parsed PromQL query, in order. A string opened right after `=~` or
 * `!~` is a regular expression: its values are regex-quoted as well. Comments (`#` to the line's end) and
 * backtick strings (which have no escapes) are slots no value can be put in safely.
 */
export function promqlSlots(parts: readonly TemplatePart[]): PromqlSlot[] {
  const slots: PromqlSlot[] = [];
  let quote: '"' | "'" | "`" | "#" | undefined;
  let regex = false;
  let before = "";
  let escaping = false;
  for (const part of parts) {
    if (typeof part !== "string") {
      // After a backslash the value's first character would be taken as an escape: no safe slot.
      if (!escaping && (quote === '"' || quote === "'")) slots.push({ quote, regex });
      else slots.push({ quote: undefined });
      escaping = false;
      continue;
    }
    for (const ch of part) {
      if (escaping) escaping = false;
      else if (quote === undefined) {
        if (ch === '"' || ch === "'" || ch === "`") {
          quote = ch;
          regex = /[=!]~\s*$/.test(before);
        } else if (ch === "#") quote = "#";
        before = `${before}${ch}`.slice(-16);
      } else if (quote === "#") {
        if (ch === "\n") quote = undefined;
      } else if (ch === "\\" && quote !== "`") escaping = true;
      else if (ch === quote) {
        quote = undefined;
        before = "";
      }
    }
  }
  return slots;
}

/** Why a gate's PromQL query is no valid template; undefined when it is one. */
export function promqlTemplateProblem(query: string): string | undefined {
  const parsed = parseTemplate(query);
  if ("problem" in parsed) return parsed.problem;
  const placeholders = parsed.parts.filter((p) => typeof p !== "string");
  const slots = promqlSlots(parsed.parts);
  const bare = slots.findIndex((slot) => slot.quote === undefined);
  if (bare === -1) return undefined;
  return (
    `placeholder ${placeholders[bare]!.text} must be inside a "…" or '…' string, where its value is ` +
    `escaped (cluster="{{ .cluster.name }}"), and not right after a backslash`
  );
}

/** Why a gate's URL is no valid template (placeholders, then http or https with any value); or undefined. */
export function urlTemplateProblem(url: string): string | undefined {
  const parsed = parseTemplate(url);
  if ("problem" in parsed) return parsed.problem;
  const sample = parsed.parts.map((p) => (typeof p === "string" ? p : "x")).join("");
  return httpUrlProblem(sample);
}

/** Why `url` is no absolute http or https URL; undefined when it is one. */
export function httpUrlProblem(url: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "must be an absolute http or https URL";
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return "must be an http or https URL";
  if (parsed.username || parsed.password) return "must not hold credentials (user:password@)";
  return undefined;
}
