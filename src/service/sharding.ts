import { createHash } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import type { KubeClient } from "../kube/client.ts";
import { isConflict, isNotFound } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";

// ── The assignment: pure ────────────────────────────────────────────────────────────────────────────────

/**
 * The member that owns a cluster: rendezvous (highest random weight) hashing. Every member scores every
 * cluster and the highest score wins, so all members agree from the member list alone, and a member
 * joining or leaving moves only the clusters it gains or had (about 1/N of them).
 */
export function ownerOf(members: readonly string[], cluster: string): string | undefined {
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
  return views.every((view) => ownerOf(view, cluster) === member);
}

// ── The membership: Leases on the hub ───────────────────────────────────────────────────────────────────

/** Label on every member Lease of one sharded deployment; its value is the group name. */
export const SHARD_GROUP_LABEL = "fleet.knative.dev/shard-group";
/** Annotation on a member Lease: the digest of the member list whose share the member has narrowed to. */
export const SHARD_VIEW_ANNOTATION = "fleet.knative.dev/shard-view";

const LEASE_API_VERSION = "coordination.k8s.io/v1";

const acknowledgedIn = (lease: MemberLease | undefined): string | undefined =>
  lease?.metadata.annotations?.[SHARD_VIEW_ANNOTATION];

interface MemberLease {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string };
}

export interface ShardMembershipOptions {
  client: KubeClient;
  namespace: string;
  /** The group's name: member Leases are `<group>-member-<hash of identity>`. */
  group: string;
  /** Unique per process (processIdentity). */
  identity: string;
  /** A member whose Lease has not changed for this long (as this replica saw it) is gone (default 15 s). */
  leaseDurationMs?: number;
  /** A member that could not renew for this long stops reconciling anything (default 10 s). */
  renewDeadlineMs?: number;
  /** Renew and look at the others this often (default 2 s). */
  retryPeriodMs?: number;
  log: Logger;
  /**
   * The share narrowed: resolves once no reconcile of a cluster this member no longer owns is running.
   * Only then does the member acknowledge the new membership, so no other member takes the cluster while
   * it is still being worked on here.
   */
  settle(): Promise<void>;
  /** The share widened: `owned` said what was owned before; queue what is owned now and was not then. */
  onWidened(owned: (cluster: string) => boolean): void;
}

/** When a member Lease was last seen to change (performance.now()), and its duration. */
interface Observed {
  resourceVersion: string;
  atMs: number;
  durationMs: number;
}

/**
 * Sharding of the reconcile over N replicas (the way Argo CD shards its application controller, but with
 * dynamic membership). Each replica holds a member Lease, renewed every retry period; the live members
 * are those whose Lease changed within its duration; each cluster belongs to one of them by rendezvous
 * hashing. A hand-off is two-phase: on a membership change every member first drops what it no longer
 * owns and waits for those reconciles to finish, then writes the new view's digest into its Lease; a
 * member takes new clusters only when every live member's Lease carries that digest. Expiry is judged on
 * the local clock from when a Lease was last seen to change, and a member that cannot renew within the
 * renew deadline (shorter than the lease duration) drops everything, so a replica cut off from the hub
 * has stopped before the others count it gone.
 */
export class ShardMembership {
  private readonly options: Required<Omit<ShardMembershipOptions, "settle" | "onWidened">> &
    ShardMembershipOptions;
  private readonly leaseName: string;
  private readonly stopping = new AbortController();
  private running?: Promise<void>;
  /** The views this member's share is narrowed by (see ownsUnder); [[]] owns nothing. */
  private views: string[][] = [[]];
  private acknowledged = "";
  private lease?: MemberLease;
  private lastRenewSentMs = Number.NEGATIVE_INFINITY;
  private readonly observed = new Map<string, Observed>();

  constructor(options: ShardMembershipOptions) {
    this.options = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...options };
    if (this.options.leaseDurationMs <= this.options.renewDeadlineMs)
      throw new Error("leaseDurationMs must be greater than renewDeadlineMs");
    const suffix = createHash("sha256").update(options.identity).digest("hex").slice(0, 10);
    this.leaseName = `${options.group}-member-${suffix}`;
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

  /** One round: renew, read the members, narrow to a changed view and acknowledge it, widen once all have. */
  private async tick(): Promise<void> {
    const { renewDeadlineMs, identity, log } = this.options;
    await this.renew();
    if (performance.now() - this.lastRenewSentMs >= renewDeadlineMs) {
      if (this.members.length > 0)
        log.warn("sharding: the member Lease was not renewed in time; dropping every cluster");
      await this.narrow([]);
      return;
    }
    const view = await this.liveMembers();
    const digest = viewDigest(view);
    if (acknowledgedIn(this.lease) !== digest) {
      await this.narrow(view);
      this.acknowledged = digest;
      await this.renew();
      if (acknowledgedIn(this.lease) !== digest) return; // not written: the others cannot know; next round
    }
    if (this.views.length === 1 && viewDigest(this.members) === digest) return; // settled on this view
    // Read again after this member's acknowledgement was written: a member widens only on what the others
    // acknowledged after it did, which rules out two owners across overlapping membership changes.
    const leases = await this.listMembers();
    const all = view.every(
      (member) =>
        member === identity ||
        leases.some((l) => l.spec?.holderIdentity === member && acknowledgedIn(l) === digest),
    );
    if (!all) return;
    const before = this.views;
    this.views = [view];
    log.info({ members: view.length }, "sharding: every member acknowledged; taking this replica's share");
    this.options.onWidened((cluster) => ownsUnder(before, identity, cluster));
  }

  /** Narrows the share by `view` (nothing when empty) and waits until no reconcile outside it runs. */
  private async narrow(view: string[]): Promise<void> {
    if (view.length === 0) this.views = [[]];
    else if (viewDigest(this.members) !== viewDigest(view) || this.members.length === 0)
      this.views = [...this.views, view];
    await this.options.settle();
  }

  /** Live members: the holders of member Leases that changed within their duration, this one included. */
  private async liveMembers(): Promise<string[]> {
    const now = performance.now();
    const live = new Set<string>([this.options.identity]);
    const seen = new Set<string>();
    for (const lease of await this.listMembers()) {
      const name = lease.metadata.name;
      seen.add(name);
      const rv = lease.metadata.resourceVersion ?? "";
      const durationMs = (lease.spec?.leaseDurationSeconds ?? this.options.leaseDurationMs / 1000) * 1000;
      const before = this.observed.get(name);
      const observed =
        before?.resourceVersion === rv ? before : { resourceVersion: rv, atMs: now, durationMs };
      this.observed.set(name, observed);
      const holder = lease.spec?.holderIdentity;
      if (holder && now < observed.atMs + observed.durationMs) live.add(holder);
      else if (name !== this.leaseName && now >= observed.atMs + 2 * observed.durationMs)
        await this.deleteExpired(lease);
    }
    for (const name of this.observed.keys()) if (!seen.has(name)) this.observed.delete(name);
    return [...live].sort();
  }

  private async listMembers(): Promise<MemberLease[]> {
    const list = await this.options.client.list(LEASE_API_VERSION, "Lease", {
      namespace: this.options.namespace,
      labelSelector: `${SHARD_GROUP_LABEL}=${this.options.group}`,
    });
    return list.items as unknown as MemberLease[];
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
        renewTime: new Date().toISOString().replace(/Z$/, "000Z"),
      },
    };
    try {
      const method = this.lease ? "PUT" : "POST";
      const path = await this.leasePath(this.lease ? this.leaseName : undefined);
      this.lease = (await client.rest.request<MemberLease>({ method, path, body })).body;
      this.lastRenewSentMs = sentMs;
    } catch (err) {
      // Someone else wrote it (409) or removed it (404): read it again, or create it, next round.
      if (isConflict(err) || isNotFound(err)) {
        const current = await client
          .get(LEASE_API_VERSION, "Lease", namespace, this.leaseName)
          .catch(() => undefined);
        this.lease = current as MemberLease | undefined;
      } else log.warn({ err: String(err) }, "sharding: could not renew the member Lease");
    }
  }

  private leasePath(name: string | undefined): Promise<string> {
    return this.options.client.path(LEASE_API_VERSION, "Lease", this.options.namespace, name);
  }
}
