import { createHash } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { SHARD_GROUP_LABEL, SHARD_VIEW_ANNOTATION } from "../api/labels.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import { isConflict, isNotFound } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";
import { getLease, LEASE_API_VERSION, type Lease, leasePath, listLeases, microTime } from "./lease.ts";
import { settleWithin } from "./settle-within.ts";

// ── The assignment: pure ────────────────────────────────────────────────────────────────────────────────

/**
 * The member that owns a cluster: rendezvous (highest random weight) hashing. Every member scores every
 * cluster and the highest score wins, so all members agree from the member list alone, and a member
 * joining or leaving moves only the clusters it gains or had (about 1/N of them).
 */
export function shardOwner(members: readonly string[], cluster: string): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const member of members) {
    const score = createHash("sha256").update(`${member}\n${cluster}`).digest().readUIntBE(0, 6);
    if (score > bestScore || (score === bestScore && best !== undefined && member < best)) {
      best = member;
      bestScore = score;
    }
  }
  return best;
}

/** A short name for a member list (order-free): what a member acknowledges in its Lease. */
export function viewDigest(members: readonly string[]): string {
  return createHash("sha256")
    .update([...members].sort().join("\n"))
    .digest("hex")
    .slice(0, 16);
}

/**
 * Which clusters a member may reconcile: those it owns under every view in `views`. A member narrows this
 * at once when the membership changes (it appends the new view) and widens it only once every live member
 * acknowledged the newest view (the list is then reset to that view alone), so a cluster changes hands
 * only after its previous owner gave it up. An empty view owns nothing.
 */
export function ownsUnder(views: readonly (readonly string[])[], member: string, cluster: string): boolean {
  return views.every((view) => shardOwner(view, cluster) === member);
}

// ── The membership: Leases on the hub ───────────────────────────────────────────────────────────────────

const acknowledgedIn = (lease: MemberLease | undefined): string | undefined =>
  lease?.metadata.annotations?.[SHARD_VIEW_ANNOTATION];

/** A member's Lease: labelled with its group, the view it acknowledged in an annotation (lease.ts). */
export type MemberLease = Lease;

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
const uidOf = (identity: string): string => identity.slice(identity.indexOf("_") + 1);

/** When a member Lease's renewTime was last seen to change (performance.now()). */
interface Renewal {
  renewTime: string | undefined;
  atMs: number;
}

/** What one round concludes about a member Lease. */
type LeaseVerdict =
  | { state: "live"; holder: string }
  | { state: "expired"; holder: string }
  | { state: "ignored"; why: string };

/**
 * Whether a member Lease counts, judged on this replica's clock and settings, never on what the Lease
 * claims: its holder must be an identity a replica writes and the Lease the name that identity gives; it
 * is live only while its renewTime changed within the configured lease duration (a longer duration the
 * Lease declares buys it nothing, and a holder that never renews expires one duration after it was first
 * seen). Anyone who can write Leases can still add a member, but only by renewing it every few seconds,
 * and only one a replica vouches for (see ShardMembership) is counted.
 */
export function judgeLease(
  lease: MemberLease,
  previous: Renewal | undefined,
  nowMs: number,
  expected: { group: string; leaseDurationMs: number },
): { verdict: LeaseVerdict; renewal: Renewal } {
  const renewTime = lease.spec?.renewTime;
  const renewal: Renewal =
    previous !== undefined && previous.renewTime === renewTime ? previous : { renewTime, atMs: nowMs };
  const holder = lease.spec?.holderIdentity ?? "";
  if (!IDENTITY.test(holder))
    return { renewal, verdict: { state: "ignored", why: "its holder is not an identity a replica writes" } };
  if (lease.metadata.name !== memberLeaseName(expected.group, holder))
    return {
      renewal,
      verdict: { state: "ignored", why: "its name is not the one its holder's identity gives" },
    };
  const live = renewTime !== undefined && nowMs < renewal.atMs + expected.leaseDurationMs;
  return { renewal, verdict: { state: live ? "live" : "expired", holder } };
}

interface ShardMembershipOptions {
  client: KubeClient;
  namespace: string;
  /** The group's name: member Leases are `<group>-member-<hash of identity>`. */
  group: string;
  /** Unique per process (processIdentity). */
  identity: string;
  /** A member whose Lease was not renewed for this long (as this replica saw it) is gone (default 15 s). */
  leaseDurationMs?: number;
  /** A member that could not renew for this long stops reconciling anything (default 10 s). */
  renewDeadlineMs?: number;
  /** Renew and look at the others this often (default 2 s). */
  retryPeriodMs?: number;
  log: Logger;
  /**
   * The share narrowed, called in the same turn (`owns` already says no): stop touching the clusters no
   * longer owned at once (their spoke clients, watches, series), even while the hub cannot be reached.
   */
  onNarrowed(): void;
  /**
   * After onNarrowed: resolves once no reconcile of a cluster this member no longer owns is running.
   * Only then does the member acknowledge the new membership, so no other member takes the cluster while
   * it is still being worked on here.
   */
  settle(): Promise<void>;
  /** The share widened: `owned` said what was owned before; queue what is owned now and was not then. */
  onWidened(owned: (cluster: string) => boolean): void;
  /**
   * Whether another member is a replica of this deployment (e.g. podVoucher: its Pod runs as this
   * replica's ServiceAccount). Asked once per new identity; a member no replica can vouch for is logged and
   * ignored. A member once vouched for stays so until its Lease expires: withdrawing a live member from
   * one replica's view alone could give a cluster two owners.
   */
  vouch(identity: string): Promise<boolean>;
}

/**
 * Sharding of the reconcile over N replicas (the way Argo CD shards its application controller, but with
 * dynamic membership). Each replica holds a member Lease, renewed every retry period; the live members
 * are those whose Lease judgeLease counts (renewed within the configured duration, named for its holder)
 * and that a replica vouches for; each cluster belongs to one of them by rendezvous hashing. A hand-off is two-phase: on a membership change every member first drops what it no longer
 * owns and waits for those reconciles to finish, then writes the new view's digest into its Lease; a
 * member takes new clusters only when every live member's Lease carries that digest. Expiry is judged on
 * the local clock from when a Lease's renewTime was last seen to change, and a member that cannot renew within the
 * renew deadline (shorter than the lease duration) drops everything, so a replica cut off from the hub
 * has stopped before the others count it gone.
 */
export class ShardMembership {
  private readonly options: Required<
    Omit<ShardMembershipOptions, "onNarrowed" | "settle" | "onWidened" | "vouch">
  > &
    ShardMembershipOptions;
  private readonly leaseName: string;
  private readonly stopping = new AbortController();
  private running?: Promise<void>;
  /** The views this member's share is narrowed by (see ownsUnder); [[]] owns nothing. */
  private views: string[][] = [[]];
  private acknowledged = "";
  private lease?: MemberLease;
  private lastRenewSentMs = Number.NEGATIVE_INFINITY;
  /** Fires at the renew deadline: drops every cluster even while a round hangs on the hub. */
  private lapseTimer?: NodeJS.Timeout;
  private readonly renewals = new Map<string, Renewal>();
  /** Identities vouched for (for good), and when a refusal may be asked again (performance.now()). */
  private readonly vouched = new Set<string>();
  private readonly refusedUntil = new Map<string, number>();
  /** What was logged about a Lease (its name first): each thing is said once. */
  private readonly logged = new Set<string>();

  constructor(options: ShardMembershipOptions) {
    this.options = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...options };
    if (this.options.leaseDurationMs <= this.options.renewDeadlineMs)
      throw new Error("leaseDurationMs must be greater than renewDeadlineMs");
    this.leaseName = memberLeaseName(options.group, options.identity);
  }

  /** Whether this replica reconciles the cluster's CRs now. */
  owns(cluster: string): boolean {
    return ownsUnder(this.views, this.options.identity, cluster);
  }

  /** The newest view this member narrowed to (the live members as it last saw them). */
  get members(): readonly string[] {
    return this.views.at(-1) ?? [];
  }

  start(): void {
    if (this.running) throw new Error("the shard membership was already started");
    this.running = this.run();
  }

  /** Drops every cluster, waits for their reconciles, and deletes the member Lease: the others rebalance at once. */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.lapseTimer);
    await this.running;
    await this.narrow([]);
    const lease = this.lease;
    if (!lease) return;
    await this.options.client.rest
      .request({
        method: "DELETE",
        path: await this.leasePath(lease.metadata.name),
        body: { preconditions: { resourceVersion: lease.metadata.resourceVersion } },
      })
      .catch((err: unknown) =>
        this.options.log.warn({ err: String(err) }, "could not delete the member Lease"),
      );
  }

  private async run(): Promise<void> {
    const { log, retryPeriodMs } = this.options;
    log.info({ lease: this.leaseName }, "sharding: joining");
    while (!this.stopping.signal.aborted) {
      try {
        await this.tick();
      } catch (err) {
        log.warn({ err: String(err) }, "sharding: membership round failed");
      }
      // While a hand-off is under way, look again sooner: the others' acknowledgements arrive within a
      // retry period, and the clusters wait for this replica to see them.
      const pauseMs = this.views.length > 1 ? retryPeriodMs / 4 : retryPeriodMs;
      if (!(await delay(pauseMs, true, { signal: this.stopping.signal }).catch(() => false))) break;
    }
  }

  /**
   * One round: renew, read the members, narrow to a changed view and acknowledge it, widen once all have.
   * Each request is given up after the renew deadline, so a hub that stopped answering holds up no round
   * for longer (the lapse timer has dropped every cluster by then).
   */
  private async tick(): Promise<void> {
    const { renewDeadlineMs, identity, log } = this.options;
    await this.renewWithin();
    if (performance.now() - this.lastRenewSentMs >= renewDeadlineMs) {
      await this.lapse();
      return;
    }
    const view = await this.liveMembers();
    const digest = viewDigest(view);
    if (acknowledgedIn(this.lease) !== digest) {
      await this.narrow(view);
      this.acknowledged = digest;
      await this.renewWithin();
      if (acknowledgedIn(this.lease) !== digest) return; // not written: the others cannot know; next round
    }
    if (this.views.length === 1 && viewDigest(this.members) === digest) return; // settled on this view
    // Read again after this member's acknowledgement was written: a member widens only on what the others
    // acknowledged after it did, which rules out two owners across overlapping membership changes.
    const leases = await this.listMembersWithin();
    const all = view.every(
      (member) =>
        member === identity ||
        leases.some(
          (l) =>
            l.metadata.name === memberLeaseName(this.options.group, member) && acknowledgedIn(l) === digest,
        ),
    );
    if (!all) return;
    // The lapse timer may have dropped every cluster while these requests were out: widen only on a
    // renewal still within its deadline, or this member would own a share the others may count as gone.
    if (performance.now() - this.lastRenewSentMs >= renewDeadlineMs) return;
    const before = this.views;
    this.views = [view];
    log.info({ members: view.length }, "sharding: every member acknowledged; taking this replica's share");
    this.options.onWidened((cluster) => ownsUnder(before, identity, cluster));
  }

  /**
   * The renew deadline passed without a renewal: drop every cluster, and acknowledge no view until the
   * next round has narrowed again, 5 s (lease duration − renew deadline) before any other member may count
   * this one gone and take its clusters.
   */
  private async lapse(): Promise<void> {
    if (this.views.length === 1 && this.members.length === 0) return; // owns nothing already
    this.options.log.warn("sharding: the member Lease was not renewed in time; dropping every cluster");
    this.acknowledged = "";
    await this.narrow([]);
  }

  /** Narrows the share by `view` (nothing when empty) and waits until no reconcile outside it runs. */
  private async narrow(view: string[]): Promise<void> {
    if (view.length === 0) this.views = [[]];
    else if (viewDigest(this.members) !== viewDigest(view) || this.members.length === 0)
      this.views = [...this.views, view];
    this.options.onNarrowed();
    await this.options.settle();
  }

  /**
   * Live members: this one, and the holders of member Leases judgeLease counts live that a replica vouches
   * for. A Lease long expired (twice the duration) is removed, if it is a member's at all.
   */
  private async liveMembers(): Promise<string[]> {
    const { identity, group, leaseDurationMs } = this.options;
    const now = performance.now();
    const live = new Set<string>([identity]);
    const seen = new Set<string>();
    const leases = await this.listMembersWithin();
    for (const lease of leases) {
      const name = lease.metadata.name;
      seen.add(name);
      const { verdict, renewal } = judgeLease(lease, this.renewals.get(name), now, {
        group,
        leaseDurationMs,
      });
      this.renewals.set(name, renewal);
      const declaredMs = (lease.spec?.leaseDurationSeconds ?? 0) * 1000;
      if (verdict.state !== "ignored" && declaredMs > leaseDurationMs)
        this.logOnce(
          name,
          lease.spec?.holderIdentity,
          `a member Lease declares ${declaredMs / 1000}s; it counts for no more than the configured ${leaseDurationMs / 1000}s`,
        );
      if (verdict.state === "ignored") {
        this.logOnce(name, lease.spec?.holderIdentity, `ignoring a member Lease: ${verdict.why}`);
      } else if (verdict.state === "expired") {
        if (name !== this.leaseName && now >= renewal.atMs + 2 * leaseDurationMs)
          await this.deleteExpired(lease);
      } else if (verdict.holder === identity || (await this.vouchedFor(verdict.holder, now))) {
        live.add(verdict.holder);
      } else {
        this.logOnce(name, verdict.holder, "ignoring a member Lease: no replica can vouch for its holder");
      }
    }
    // Forget what belongs to Leases gone: forged ones under fresh names must not pile up here.
    const holders = new Set(leases.map((lease) => lease.spec?.holderIdentity));
    for (const name of this.renewals.keys()) if (!seen.has(name)) this.renewals.delete(name);
    for (const key of this.logged) if (!seen.has(key.split("\n")[0]!)) this.logged.delete(key);
    for (const holder of this.vouched) if (!holders.has(holder)) this.vouched.delete(holder);
    for (const holder of this.refusedUntil.keys()) if (!holders.has(holder)) this.refusedUntil.delete(holder);
    return [...live].sort();
  }

  private async vouchedFor(holder: string, now: number): Promise<boolean> {
    if (this.vouched.has(holder)) return true;
    if ((this.refusedUntil.get(holder) ?? 0) > now) return false;
    const vouched = await this.options.vouch(holder).catch((err: unknown) => {
      this.options.log.warn({ member: holder, err: String(err) }, "sharding: could not check a member");
      return false;
    });
    if (vouched) this.vouched.add(holder);
    else this.refusedUntil.set(holder, now + this.options.leaseDurationMs);
    return vouched;
  }

  private logOnce(lease: string, holder: string | undefined, what: string): void {
    const key = `${lease}\n${holder}\n${what}`;
    if (this.logged.has(key)) return;
    this.logged.add(key);
    this.options.log.warn({ lease, holder }, `sharding: ${what}`);
  }

  private async listMembersWithin(): Promise<MemberLease[]> {
    const leases = await settleWithin(this.listMembers(), this.options.renewDeadlineMs, this.stopping.signal);
    if (leases === undefined) throw new Error("the hub did not list the member Leases in time");
    return leases;
  }

  private listMembers(): Promise<MemberLease[]> {
    const { client, namespace, group } = this.options;
    return listLeases(client, namespace, `${SHARD_GROUP_LABEL}=${group}`);
  }

  /** A dead member's Lease, long expired, is removed (conditionally: a member that came back keeps it). */
  private async deleteExpired(lease: MemberLease): Promise<void> {
    await this.options.client.rest
      .request({
        method: "DELETE",
        path: await this.leasePath(lease.metadata.name),
        body: { preconditions: { resourceVersion: lease.metadata.resourceVersion } },
      })
      .then(() =>
        this.options.log.info(
          { member: lease.spec?.holderIdentity },
          "sharding: removed a dead member's Lease",
        ),
      )
      .catch(() => undefined);
  }

  /** renew, given up (not cancelled: the write is conditional) once the renew deadline passed. */
  private async renewWithin(): Promise<void> {
    await settleWithin(this.renew(), this.options.renewDeadlineMs, this.stopping.signal);
  }

  /** Notes a renewal sent at `sentMs` that the hub stored, and moves the lapse timer to its deadline. */
  private renewed(sentMs: number): void {
    if (sentMs < this.lastRenewSentMs) return; // a late answer to a write abandoned earlier
    this.lastRenewSentMs = sentMs;
    clearTimeout(this.lapseTimer);
    if (this.stopping.signal.aborted) return;
    this.lapseTimer = setTimeout(
      () =>
        void this.lapse().catch((err: unknown) =>
          this.options.log.warn({ err: String(err) }, "sharding: dropping the clusters failed"),
        ),
      Math.max(0, sentMs + this.options.renewDeadlineMs - performance.now()), // a late answer: at once
    );
    this.lapseTimer.unref();
  }

  /** Writes this member's Lease (renewTime now, the acknowledged view); notes when a write succeeded. */
  private async renew(): Promise<void> {
    const { client, namespace, group, identity, leaseDurationMs, log } = this.options;
    const sentMs = performance.now();
    const body: MemberLease = {
      apiVersion: LEASE_API_VERSION,
      kind: "Lease",
      metadata: {
        name: this.leaseName,
        namespace,
        labels: { [SHARD_GROUP_LABEL]: group },
        annotations: { [SHARD_VIEW_ANNOTATION]: this.acknowledged },
        ...(this.lease?.metadata.resourceVersion && { resourceVersion: this.lease.metadata.resourceVersion }),
      },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
        renewTime: microTime(new Date()),
      },
    };
    try {
      const method = this.lease ? "PUT" : "POST";
      const path = await this.leasePath(this.lease ? this.leaseName : undefined);
      this.lease = (await client.rest.request<MemberLease>({ method, path, body })).body;
      this.renewed(sentMs);
    } catch (err) {
      // Someone else wrote it (409) or removed it (404): read it again, or create it, next round.
      if (isConflict(err) || isNotFound(err)) {
        this.lease = await getLease(client, namespace, this.leaseName).catch(() => undefined);
      } else log.warn({ err: String(err) }, "sharding: could not renew the member Lease");
    }
  }

  private leasePath(name: string | undefined): Promise<string> {
    return leasePath(this.options.client, this.options.namespace, name);
  }
}

/**
 * Vouches for members by their Pods: a member is a replica of this deployment when the Pod its identity
 * names is in this namespace, is that Pod (its UID is the identity's), not finished or being deleted, and
 * runs as this replica's ServiceAccount. A Lease costs nothing to forge where Leases may be written; such a
 * Pod can only be made by someone who could read that ServiceAccount's token, and so act as the reconciler
 * anyway. The UID closes the gap a running replica's name left open: `<its pod>_<any uuid>` is no member.
 */
export async function podVoucher(
  client: KubeClient,
  namespace: string,
  identity: string,
): Promise<(member: string) => Promise<boolean>> {
  const own = await client.get("v1", "Pod", namespace, podOf(identity)).catch(() => undefined);
  if (!own) {
    throw new Error(
      `sharding vouches for members by their Pods, but this replica's own Pod ${namespace}/${podOf(identity)} ` +
        "cannot be read: POD_NAME must name it (the chart sets it) and the ServiceAccount may get Pods there",
    );
  }
  if (own.metadata.uid !== uidOf(identity)) {
    throw new Error(
      `sharding binds members to their Pods' UIDs, but this replica's identity does not carry its Pod's ` +
        `(${own.metadata.uid ?? "none"}): POD_UID must be set from metadata.uid (the chart sets it)`,
    );
  }
  const serviceAccountOf = (pod: KubeObject) =>
    (pod.spec as { serviceAccountName?: string } | undefined)?.serviceAccountName ?? "default";
  const serviceAccount = serviceAccountOf(own);
  return async (member) => {
    const pod = await client.get("v1", "Pod", namespace, podOf(member));
    const phase = (pod?.status as { phase?: string } | undefined)?.phase;
    return (
      pod !== undefined &&
      pod.metadata.uid === uidOf(member) &&
      pod.metadata.deletionTimestamp === undefined &&
      phase !== "Succeeded" &&
      phase !== "Failed" &&
      serviceAccountOf(pod) === serviceAccount
    );
  };
}
