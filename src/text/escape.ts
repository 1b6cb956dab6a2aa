// C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi overrides that reorder text.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const SHORT_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** `a\nb` -> `a\\nb`: text that may come from a file name, made safe for a one-line report. */
export function escapeControlCharacters(text: string): string {
  return text.replace(
    CONTROL_CHARACTER,
    (char) => SHORT_ESCAPES[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
