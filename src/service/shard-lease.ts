import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import {
  SHARD_EPOCH_ANNOTATION,
  SHARD_PROOF_ANNOTATION,
  SHARD_SEEN_ANNOTATION,
  SHARD_VIEW_ANNOTATION,
} from "../api/labels.ts";
import type { Lease } from "./lease.ts";

// What a shard member's Lease says and whether it counts, pure: its name, its holder's identity, the record
// it carries proven with the shard key, how one replica judges it live or gone on its own clock, and
// whether it acknowledges a view for another member. The membership protocol over these is sharding.ts's.

/** A member Lease: labelled with its group, its acknowledgement in annotations, proven with the shard key. */
export type MemberLease = Lease;

/** The view annotation of a member that stopped: the others drop it at once (when they knew it live). */
export const LEFT = "left";

/** The member Lease of `identity` in `group`: the one name a replica with that identity writes. */
export const memberLeaseName = (group: string, identity: string): string =>
  `${group}-member-${createHash("sha256").update(identity).digest("hex").slice(0, 10)}`;

/**
 * processIdentity's format (leader-election.ts): `<pod name>_<pod UID>` in a Pod (the chart sets POD_UID), a
 * random UUID in its place elsewhere. An object UID is a UUID of any version (the API server's are v1).
 */
const IDENTITY =
  /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The pod name in an identity (`<pod name>_<uid>`). */
export const podOf = (identity: string): string => identity.slice(0, identity.indexOf("_"));
/** The Pod UID in an identity: what binds a member to one Pod, not just to a name a Lease writer can copy. */
export const uidOf = (identity: string): string => identity.slice(identity.indexOf("_") + 1);

/** What a member says in its Lease, beyond being there: its acknowledged view, its epoch, the epochs it saw. */
export interface MemberRecord {
  holder: string;
  renewTime: string;
  /** The digest of the view acknowledged ("" none yet, LEFT once stopped). */
  view: string;
  /** A random name this member gave its current view; an acknowledgement counts only if it names it. */
  epoch: string;
  /** The epochs of the others this member had seen when it wrote this record. */
  seen: readonly string[];
}

/** The HMAC under the shard key of everything a record says, bound to the Lease's name. */
export function proveRecord(key: Uint8Array, leaseName: string, record: MemberRecord): string {
  const { holder, renewTime, view, epoch, seen } = record;
  return createHmac("sha256", key)
    .update(
      JSON.stringify(["knative-fleet/shard-member/v1", leaseName, holder, renewTime, view, epoch, seen]),
    )
    .digest("hex");
}

/**
 * The record a member Lease carries, when its proof verifies under the shard key: written by a replica
 * (or copied whole from one of its Leases: freshness is the reader's to judge). Undefined otherwise.
 */
export function provenRecord(lease: MemberLease | undefined, key: Uint8Array): MemberRecord | undefined {
  const annotations = lease?.metadata.annotations;
  const proof = annotations?.[SHARD_PROOF_ANNOTATION];
  const renewTime = lease?.spec?.renewTime;
  if (!lease || proof === undefined || renewTime === undefined) return undefined;
  const seenText = annotations?.[SHARD_SEEN_ANNOTATION] ?? "";
  const record: MemberRecord = {
    holder: lease.spec?.holderIdentity ?? "",
    renewTime,
    view: annotations?.[SHARD_VIEW_ANNOTATION] ?? "",
    epoch: annotations?.[SHARD_EPOCH_ANNOTATION] ?? "",
    seen: seenText === "" ? [] : seenText.split(","),
  };
  const expected = Buffer.from(proveRecord(key, lease.metadata.name, record), "hex");
  const given = Buffer.from(proof, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected) ? record : undefined;
}

/** A record's annotations (with its proof), as a member writes them. */
export function recordAnnotations(
  key: Uint8Array,
  leaseName: string,
  record: MemberRecord,
): Record<string, string> {
  return {
    [SHARD_VIEW_ANNOTATION]: record.view,
    [SHARD_EPOCH_ANNOTATION]: record.epoch,
    [SHARD_SEEN_ANNOTATION]: record.seen.join(","),
    [SHARD_PROOF_ANNOTATION]: proveRecord(key, leaseName, record),
  };
}

/** What one replica has seen of one member Lease, on its own clock (performance.now()). */
export interface Sighting {
  /** The identity the Lease's name belongs to (from the first well-formed record seen). */
  holder: string;
  /** The Lease's resourceVersion as last seen; undefined when it was gone. */
  resourceVersion: string | undefined;
  /** When the Lease was last seen to change while its member was live. */
  changedAtMs: number;
  /** The newest renewTime of a proven record seen (ms): an older proven record is a copy, not news. */
  newestProvenMs?: number;
  /** Counted gone (expired, or a fresh proven "left"): only a newer proven record brings it back. */
  gone: boolean;
}

/** What one round concludes about a member Lease. */
type LeaseVerdict =
  | { state: "live"; holder: string }
  | { state: "expired"; holder: string }
  | { state: "ignored"; why: string };

/**
 * Whether a member Lease counts, judged on this replica's clock and settings, never on what the Lease
 * claims. Its holder must be an identity a replica writes and the Lease the name that identity gives. It is
 * live while the Lease changes (any write: its member's renewals, or anyone else's) within the configured
 * lease duration: one who may write Leases can keep a member live, never make a live one look gone (a
 * member is counted gone only when its Lease stood still, or vanished, for a whole duration; the member
 * itself stopped by then, since its own renewals failed). Once gone, only a proven record newer than any
 * seen brings it back; a proven "left" record newer than any seen makes it gone at once.
 */
export function judgeLease(
  name: string,
  lease: MemberLease | undefined,
  previous: Sighting | undefined,
  nowMs: number,
  expected: { group: string; leaseDurationMs: number; key: Uint8Array },
): { verdict: LeaseVerdict; sighting: Sighting | undefined } {
  if (previous === undefined) {
    const holder = lease?.spec?.holderIdentity ?? "";
    if (!lease) return { verdict: { state: "ignored", why: "it is gone" }, sighting: undefined };
    if (!IDENTITY.test(holder))
      return {
        verdict: { state: "ignored", why: "its holder is not an identity a replica writes" },
        sighting: undefined,
      };
    if (name !== memberLeaseName(expected.group, holder))
      return {
        verdict: { state: "ignored", why: "its name is not the one its holder's identity gives" },
        sighting: undefined,
      };
    const proven = provenRecord(lease, expected.key);
    const sighting: Sighting = {
      holder,
      resourceVersion: lease.metadata.resourceVersion,
      changedAtMs: nowMs,
      ...(proven && { newestProvenMs: Date.parse(proven.renewTime) }),
      gone: false,
    };
    return { verdict: { state: "live", holder }, sighting };
  }
  const { holder } = previous;
  const proven = provenRecord(lease, expected.key);
  const provenMs = proven?.holder === holder ? Date.parse(proven.renewTime) : Number.NaN;
  const news = provenMs > (previous.newestProvenMs ?? Number.NEGATIVE_INFINITY);
  const resourceVersion = lease?.metadata.resourceVersion;
  let { changedAtMs, gone } = previous;
  if (news && proven!.view === LEFT) gone = previous.newestProvenMs !== undefined || gone;
  else if (news) {
    gone = false;
    changedAtMs = nowMs;
  } else if (!gone && resourceVersion !== previous.resourceVersion) changedAtMs = nowMs;
  if (!gone && nowMs >= changedAtMs + expected.leaseDurationMs) gone = true;
  const sighting: Sighting = {
    holder,
    resourceVersion,
    changedAtMs,
    ...((news || previous.newestProvenMs !== undefined) && {
      newestProvenMs: news ? provenMs : previous.newestProvenMs,
    }),
    gone,
  };
  return { verdict: { state: gone ? "expired" : "live", holder }, sighting };
}

/**
 * Whether `lease` acknowledges `digest` for this member: a proven record of its own holder that names the
 * view and this member's epoch (written after its writer saw this member's current view, so no copy of an
 * older acknowledgement of the same view counts).
 */
export function acknowledges(
  lease: MemberLease | undefined,
  holder: string,
  digest: string,
  epoch: string,
  key: Uint8Array,
): boolean {
  const record = provenRecord(lease, key);
  return record?.holder === holder && record.view === digest && record.seen.includes(epoch);
}
