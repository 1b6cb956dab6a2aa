// The few bytes of Git's smart-HTTP protocol (v1, what isomorphic-git's fetch speaks) that the source
// rewrites: the upload-pack request gains a blob-size filter when the server offers one, so blobs larger
// than any fleet file never reach the process (isomorphic-git holds a fetched pack whole in memory).
// See gitprotocol-pack(5): "filter" capability and `filter <spec>` request line.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface PktLine {
  /** The payload, or undefined for a flush/delimiter packet. */
  text: string | undefined;
  /** Bytes of the whole packet, header included. */
  raw: Uint8Array;
}

/** The pkt-lines in `bytes` that are complete, and how many bytes they span. */
function readPktLines(bytes: Uint8Array): { lines: PktLine[]; consumed: number } {
  const lines: PktLine[] = [];
  let at = 0;
  while (at + 4 <= bytes.length) {
    const length = Number.parseInt(decoder.decode(bytes.subarray(at, at + 4)), 16);
    if (Number.isNaN(length)) break;
    if (length < 4) {
      lines.push({ text: undefined, raw: bytes.subarray(at, at + 4) });
      at += 4;
      continue;
    }
    if (at + length > bytes.length) break;
    lines.push({
      text: decoder.decode(bytes.subarray(at + 4, at + length)),
      raw: bytes.subarray(at, at + length),
    });
    at += length;
  }
  return { lines, consumed: at };
}

function pktLine(text: string): Uint8Array {
  const payload = encoder.encode(text);
  return concat([encoder.encode((payload.length + 4).toString(16).padStart(4, "0")), payload]);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * The capabilities of a v1 upload-pack advertisement (`GET info/refs?service=git-upload-pack`), from the
 * first ref line (`<oid> <ref>\0<capabilities>`); undefined while that line has not fully arrived, or for
 * an advertisement that is no v1 ref list (a v2 server's `version 2` answer lists no refs).
 */
export function advertisedCapabilities(advertisement: Uint8Array): Set<string> | undefined {
  for (const { text } of readPktLines(advertisement).lines) {
    if (text === undefined || text.startsWith("# service=")) continue;
    const nul = text.indexOf("\0");
    if (nul < 0) return new Set();
    return new Set(
      text
        .slice(nul + 1)
        .trim()
        .split(" ")
        .filter(Boolean),
    );
  }
  return undefined;
}

/**
 * The upload-pack request with `filter blob:limit=<limitBytes>` added: the first want line announces the
 * capability and the filter line closes the request section, as git itself writes it. A body that is not
 * a v1 fetch request (no want line, or already filtered) is returned unchanged.
 */
export function withBlobLimit(request: Uint8Array, limitBytes: number): Uint8Array {
  const { lines, consumed } = readPktLines(request);
  const firstWant = lines.findIndex((line) => line.text?.startsWith("want "));
  const flush = lines.findIndex((line) => line.text === undefined);
  if (firstWant < 0 || flush < firstWant || lines.some((line) => line.text?.startsWith("filter ")))
    return request;
  const parts = lines.map((line, index) => {
    if (index !== firstWant) return line.raw;
    const text = line.text!.replace(/\n$/, "");
    // `want <oid>` alone has no capability list yet: capabilities follow the oid after a space.
    return pktLine(`${text} filter\n`);
  });
  parts.splice(flush, 0, pktLine(`filter blob:limit=${limitBytes}\n`));
  return concat([...parts, request.subarray(consumed)]);
}
