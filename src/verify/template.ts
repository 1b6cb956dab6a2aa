import {
  type PlaceholderField,
  parseTemplate,
  promqlSlots,
  type TemplatePart,
} from "../fleet/gate-template.ts";
import { clusterKey } from "../fleet/identity.ts";
import type { InventoryCluster } from "../placement/inventory.ts";

// A gate's query or URL for one cluster. The placeholders (../fleet/gate-template.ts) were checked when the
// policy was read; their values were not: a ClusterProfile's properties are free text its writer chooses,
// so every value is escaped for where it lands and rendered in one pass (a value holding `{{ … }}` stays
// text). A label or property the cluster lacks is a problem, never an empty string that could widen a
// query's selection or make "no data" out of a typo.

type Rendered = { text: string } | { problem: string };

/** The value a placeholder stands for on `cluster`; undefined when the cluster has no such label/property. */
function fieldValue(field: PlaceholderField, cluster: InventoryCluster): string | undefined {
  switch (field.kind) {
    case "name":
      return cluster.name;
    case "namespace":
      return cluster.namespace;
    case "labels":
      return Object.hasOwn(cluster.labels, field.key) ? cluster.labels[field.key] : undefined;
    case "properties":
      return cluster.properties.get(field.key);
  }
}

function render(
  parts: readonly TemplatePart[],
  cluster: InventoryCluster,
  escapeValue: (value: string, index: number) => string,
): Rendered {
  let index = 0;
  let text = "";
  for (const part of parts) {
    if (typeof part === "string") {
      text += part;
      continue;
    }
    const value = fieldValue(part.field, cluster);
    if (value === undefined) {
      const what = part.field.kind === "labels" ? "label" : "property";
      return { problem: `cluster ${clusterKey(cluster)} has no ${what} for ${part.text}` };
    }
    text += escapeValue(value, index++);
  }
  return { text };
}

/** RE2's metacharacters, quoted with a backslash (Go's regexp.QuoteMeta). */
export const quoteRegex = (value: string): string => value.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");

/**
 * `value` as the inside of a PromQL string literal opened with `quote`: the backslash and the quote
 * escaped, control characters (a newline would end the literal) and U+2028/9 as \uHHHH.
 */
export function escapePromqlString(value: string, quote: '"' | "'"): string {
  return value.replace(/[\\"'\p{Cc}\u2028\u2029]/gu, (ch) => {
    if (ch === "\\") return "\\\\";
    if (ch === '"' || ch === "'") return ch === quote ? `\\${ch}` : ch;
    return `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
  });
}

/** A gate's PromQL query for `cluster`, each value escaped for the string literal (and regex) it is in. */
export function renderQuery(query: string, cluster: InventoryCluster): Rendered {
  const parsed = parseTemplate(query);
  if ("problem" in parsed) return parsed;
  const slots = promqlSlots(parsed.parts);
  const quoted = slots.flatMap((slot) => (slot.quote === undefined ? [] : [slot]));
  // The schema refuses a placeholder outside a string; a policy that skipped it still gets no bare value.
  if (quoted.length !== slots.length) return { problem: "a placeholder is not inside a string literal" };
  return render(parsed.parts, cluster, (value, index) => {
    const { quote, regex } = quoted[index]!;
    return escapePromqlString(regex ? quoteRegex(value) : value, quote);
  });
}

/** `value` percent-encoded as one URL component: no '/', '?', '#', '@', ':' or '%' comes through as is. */
export const percentEncode = (value: string): string =>
  encodeURIComponent(value).replace(/[!'()*]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase()}`);

/** A gate's URL for `cluster`, each value percent-encoded; the result must still be an http(s) URL. */
export function renderUrl(url: string, cluster: InventoryCluster): Rendered {
  const parsed = parseTemplate(url);
  if ("problem" in parsed) return parsed;
  let rendered: Rendered;
  try {
    rendered = render(parsed.parts, cluster, percentEncode);
  } catch {
    // encodeURIComponent throws on a lone surrogate.
    return { problem: `a value of cluster ${clusterKey(cluster)} cannot be put in a URL` };
  }
  if ("problem" in rendered) return rendered;
  try {
    const parsed = new URL(rendered.text);
    if (parsed.protocol === "http:" || parsed.protocol === "https:") return rendered;
  } catch {}
  return { problem: `${rendered.text} is no http or https URL` };
}
