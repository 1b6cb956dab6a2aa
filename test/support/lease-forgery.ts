import {
  SHARD_EPOCH_ANNOTATION,
  SHARD_SEEN_ANNOTATION,
  SHARD_VIEW_ANNOTATION,
} from "../../src/api/labels.ts";
import type { MemberLease } from "../../src/service/shard-lease.ts";

// What one who may write Leases, but cannot read the shard key, can do to a member Lease: copy in what a
// member waiting to widen looks for, put an older version back, copy another member's record, freeze its
// renewTime, delete it, declare it left, or write garbage. Used by the sharding model test (on the
// in-memory hub) and by the soak's lease-forge fault (on the real hub).

export const FORGERIES = ["ack", "replay", "copy", "freeze", "delete", "left", "garbage"] as const;
export type Forgery = (typeof FORGERIES)[number];

/**
 * The Lease to write in place of `lease` (undefined: delete it, or leave it gone), given the group's other
 * member Leases and the versions this one had.
 */
export function forgedLease(
  how: Forgery,
  lease: MemberLease | undefined,
  seen: { others: readonly MemberLease[]; history: readonly MemberLease[]; random: () => number },
): MemberLease | undefined {
  const { others, history, random } = seen;
  const pick = <T>(items: readonly T[]): T | undefined => items[Math.floor(random() * items.length)];
  if (!lease) return how === "replay" ? pick(history) : undefined;
  const annotations = { ...lease.metadata.annotations };
  switch (how) {
    case "ack":
      annotations[SHARD_VIEW_ANNOTATION] = pick(others)?.metadata.annotations?.[SHARD_VIEW_ANNOTATION] ?? "";
      annotations[SHARD_SEEN_ANNOTATION] = others
        .map((l) => l.metadata.annotations?.[SHARD_EPOCH_ANNOTATION])
        .filter(Boolean)
        .join(",");
      break;
    case "replay":
      return pick(history) ?? lease;
    case "copy":
      Object.assign(annotations, pick(others)?.metadata.annotations);
      break;
    case "freeze":
      return { ...lease, spec: { ...lease.spec, renewTime: history[0]?.spec?.renewTime } };
    case "delete":
      return undefined;
    case "left":
      annotations[SHARD_VIEW_ANNOTATION] = "left";
      break;
    case "garbage":
      for (const key of Object.keys(annotations)) annotations[key] = random().toString(36).slice(2);
      break;
  }
  return { ...lease, metadata: { ...lease.metadata, annotations } };
}
