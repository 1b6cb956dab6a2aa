import { createHash, randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { SHARD_GROUP_LABEL, SHARD_VIEW_ANNOTATION } from "../api/labels.ts";
import type { KubeClient } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { KubeObject } from "../kube/object.ts";
import { isConflict, isNotFound } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";
import { getLease, LEASE_API_VERSION, leasePath, listLeases, microTime } from "./lease.ts";
import { settleWithin } from "./settle-within.ts";
import {
  acknowledges,
  judgeLease,
  LEFT,
  type MemberLease,
  type MemberRecord,
  memberLeaseName,
  podOf,
  provenRecord,
  recordAnnotations,
  type Sighting,
  uidOf,
} from "./shard-lease.ts";

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

// ── The membership: Leases on the hub (what each says and whether it counts: shard-lease.ts) ───────────

interface ShardMembershipOptions {
  client: KubeClient;
  namespace: string;
  /** The group's name: member Leases are `<group>-member-<hash of identity>`. */
  group: string;
  /** Unique per process (processIdentity). */
  identity: string;
  /** The shard key (shard-key.ts): every member's records are proven with it. */
  key: Uint8Array;
  /** A member whose Lease did not change for this long (as this replica saw it) is gone (default 15 s). */
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
 * are those whose Lease judgeLease counts and that a replica vouches for; each cluster belongs to one of
 * them by rendezvous hashing. A hand-off is two-phase: on a membership change every member first drops
 * what it no longer owns and waits for those reconciles to finish, then writes the new view's digest into
 * its Lease, with a new epoch; a member takes new clusters only when every live member's Lease
 * acknowledges that digest and its epoch, proven with the shard key (so one who may write Leases cannot
 * acknowledge for a member, nor put back an acknowledgement of the same view from before). Expiry is judged
 * on the local clock from when a Lease was last seen to change, and a member that cannot renew within the
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
  /** owns' answers under `views` (replaced, never changed in place): a cluster's owner is hashed once. */
  private owned: { views: string[][]; answers: Map<string, boolean> } = {
    views: this.views,
    answers: new Map(),
  };
  private acknowledged = "";
  /** This member's current epoch: a new one with each view it narrows to. */
  private epoch = randomBytes(8).toString("hex");
  /** The epochs of the live members' proven records in the last list: acknowledged with the view. */
  private seen: string[] = [];
  private lease?: MemberLease;
  /**
   * Whether `lease` is this member's own last write (or there was none yet). A write counts as a renewal
   * only then: it proves the Lease stood untouched since the last one, so every other member that looked in
   * between saw it change. After someone else wrote or deleted it, the next write only takes it back.
   */
  private ownLast = true;
  /** The renewTime last written (ms): each write's is later, so the others can tell a copy from news. */
  private lastRenewTimeMs = 0;
  private lastRenewSentMs = Number.NEGATIVE_INFINITY;
  /** Fires at the renew deadline: drops every cluster even while a round hangs on the hub. */
  private lapseTimer?: NodeJS.Timeout;
  /** What this replica saw of each member Lease, by name (judgeLease). */
  private readonly sightings = new Map<string, Sighting>();
  /** Identities vouched for (for good), and when a refusal may be asked again (performance.now()). */
  private readonly vouched = new Set<string>();
  private readonly refusedUntil = new Map<string, number>();
  /** What was logged about a Lease (its name first): each thing is said once. */
  private readonly logged = new Set<string>();
  /**
   * A watch of the member Leases: every write shows, even of a Lease deleted again before the next list.
   * A member widens only once it watched without a gap for a lease duration (see watchedLongEnough).
   */
  private readonly watch: Informer;
  /** The newest version of each member Lease the watch delivered since the last round, and when. */
  private readonly heard = new Map<string, { lease: MemberLease; atMs: number }>();
  /** This member's oldest write the watch has not shown yet, and when it was stored (a watch lagging it is not trusted). */
  private unheardWrite?: { resourceVersion: string; atMs: number };
  /** The versions of this member's Lease the watch showed since its last write (one may beat the answer). */
  private readonly heardOwn = new Set<string>();
  /** Not before this (performance.now()) does the watch count as seamless: it lagged until then. */
  private watchTrustedFromMs = 0;

  constructor(options: ShardMembershipOptions) {
    this.options = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...options };
    if (this.options.leaseDurationMs <= this.options.renewDeadlineMs)
      throw new Error("leaseDurationMs must be greater than renewDeadlineMs");
    this.leaseName = memberLeaseName(options.group, options.identity);
    this.watch = new Informer(
      options.client,
      LEASE_API_VERSION,
      "Lease",
      (err) => options.log.debug({ err: String(err) }, "sharding: the watch of the member Leases broke"),
      options.namespace,
      { labelSelector: `${SHARD_GROUP_LABEL}=${options.group}` },
    );
    this.watch.on((event, object) => {
      if (event === "DELETED") return;
      const lease = object as unknown as MemberLease;
      this.heard.set(lease.metadata.name, { lease, atMs: performance.now() });
      const resourceVersion = lease.metadata.resourceVersion ?? "";
      if (lease.metadata.name === this.leaseName) this.heardOwn.add(resourceVersion);
      if (resourceVersion === this.unheardWrite?.resourceVersion) this.unheardWrite = undefined;
    });
  }

  /** Whether this replica reconciles the cluster's CRs now. */
  owns(cluster: string): boolean {
    if (this.owned.views !== this.views) this.owned = { views: this.views, answers: new Map() };
    let answer = this.owned.answers.get(cluster);
    if (answer === undefined) {
      answer = ownsUnder(this.views, this.options.identity, cluster);
      this.owned.answers.set(cluster, answer);
    }
    return answer;
  }

  /** The newest view this member narrowed to (the live members as it last saw them). */
  get members(): readonly string[] {
    return this.views.at(-1) ?? [];
  }

  start(): void {
    if (this.running) throw new Error("the shard membership was already started");
    this.watch.start();
    this.running = this.run();
  }

  /**
   * Drops every cluster, waits for their reconciles, and writes a proven "left" record: the others
   * rebalance at once (a deleted Lease would count only once its duration passed: anyone may delete one).
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.lapseTimer);
    await this.running;
    this.watch.stop();
    await this.narrow([]);
    if (!this.lease) return;
    this.acknowledged = LEFT;
    // A round's renewal given up as the stop began may still land first (409): read again, write again.
    const deadlineMs = performance.now() + this.options.renewDeadlineMs;
    for (let attempt = 1; attempt <= 3 && this.lease; attempt++) {
      const remainingMs = deadlineMs - performance.now();
      if (remainingMs <= 0) break;
      if (await settleWithin(this.renew(), remainingMs)) return;
    }
    this.options.log.warn(
      "sharding: could not record that this member left; the others drop it when its Lease expires",
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
    const { renewDeadlineMs, identity, group, key, log } = this.options;
    await this.renewWithin();
    if (performance.now() - this.lastRenewSentMs >= renewDeadlineMs) {
      await this.lapse();
      return;
    }
    const view = await this.liveMembers();
    const digest = viewDigest(view);
    if (
      this.acknowledged !== digest ||
      this.lease?.metadata.annotations?.[SHARD_VIEW_ANNOTATION] !== digest
    ) {
      if (this.acknowledged !== digest) this.epoch = randomBytes(8).toString("hex");
      await this.narrow(view);
      this.acknowledged = digest;
      await this.renewWithin();
      if (this.lease?.metadata.annotations?.[SHARD_VIEW_ANNOTATION] !== digest) return; // not written yet
    }
    if (this.views.length === 1 && viewDigest(this.members) === digest) return; // settled on this view
    // Read again after this member's acknowledgement was written: the others must have written theirs
    // after they saw this member's epoch, which rules out two owners across overlapping membership changes.
    const leases = await this.listMembersWithin();
    const all = view.every(
      (member) =>
        member === identity ||
        acknowledges(
          leases.find((l) => l.metadata.name === memberLeaseName(group, member)),
          member,
          digest,
          this.epoch,
          key,
        ),
    );
    if (!all) {
      // The others' next writes carry what this list shows of the epochs.
      this.seen = this.epochsIn(leases, view);
      return;
    }
    // The lapse timer may have dropped every cluster while these requests were out: widen only on a
    // renewal still within its deadline, or this member would own a share the others may count as gone.
    if (performance.now() - this.lastRenewSentMs >= renewDeadlineMs) return;
    if (!this.watchedLongEnough()) return;
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

  /**
   * Whether the watch of the member Leases ran without a gap, and kept up with this member's own writes,
   * for a whole lease duration. A member that owns clusters writes its Lease at least once per renew
   * deadline (or it dropped them), so every live member has shown in that time, even one whose Lease
   * someone deleted just before this replica's first list: without this, a replica that had just started
   * could see itself alone and take every cluster (issue #43, measured in the hour soak).
   */
  private watchedLongEnough(): boolean {
    const { leaseDurationMs, renewDeadlineMs } = this.options;
    const now = performance.now();
    const since = this.watch.seamlessSinceMs;
    if (since === undefined) return false;
    if (this.unheardWrite && this.unheardWrite.atMs < since) this.unheardWrite = undefined; // listed since
    // A watch that has not shown this member's own write for longer than the margin between the renew
    // deadline and the lease duration may be missing the others' too.
    if (this.unheardWrite && now - this.unheardWrite.atMs > leaseDurationMs - renewDeadlineMs)
      this.watchTrustedFromMs = now;
    return now - Math.max(since, this.watchTrustedFromMs) >= leaseDurationMs;
  }

  /** Narrows the share by `view` (nothing when empty) and waits until no reconcile outside it runs. */
  private async narrow(view: string[]): Promise<void> {
    if (view.length === 0) this.views = [[]];
    else if (viewDigest(this.members) !== viewDigest(view) || this.members.length === 0)
      this.views = [...this.views, view];
    this.options.onNarrowed();
    await this.options.settle();
  }

  /** The epochs in the proven records of `members`' Leases (what this member has seen of their views). */
  private epochsIn(leases: readonly MemberLease[], members: readonly string[]): string[] {
    const { group, key } = this.options;
    const epochs = new Set<string>();
    for (const member of members) {
      if (member === this.options.identity) continue;
      const lease = leases.find((l) => l.metadata.name === memberLeaseName(group, member));
      const record = provenRecord(lease, key);
      if (record?.holder === member && record.epoch !== "") epochs.add(record.epoch);
    }
    return [...epochs].sort();
  }

  /**
   * Live members: this one, and the holders of member Leases judgeLease counts live that a replica vouches
   * for. A Lease long gone quiet (twice the duration) is removed, if it is a member's at all.
   */
  private async liveMembers(): Promise<string[]> {
    const { identity, group, leaseDurationMs, key } = this.options;
    const now = performance.now();
    const live = new Set<string>([identity]);
    // What the watch showed since the last round first: a Lease written and deleted in between is a sighting.
    for (const [name, { lease, atMs }] of this.heard) {
      const { sighting } = judgeLease(name, lease, this.sightings.get(name), atMs, {
        group,
        leaseDurationMs,
        key,
      });
      if (sighting) this.sightings.set(name, sighting);
    }
    this.heard.clear();
    const leases = await this.listMembersWithin();
    const byName = new Map(leases.map((lease) => [lease.metadata.name, lease]));
    for (const name of new Set([...byName.keys(), ...this.sightings.keys()])) {
      const lease = byName.get(name);
      const { verdict, sighting } = judgeLease(name, lease, this.sightings.get(name), now, {
        group,
        leaseDurationMs,
        key,
      });
      if (sighting) this.sightings.set(name, sighting);
      const declaredMs = (lease?.spec?.leaseDurationSeconds ?? 0) * 1000;
      if (verdict.state !== "ignored" && declaredMs > leaseDurationMs)
        this.logOnce(
          name,
          lease?.spec?.holderIdentity,
          `a member Lease declares ${declaredMs / 1000}s; it counts for no more than the configured ${leaseDurationMs / 1000}s`,
        );
      if (verdict.state === "ignored") {
        if (lease) this.logOnce(name, lease.spec?.holderIdentity, `ignoring a member Lease: ${verdict.why}`);
      } else if (verdict.state === "expired") {
        if (name !== this.leaseName && sighting && now >= sighting.changedAtMs + 2 * leaseDurationMs) {
          // Long quiet: its Lease is removed (if still there) and forgotten; it comes back as a new sighting.
          if (lease) await this.deleteExpired(lease);
          this.sightings.delete(name);
        }
      } else if (verdict.holder === identity || (await this.vouchedFor(verdict.holder, now))) {
        live.add(verdict.holder);
      } else {
        this.logOnce(name, verdict.holder, "ignoring a member Lease: no replica can vouch for its holder");
      }
    }
    const members = [...live].sort();
    this.seen = this.epochsIn(leases, members);
    // Forget what belongs to holders gone: forged ones under fresh names must not pile up here.
    const holders = new Set([...this.sightings.values()].map((s) => s.holder));
    for (const key of this.logged) if (!byName.has(key.split("\n")[0]!)) this.logged.delete(key);
    for (const holder of this.vouched) if (!holders.has(holder)) this.vouched.delete(holder);
    for (const holder of this.refusedUntil.keys()) if (!holders.has(holder)) this.refusedUntil.delete(holder);
    return members;
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

  /** A dead member's Lease, long quiet, is removed (conditionally: a member that came back keeps it). */
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

  /** Writes this member's Lease (renewTime now, its proven record); true, and noted, when the write succeeded. */
  private async renew(): Promise<boolean> {
    const { client, namespace, group, identity, leaseDurationMs, key, log } = this.options;
    const sentMs = performance.now();
    this.lastRenewTimeMs = Math.max(Date.now(), this.lastRenewTimeMs + 1);
    const record: MemberRecord = {
      holder: identity,
      renewTime: microTime(new Date(this.lastRenewTimeMs)),
      view: this.acknowledged,
      epoch: this.epoch,
      seen: this.seen,
    };
    const body: MemberLease = {
      apiVersion: LEASE_API_VERSION,
      kind: "Lease",
      metadata: {
        name: this.leaseName,
        namespace,
        labels: { [SHARD_GROUP_LABEL]: group },
        annotations: recordAnnotations(key, this.leaseName, record),
        ...(this.lease?.metadata.resourceVersion && { resourceVersion: this.lease.metadata.resourceVersion }),
      },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
        renewTime: record.renewTime,
      },
    };
    try {
      const method = this.lease ? "PUT" : "POST";
      const path = await this.leasePath(this.lease ? this.leaseName : undefined);
      this.lease = (await client.rest.request<MemberLease>({ method, path, body })).body;
      const resourceVersion = this.lease.metadata.resourceVersion;
      if (!this.unheardWrite && resourceVersion && !this.heardOwn.has(resourceVersion))
        this.unheardWrite = { resourceVersion, atMs: performance.now() };
      this.heardOwn.clear();
      if (this.ownLast) this.renewed(sentMs);
      this.ownLast = true;
      return true;
    } catch (err) {
      // Someone else wrote it (409) or removed it (404): read it again, or create it, next round; that
      // write renews nothing (an observer may have seen the Lease gone, and may see it gone again).
      if (isConflict(err) || isNotFound(err)) {
        this.ownLast = false;
        this.lease = await getLease(client, namespace, this.leaseName).catch(() => undefined);
      } else log.warn({ err: String(err) }, "sharding: could not renew the member Lease");
      return false;
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
