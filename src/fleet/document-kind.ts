import { KNATIVE_KINDS } from "../api/knative.ts";
import { PLACEMENT_API_VERSION, PLACEMENT_KINDS } from "./placement-schema.ts";
import { APPROVAL_KIND, ROLLOUT_KIND } from "./rollout-schema.ts";

// What a fleet document is meant to be, also when it does not say so correctly. This matters most for a
// rollout policy: a broken policy holds every change (docs/rollout.md), so a policy must not stop being
// one by a typo in its kind, its encoding or its syntax, or it would let every change out at once.

/** Every kind a fleet file may hold. */
const FLEET_KINDS: readonly string[] = [
  ...KNATIVE_KINDS,
  ...Object.keys(PLACEMENT_KINDS),
  ROLLOUT_KIND,
  APPROVAL_KIND,
];

const FLEET_GROUP = PLACEMENT_API_VERSION.split("/")[0]!;

/** How many edits (insertion, deletion, substitution, transposition; case ignored) still count as a typo. */
const MAX_TYPO_EDITS = 2;

/** The fleet kind `kind` misspells (`KnativeRolout`, `knativeserving`), or undefined. */
export function misspelledKind(kind: unknown): string | undefined {
  if (typeof kind !== "string" || FLEET_KINDS.includes(kind)) return undefined;
  return FLEET_KINDS.find((known) => isTypo(kind, known));
}

/** The fleet kind a document's `kind` names, spelled right or not; undefined when it names none. */
export function meantKind(kind: unknown): string | undefined {
  return typeof kind === "string" && FLEET_KINDS.includes(kind) ? kind : misspelledKind(kind);
}

/**
 * The spec fields only a placement has. A document in the fleet group whose kind says nothing is a rollout
 * policy only without them: a placement that lost its kind must hold only its own CRs, not the whole fleet.
 */
const PLACEMENT_ONLY_FIELDS = ["template", "clusterSelectorTerms", "overrides"];

/**
 * Whether a decoded document looks like a rollout policy: its kind is KnativeRollout or a typo of it; or,
 * naming no other fleet kind, it has `spec.waves`; or it is in the fleet.knative.dev group (a typo of it
 * counts) without a placement's fields (`PLACEMENT_ONLY_FIELDS`).
 */
export function looksLikeRollout(value: unknown): boolean {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const { apiVersion, kind, spec } = value as Record<string, unknown>;
  const meant = meantKind(kind);
  if (meant !== undefined) return meant === ROLLOUT_KIND;
  const specKeys = typeof spec === "object" && spec !== null ? Object.keys(spec) : [];
  if (specKeys.includes("waves")) return true;
  return isFleetApiVersion(apiVersion) && !specKeys.some((key) => PLACEMENT_ONLY_FIELDS.includes(key));
}

const KIND_LINE = /(?:^|[\s{,])["']?kind["']?\s*:\s*["']?([A-Za-z][A-Za-z0-9]*)/g;
const WAVES_KEY = /(?:^|[\s{,])["']?waves["']?\s*:/m;
const API_VERSION_LINE = /(?:^|[\s{,])["']?apiVersion["']?\s*:\s*["']?([^\s"',}]+)/g;
const PLACEMENT_KEY = new RegExp(`(?:^|[\\s{,])["']?(?:${PLACEMENT_ONLY_FIELDS.join("|")})["']?\\s*:`, "m");

/**
 * The same question for text that could not be read as YAML (the lenient decoding of a file in another
 * encoding, or a file with a syntax error): a `kind:` naming KnativeRollout or a typo of it, a `waves:`
 * key, or a fleet.knative.dev `apiVersion:` with no `kind:` at all and no placement's key. `false` when a
 * kind line names another fleet kind and none names the policy.
 */
export function textLooksLikeRollout(text: string): boolean {
  const kinds = [...text.matchAll(KIND_LINE)].map((match) => meantKind(match[1]));
  if (kinds.includes(ROLLOUT_KIND)) return true;
  if (kinds.some((kind) => kind !== undefined)) return false;
  if (WAVES_KEY.test(text)) return true;
  return (
    kinds.length === 0 &&
    !PLACEMENT_KEY.test(text) &&
    [...text.matchAll(API_VERSION_LINE)].some((m) => isFleetApiVersion(m[1]))
  );
}

/** A file named for a rollout policy: `rollout` in its name, any case. */
export function pathLooksLikeRollout(path: string): boolean {
  return /rollout/i.test(path.slice(path.lastIndexOf("/") + 1));
}

function isFleetApiVersion(apiVersion: unknown): boolean {
  if (typeof apiVersion !== "string") return false;
  const group = apiVersion.split("/")[0]!;
  return group === FLEET_GROUP || isTypo(group, FLEET_GROUP);
}

function isTypo(text: string, known: string): boolean {
  return editDistance(text.toLowerCase(), known.toLowerCase(), MAX_TYPO_EDITS) <= MAX_TYPO_EDITS;
}

/**
 * Optimal string alignment distance (Levenshtein plus transpositions), or `limit + 1` once it is sure to
 * exceed `limit`: the cost stays small whatever length of text a file puts in a kind.
 */
export function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let beforePrevious: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, beforePrevious[j - 2]! + 1);
      }
      current.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin > limit) return limit + 1;
    beforePrevious = previous;
    previous = current;
  }
  return Math.min(previous[b.length]!, limit + 1);
}
