import { createHash } from "node:crypto";
import { DESIRED_HASH_ANNOTATION } from "../api/labels.ts";
import type { KubeObject } from "../kube/object.ts";

/**
 * Decides whether a live object already holds everything we would apply, so a steady-state reconcile
 * sends no write at all. Two checks, both needed:
 * - the desired-hash annotation: when our desired object changed (a field removed from the spec, say),
 *   server-side apply must run so it drops the fields we no longer own, even though live still "contains"
 *   the old desired;
 * - `containsDesired`: when someone edited or deleted a field by hand (drift), live no longer contains
 *   desired and apply restores it.
 */

/** sha256 of the object's canonical JSON (keys sorted), without the hash annotation itself. */
export function desiredHash(object: KubeObject): string {
  const { [DESIRED_HASH_ANNOTATION]: _ignored, ...annotations } = object.metadata.annotations ?? {};
  const withoutHash = { ...object, metadata: { ...object.metadata, annotations } };
  const hash = createHash("sha256");
  writeCanonicalJson(withoutHash, (chunk) => hash.update(chunk));
  return hash.digest("hex").slice(0, 32);
}

export function withDesiredHash(object: KubeObject): KubeObject {
  const hash = desiredHash(object);
  return {
    ...object,
    metadata: {
      ...object.metadata,
      annotations: { ...(object.metadata.annotations ?? {}), [DESIRED_HASH_ANNOTATION]: hash },
    },
  };
}

/** JSON with every object's keys sorted and undefined members left out. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  const chunks: string[] = [];
  writeCanonicalJson(value, (chunk) => chunks.push(chunk));
  return chunks.join("");
}

const CHUNK_LENGTH = 16 * 1024;

/**
 * The canonical JSON of value, handed to `write` in flat chunks of about 16 KiB. Built by nesting strings,
 * as it was, it made a string per level of the object, each as long as what is below it: for a CRD's deep
 * schema many times its size, in strings large enough to bypass V8's young generation and stay until a full
 * GC (a pass over the Serving release grew the heap by ~25 MiB). Now the small pieces die young and only the
 * chunks, once the JSON's size, outlive them.
 */
function writeCanonicalJson(value: unknown, write: (chunk: string) => void): void {
  let pieces: string[] = [];
  let length = 0;
  const add = (piece: string) => {
    pieces.push(piece);
    length += piece.length;
    if (length >= CHUNK_LENGTH) {
      write(pieces.join(""));
      pieces = [];
      length = 0;
    }
  };
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      add("[");
      node.forEach((element, i) => {
        if (i > 0) add(",");
        if (element !== undefined) walk(element);
      });
      add("]");
    } else if (node !== null && typeof node === "object") {
      const entries = Object.entries(node as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      add("{");
      entries.forEach(([k, v], i) => {
        add(i > 0 ? `,${JSON.stringify(k)}:` : `${JSON.stringify(k)}:`);
        walk(v);
      });
      add("}");
    } else {
      add(JSON.stringify(node));
    }
  };
  walk(value);
  if (length > 0) write(pieces.join(""));
}

/** True when the live object is up to date with the desired one (see the module comment). */
export function isUpToDate(desired: KubeObject, live: KubeObject | undefined): boolean {
  if (!live) return false;
  const wantHash = desired.metadata.annotations?.[DESIRED_HASH_ANNOTATION] ?? desiredHash(desired);
  if (live.metadata.annotations?.[DESIRED_HASH_ANNOTATION] !== wantHash) return false;
  return containsDesired(desired, live);
}

/**
 * True when every field set in `desired` has the same value in `live`. Fields the server or other
 * controllers add are ignored; list elements are matched in order, tolerating extra live elements (other
 * field managers may add entries to associative lists); quantities compare by value ("1000m" == "1"); a
 * zero value ("", 0, false) matches an absent field, as Go's omitempty serializes it.
 */
export function containsDesired(desired: unknown, live: unknown): boolean {
  if (desired === null || desired === undefined) return true;
  if (Array.isArray(desired)) {
    if (desired.length === 0) return live === undefined || live === null || Array.isArray(live);
    if (!Array.isArray(live)) return false;
    let j = 0;
    for (const element of desired) {
      while (j < live.length && !containsDesired(element, live[j])) j++;
      if (j === live.length) return false;
      j++;
    }
    return true;
  }
  if (typeof desired === "object") {
    const entries = Object.entries(desired as Record<string, unknown>);
    if (live === undefined || live === null) return entries.every(([, v]) => isEmpty(v));
    if (typeof live !== "object" || Array.isArray(live)) return false;
    const liveObject = live as Record<string, unknown>;
    return entries.every(([k, v]) => containsDesired(v, liveObject[k]));
  }
  // Go's omitempty: the API server drops "", 0 and false on output, so a desired zero value matches absence.
  if (live === undefined && (desired === "" || desired === 0 || desired === false)) return true;
  return scalarEqual(desired, live);
}

function isEmpty(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === "object") return Object.values(value as object).every(isEmpty);
  return false;
}

function scalarEqual(desired: unknown, live: unknown): boolean {
  if (desired === live) return true;
  if (
    (typeof desired === "string" || typeof desired === "number") &&
    (typeof live === "string" || typeof live === "number")
  ) {
    const a = parseQuantity(String(desired));
    const b = parseQuantity(String(live));
    return a !== undefined && b !== undefined && a === b;
  }
  return false;
}

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes resource quantity's value, or undefined when the text is not a quantity. */
export function parseQuantity(text: string): number | undefined {
  const match = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(
    text.trim(),
  );
  if (!match) return undefined;
  const base = Number(match[1]);
  if (match[2]) return base * 10 ** Number(match[2].slice(1));
  return base * (SUFFIXES[match[3] ?? ""] ?? 1);
}
