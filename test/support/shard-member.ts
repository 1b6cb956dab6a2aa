import { afterEach } from "vitest";
import { SHARD_GROUP_LABEL } from "../../src/api/labels.ts";
import { type Logger, silentLogger } from "../../src/observability/log.ts";
import { processIdentity } from "../../src/service/leader-election.ts";
import { LEASE_API_VERSION, microTime } from "../../src/service/lease.ts";
import {
  type MemberLease,
  type MemberRecord,
  memberLeaseName,
  provenRecord,
  recordAnnotations,
} from "../../src/service/shard-lease.ts";
import { ShardMembership } from "../../src/service/sharding.ts";
import type { HubLink, leaseHub } from "./lease-hub.ts";

// One ShardMembership over the in-memory Lease hub (lease-hub.ts), with what the unit tests of its rounds
// look at: its narrowings and widenings, and the writes of its Lease the hub kept. Short timings unless told.

export type Hub = ReturnType<typeof leaseHub>;
export const GROUP = "knative-fleet";
export const NAMESPACE = "knative-fleet";
export const CLUSTERS = Array.from({ length: 24 }, (_, i) => `fleet-system/spoke-${i + 1}`);

export interface ShardMember {
  identity: string;
  leaseName: string;
  membership: ShardMembership;
  link: HubLink;
  /** performance.now() of each onNarrowed and onWidened call. */
  narrowed: number[];
  widened: number[];
  /** The clusters it owns now. */
  owned(): string[];
  /** The proven records of every write of its Lease the hub stored, oldest first. */
  records(): (MemberRecord | undefined)[];
}

export interface ShardMemberOptions {
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  log?: Logger;
  link?: HubLink;
  settle?: () => Promise<void>;
  vouch?: (identity: string) => Promise<boolean>;
  /** Not started when false (default true). */
  start?: boolean;
}

/** A member of `hub` for the pod `pod`; stop it with its membership (the caller keeps track). */
export function shardMember(hub: Hub, pod: string, options: ShardMemberOptions = {}): ShardMember {
  const identity = processIdentity(pod);
  const link = options.link ?? hub.link();
  const narrowed: number[] = [];
  const widened: number[] = [];
  const leaseName = memberLeaseName(GROUP, identity);
  const membership = new ShardMembership({
    client: link.client,
    key: hub.key,
    namespace: NAMESPACE,
    group: GROUP,
    identity,
    leaseDurationMs: options.leaseDurationMs ?? 600,
    renewDeadlineMs: options.renewDeadlineMs ?? 400,
    retryPeriodMs: options.retryPeriodMs ?? 100,
    log: options.log ?? silentLogger,
    onNarrowed: () => narrowed.push(performance.now()),
    settle: options.settle ?? (async () => {}),
    onWidened: () => widened.push(performance.now()),
    vouch: options.vouch ?? (async () => true),
  });
  if (options.start !== false) membership.start();
  return {
    identity,
    leaseName,
    membership,
    link,
    narrowed,
    widened,
    owned: () => CLUSTERS.filter((c) => membership.owns(c)),
    records: () => (hub.history.get(leaseName) ?? []).map((lease) => provenRecord(lease, hub.key)),
  };
}

/** The renewTime of the last record writeRecord wrote (ms): each is later, so the members see news. */
let lastRecordMs = 0;

/**
 * Writes a proven record for `identity` into its member Lease, as that member would (the test holds the
 * shard key): a member that takes part in no round of its own.
 */
export function writeRecord(
  hub: Hub,
  identity: string,
  record: Partial<MemberRecord> = {},
  { group = GROUP, leaseDurationSeconds = 1 }: { group?: string; leaseDurationSeconds?: number } = {},
): void {
  const name = memberLeaseName(group, identity);
  lastRecordMs = Math.max(Date.now(), lastRecordMs + 1);
  const full: MemberRecord = {
    holder: identity,
    renewTime: microTime(new Date(lastRecordMs)),
    view: "",
    epoch: "e1",
    seen: [],
    ...record,
  };
  hub.tamper(
    name,
    (): MemberLease => ({
      apiVersion: LEASE_API_VERSION,
      kind: "Lease",
      metadata: {
        name,
        namespace: NAMESPACE,
        labels: { [SHARD_GROUP_LABEL]: group },
        annotations: recordAnnotations(hub.key, name, full),
      },
      spec: { holderIdentity: identity, leaseDurationSeconds, renewTime: full.renewTime },
    }),
  );
}

/** Waits until `done` holds, checking every few ms; fails after `timeoutMs`. */
export async function until(what: string, done: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A test file's way to start members: each is stopped after the test that started it. */
export function membersStoppedAfterEach(): (...args: Parameters<typeof shardMember>) => ShardMember {
  const started: ShardMembership[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((m) => m.stop()));
  });
  return (...args) => {
    const m = shardMember(...args);
    started.push(m.membership);
    return m;
  };
}
