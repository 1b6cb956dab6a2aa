import type { SourcePosition } from "./diagnostic.ts";

/** Why a fleet path could not be read as a YAML file: it becomes that file's one diagnostic. */
interface FileProblem extends SourcePosition {
  message: string;
  /**
   * The start of the bytes decoded leniently (any encoding read as ASCII, CR as a line end), only to tell
   * what the file was meant to be (a broken rollout policy holds every change); never parsed as desired
   * state. Absent when there are no bytes (a symlink, a folder, a blob not fetched).
   */
  lenientText?: string;
}

/**
 * A fleet file's repository-relative path (`/`-separated) and its text, from a checkout or a Git tree; or,
 * for a path the selection matches but that cannot be read as one (a symlink, a submodule, a folder named
 * like a file, bytes that are no UTF-8 text), the problem. A file with a problem is a failed file: what it
 * declared keeps its last good state and nothing is pruned.
 */
export interface FleetFile {
  path: string;
  /** Empty when there is a problem. */
  text: string;
  problem?: FileProblem;
}

/** Larger than any hand-written Knative CR file by far; the parser's memory grows with the text. */
export const MAX_FLEET_FILE_BYTES = 1024 * 1024;

const UTF8_BOM = [0xef, 0xbb, 0xbf];
const NON_UTF8_BOMS: readonly { bytes: number[]; name: string }[] = [
  { bytes: [0x00, 0x00, 0xfe, 0xff], name: "UTF-32" },
  { bytes: [0xff, 0xfe, 0x00, 0x00], name: "UTF-32" },
  { bytes: [0xfe, 0xff], name: "UTF-16" },
  { bytes: [0xff, 0xfe], name: "UTF-16" },
];

/** A problem at the top of the file. */
export function fileProblem(path: string, message: string): FleetFile {
  return { path, text: "", problem: { line: 1, column: 1, message } };
}

/**
 * Decodes a fleet file's bytes as the API server's YAML decoder would accept them: UTF-8 (a BOM is
 * dropped), LF or CRLF line endings. Anything else is a problem at the first line it shows on, never a
 * silently different document (a file with CR-only line endings reads as one comment line: an empty file).
 */
export function decodeFleetFile(path: string, bytes: Uint8Array): FleetFile {
  const withText = (file: FleetFile): FleetFile =>
    file.problem ? { ...file, problem: { ...file.problem, lenientText: lenientText(bytes) } } : file;
  if (bytes.length > MAX_FLEET_FILE_BYTES) {
    return withText(
      fileProblem(path, `the file is over the limit of ${MAX_FLEET_FILE_BYTES} bytes for a fleet file`),
    );
  }
  const encoding = NON_UTF8_BOMS.find(({ bytes: bom }) => startsWith(bytes, bom));
  if (encoding) {
    return withText(fileProblem(path, `the file is ${encoding.name} (byte order mark); save it as UTF-8`));
  }
  const body = startsWith(bytes, UTF8_BOM) ? bytes.subarray(UTF8_BOM.length) : bytes;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    const lossy = new TextDecoder("utf-8", { ignoreBOM: true }).decode(body);
    return withText(
      problemAt(path, lossy, lossy.indexOf("\uFFFD"), "the file is not UTF-8 text; save it as UTF-8"),
    );
  }
  const loneCr = text.search(/\r(?!\n)/);
  if (loneCr >= 0) {
    return withText(
      problemAt(
        path,
        text,
        loneCr,
        "a line ends with a carriage return alone (CR, old Mac style), which YAML does not read as a line end; use LF or CRLF line endings",
      ),
    );
  }
  const nul = text.indexOf("\0");
  if (nul >= 0) {
    return withText(problemAt(path, text, nul, "the file holds a NUL byte: it is binary, not YAML"));
  }
  return { path, text };
}

/** How much of an undecodable file is read leniently: more than any rollout policy takes. */
const LENIENT_PREFIX_BYTES = 64 * 1024;

/**
 * Bytes read as well as they go: NUL bytes dropped when they are a quarter or more of them (UTF-16 and
 * UTF-32 text is mostly ASCII), invalid UTF-8 as U+FFFD, CR and CRLF as line ends.
 */
function lenientText(bytes: Uint8Array): string {
  const head = bytes.subarray(0, LENIENT_PREFIX_BYTES);
  const nuls = head.reduce((count, byte) => count + (byte === 0 ? 1 : 0), 0);
  const body = nuls * 4 >= head.length ? head.filter((byte) => byte !== 0) : head;
  return new TextDecoder("utf-8").decode(body).replace(/\r\n?/g, "\n");
}

/** More documents than any fleet file needs; the parser's time grows with them. */
const MAX_DOCUMENTS = 1000;
/** As deep as the YAML reader accepts (yaml-source.ts): deeper flow collections cost the parser seconds. */
const MAX_FLOW_DEPTH = 64;

/**
 * What would cost the YAML parser seconds, found by one cheap pass over the text: a flood of documents,
 * or `[[[[…` nested past any real CR. Quoted text and comments are skipped.
 */
export function shapeProblem(path: string, text: string): FleetFile | undefined {
  let documents = 0;
  let depth = 0;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    const lineStart = i === 0 || text[i - 1] === "\n";
    if (quote !== undefined) {
      if (char === "\\" && quote === '"') i++;
      else if (char === quote) quote = undefined;
      continue;
    }
    if (lineStart && text.startsWith("---", i) && ++documents > MAX_DOCUMENTS) {
      return problemAt(path, text, i, `the file holds more than ${MAX_DOCUMENTS} YAML documents`);
    }
    if (char === "#" && (lineStart || /\s/.test(text[i - 1]!))) {
      const end = text.indexOf("\n", i);
      i = end < 0 ? text.length : end - 1;
    } else if ((char === '"' || char === "'") && depth > 0) quote = char;
    else if (char === "[" || char === "{") {
      if (++depth > MAX_FLOW_DEPTH) {
        return problemAt(path, text, i, `nested deeper than ${MAX_FLOW_DEPTH} levels`);
      }
    } else if ((char === "]" || char === "}") && depth > 0) depth--;
  }
  return undefined;
}

function problemAt(path: string, text: string, offset: number, message: string): FleetFile {
  const before = text.slice(0, Math.max(offset, 0));
  const lineStart = before.lastIndexOf("\n") + 1;
  const line = before.split("\n").length;
  return { path, text: "", problem: { line, column: before.length - lineStart + 1, message } };
}

function startsWith(bytes: Uint8Array, prefix: readonly number[]): boolean {
  return prefix.every((byte, index) => bytes[index] === byte);
}

/** What a file holds, for telling whether it changed: its text, or its problem (and what it seems to say). */
export function fleetFileContent(file: FleetFile): string {
  return file.problem ? `problem: ${file.problem.message}\n${file.problem.lenientText ?? ""}` : file.text;
}
