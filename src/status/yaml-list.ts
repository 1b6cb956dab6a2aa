import { stringify } from "yaml";

// fleet.yaml lists every hub CR; at 1,000 clusters its YAML took most of a status render (hundreds of ms
// to seconds of the leader's event loop at each write-back), and between two write-backs few rows change.
// So each item is rendered on its own and kept until a render no longer lists it.

/** Each item's YAML by its JSON, as the last render listed them. */
let rendered = new Map<string, string>();

/**
 * `key:` (a plain word) and `items` as `stringify({ [key]: items }, { lineWidth: 0 })` writes them (a block
 * sequence indented under its key), each item's text taken from the last call when that item is unchanged. Items
 * are plain data (strings, nested records and lists: what JSON tells apart, YAML does too).
 */
export function yamlList(key: string, items: readonly object[]): string {
  if (items.length === 0) return `${key}: []\n`;
  const next = new Map<string, string>();
  const parts = [`${key}:\n`];
  for (const item of items) {
    const json = JSON.stringify(item);
    let text = next.get(json) ?? rendered.get(json);
    text ??= indented(stringify([item], { lineWidth: 0 }));
    next.set(json, text);
    parts.push(text);
  }
  rendered = next;
  return parts.join("");
}

/**
 * Each line of `text` indented by two spaces, an empty one left empty. Lines end at `\n` only: YAML writes
 * U+2028 and U+2029 inside a string as they are, where a multiline regex's `^` would also match.
 */
function indented(text: string): string {
  return text
    .split("\n")
    .map((line) => (line === "" ? line : `  ${line}`))
    .join("\n");
}
