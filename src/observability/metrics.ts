import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * The service's Prometheus metrics (every name, label and meaning is in docs/monitoring.md, with the alert
 * rules and the dashboard built on them). Label values are bounded by what the operator configures: `kind`
 * is KnativeServing or KnativeEventing, `cluster` the ClusterProfile `namespace/name` (or "hub"),
 * `provider` an access provider's name; the others (`result`, `reason`, `outcome`, `state`, `trigger`) are
 * fixed sets. A value taken from a CR's spec or a Git file never becomes a label, so no commit to the fleet
 * repository can grow the series count.
 */
export interface FleetMetrics {
  /** A registry of its own (not prom-client's global one), with the default process and Node.js metrics. */
  readonly registry: Registry;
  reconcileFinished(r: {
    kind: string;
    cluster: string;
    durationMs: number;
    error: boolean;
    ready: boolean;
    drift: number;
    /** Drift recorded for the first time: who changed the objects, and whether they were put back. */
    drifted?: readonly { manager?: string; outcome: string }[] | undefined;
    /** Requests the pass sent to the cluster. */
    requests: number;
    /** Whether the cluster answered; undefined when the pass did not try to reach it. */
    reachable?: boolean | undefined;
    /** The installed release (status.version: one of the image's releases, so a bounded set). */
    version?: string | undefined;
  }): void;
  /** `error`: the failure's kind (GitErrorKind), absent on success. */
  gitFetchFinished(r: { durationMs: number; error?: string }): void;
  /** One poll of the fleet repository ended: fetched and mirrored (or nothing to do), or failed. */
  pollFinished(r: { failed: boolean }): void;
  /** One commit mirrored into the hub, and why it was mirrored (a push, the inventory, the rollout). */
  syncFinished(r: { durationMs: number; trigger: SyncTrigger }): void;
  execPluginFinished(r: { provider: string; cluster: string; durationMs: number; error: boolean }): void;
  /** A CR left its cluster (finalized): its series go, so a gone install is not reported forever. */
  forgetResource(r: { kind: string; cluster: string }): void;
  /**
   * Every series that names the cluster goes: it left the inventory, or (sharding) another replica owns it
   * now, so two replicas never report one cluster differently.
   */
  forgetCluster(cluster: string): void;
  /** The clusters this replica reports series for. */
  reportedClusters(): string[];
  /** The prune of the last sync: what it deleted, or how many CRs wait and why. */
  pruned(r: { outcome: PruneOutcome; count: number }): void;
  statusCommitFinished(r: { outcome: StatusCommitOutcome }): void;
  /** A commit status sent to the Git host, or a round that failed or was rate limited. */
  commitStatusSent(r: { outcome: CommitStatusOutcome }): void;
  /** A notification delivered to one endpoint, suppressed as a repeat, or not delivered. */
  notificationSent(r: { outcome: NotificationOutcome }): void;
  /** Leadership changed. A replica that stops leading drops the Git side's gauges: it no longer knows. */
  setLeader(isLeader: boolean): void;
  /** The rollout's state after a sync (src/rollout): halted or not, waves completed, CRs held back. */
  rolloutObserved(r: { phase: string; waiting: number; wavesCompleted: number }): void;
  /** The CRs on an upgrade chain after a sync (src/upgrade): each chain's step and how many CRs it gives. */
  upgradesObserved(crs: readonly { chain: string; step: string }[]): void;
  /** This replica's view of the shards: live members, and how many clusters it reconciles. */
  shardsObserved(r: { members: number; clusters: number }): void;
}

type PruneOutcome = "pruned" | "held" | "skipped" | "none";
export type StatusCommitOutcome = "pushed" | "unchanged" | "failed";
export type CommitStatusOutcome = "posted" | "failed" | "rate_limited";
export type NotificationOutcome = "sent" | "suppressed" | "failed";
/** What started a sync: a commit, an inventory change, the rollout's clock, or a person's confirmation of a held prune. */
export type SyncTrigger = "git" | "inventory" | "rollout" | "prune-confirmation" | "hub-cr-deleted";

const STATUS_COMMIT_OUTCOMES: readonly StatusCommitOutcome[] = ["pushed", "unchanged", "failed"];
const COMMIT_STATUS_OUTCOMES: readonly CommitStatusOutcome[] = ["posted", "failed", "rate_limited"];
const NOTIFICATION_OUTCOMES: readonly NotificationOutcome[] = ["sent", "suppressed", "failed"];
const PENDING_PRUNE_STATES = ["held", "skipped"] as const;

// A reconcile ranges from a no-op (tens of ms) to a first install that waits for CRDs and rollouts (minutes).
const RECONCILE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
// A shallow fetch of the fleet repository: sub-second when nothing changed, longer on a first clone.
const GIT_FETCH_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
// A sync applies every changed CR to the hub: tens of ms for a few, seconds for thousands.
const SYNC_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
// An exec plugin is a local process that usually answers from its own cache, or mints a token remotely.
const EXEC_PLUGIN_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const seconds = (ms: number): number => ms / 1000;

export function createMetrics(): FleetMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const reconcileDuration = new Histogram({
    name: "knative_fleet_reconcile_duration_seconds",
    help: "Time to reconcile one KnativeServing or KnativeEventing onto its cluster, by result.",
    labelNames: ["kind", "cluster", "result"] as const,
    buckets: RECONCILE_BUCKETS,
    registers,
  });
  const reconcileErrors = new Counter({
    name: "knative_fleet_reconcile_errors_total",
    help: "Reconciles that ended in an error.",
    labelNames: ["kind", "cluster"] as const,
    registers,
  });
  const spokeReady = new Gauge({
    name: "knative_fleet_spoke_ready",
    help: "1 when the component was Ready on its cluster after the last reconcile, else 0.",
    labelNames: ["kind", "cluster"] as const,
    registers,
  });
  const driftCorrections = new Counter({
    name: "knative_fleet_drift_corrections_total",
    help: "Objects on a cluster that had drifted from the desired state and were restored.",
    labelNames: ["kind", "cluster"] as const,
    registers,
  });
  const driftByManager = new Counter({
    name: "knative_fleet_drift_objects_total",
    help: "Objects someone else changed on a cluster, by the field manager that changed them (the first 16 names, then other) and by outcome (corrected, kept).",
    labelNames: ["manager", "outcome"] as const,
    registers,
  });
  const managers = new Set<string>();
  const boundedManager = (manager: string | undefined): string => {
    const name = manager ?? "unknown";
    if (!managers.has(name) && managers.size >= 16) return "other";
    managers.add(name);
    return name;
  };
  const spokeVersion = new Gauge({
    name: "knative_fleet_spoke_version_info",
    help: "1 for the Knative release installed on the cluster (status.version, one of the image's releases).",
    labelNames: ["kind", "cluster", "version"] as const,
    registers,
  });
  const spokeReachable = new Gauge({
    name: "knative_fleet_spoke_reachable",
    help: "1 when the cluster answered the last reconcile that tried to reach it, 0 when it could not be reached (connection, TLS or timeout).",
    labelNames: ["cluster"] as const,
    registers,
  });
  const spokeRequests = new Counter({
    name: "knative_fleet_spoke_requests_total",
    help: "API requests the reconciles sent to a cluster (reads and writes).",
    labelNames: ["cluster"] as const,
    registers,
  });
  const gitFetchDuration = new Histogram({
    name: "knative_fleet_git_fetch_duration_seconds",
    help: "Time to fetch the fleet repository (asking for the head, and fetching when it moved), failed fetches included.",
    buckets: GIT_FETCH_BUCKETS,
    registers,
  });
  const gitFetchErrors = new Counter({
    name: "knative_fleet_git_fetch_errors_total",
    help: "Failed fetches of the fleet repository, by reason (network, timeout, auth, ...).",
    labelNames: ["reason"] as const,
    registers,
  });
  const syncFailing = new Gauge({
    name: "knative_fleet_sync_failing",
    help: "1 while the last poll of the fleet repository failed (fetch, parse or mirror into the hub), else 0; leader only.",
    registers,
  });
  const syncDuration = new Histogram({
    name: "knative_fleet_sync_duration_seconds",
    help: "Time to mirror one commit of the fleet repository into the hub (placements, rollout gate, apply, prune), by trigger.",
    labelNames: ["trigger"] as const,
    buckets: SYNC_BUCKETS,
    registers,
  });
  const execPluginDuration = new Histogram({
    name: "knative_fleet_exec_plugin_duration_seconds",
    help: "Time an access provider's exec plugin took to return a credential for a cluster.",
    labelNames: ["provider", "cluster"] as const,
    buckets: EXEC_PLUGIN_BUCKETS,
    registers,
  });
  const execPluginErrors = new Counter({
    name: "knative_fleet_exec_plugin_errors_total",
    help: "Exec plugin runs that failed or returned no usable credential.",
    labelNames: ["provider", "cluster"] as const,
    registers,
  });
  const prunedTotal = new Counter({
    name: "knative_fleet_pruned_total",
    help: "Hub CRs deleted because their file left the fleet repository.",
    registers,
  });
  const prunePending = new Gauge({
    name: "knative_fleet_prune_pending",
    help: "Hub CRs whose file left the fleet repository but that the last sync did not prune: held for a person's confirmation, or skipped by a safeguard.",
    labelNames: ["state"] as const,
    registers,
  });
  const statusCommits = new Counter({
    name: "knative_fleet_status_commits_total",
    help: "Status write-backs to the fleet repository, by outcome.",
    labelNames: ["outcome"] as const,
    registers,
  });
  const commitStatuses = new Counter({
    name: "knative_fleet_commit_statuses_total",
    help: "Commit statuses posted to the Git host, and rounds that failed or were rate limited, by outcome.",
    labelNames: ["outcome"] as const,
    registers,
  });
  const notifications = new Counter({
    name: "knative_fleet_notifications_total",
    help: "Notifications delivered to an endpoint, suppressed as repeats, or not delivered, by outcome.",
    labelNames: ["outcome"] as const,
    registers,
  });
  const statusWriteFailing = new Gauge({
    name: "knative_fleet_status_write_failing",
    help: "1 while the last status write-back to the fleet repository failed, else 0; leader only.",
    registers,
  });
  const leader = new Gauge({
    name: "knative_fleet_leader",
    help: "1 while this replica holds the leader Lease (the Git side: sync, prune, rollout, status), else 0.",
    registers,
  });
  const rolloutHalted = new Gauge({
    name: "knative_fleet_rollout_halted",
    help: "1 while the rollout of the fleet repository's newest revision is halted (src/rollout); its status says where and why.",
    registers,
  });
  const rolloutHalts = new Counter({
    name: "knative_fleet_rollout_halts_total",
    help: "Rollouts that halted (no wave label: wave names come from Git, and no commit may grow the series count).",
    registers,
  });
  const rolloutWaiting = new Gauge({
    name: "knative_fleet_rollout_waiting_resources",
    help: "Hub CRs that keep their last applied spec until their rollout wave opens, after the last sync.",
    registers,
  });
  const rolloutWaves = new Gauge({
    name: "knative_fleet_rollout_waves_completed",
    help: "Waves the rollout of the newest revision has completed.",
    registers,
  });
  const upgradeSteps = new Gauge({
    name: "knative_fleet_upgrade_chain_resources",
    help: "Hub CRs given a step of an upgrade chain (a version several minors ahead walked one minor per rollout), by kind, the minor the chain goes to and the step, after the last sync.",
    labelNames: ["kind", "target", "step"] as const,
    registers,
  });
  const shardMembers = new Gauge({
    name: "knative_fleet_shard_members",
    help: "Live replicas sharing the reconcile, as this replica sees them (sharding.enabled).",
    registers,
  });
  const shardClusters = new Gauge({
    name: "knative_fleet_shard_clusters",
    help: "Clusters whose CRs this replica reconciles now (sharding.enabled).",
    registers,
  });

  // Series with a fixed label set start at 0, so rate() and alerts see them before the first event.
  for (const outcome of STATUS_COMMIT_OUTCOMES) statusCommits.inc({ outcome }, 0);
  for (const outcome of COMMIT_STATUS_OUTCOMES) commitStatuses.inc({ outcome }, 0);
  for (const outcome of NOTIFICATION_OUTCOMES) notifications.inc({ outcome }, 0);
  for (const state of PENDING_PRUNE_STATES) prunePending.set({ state }, 0);
  prunedTotal.inc(0);
  rolloutHalts.inc(0);
  const leaderOnly = [syncFailing, statusWriteFailing, rolloutHalted, rolloutWaiting, rolloutWaves];
  const dropLeaderState = () => {
    for (const gauge of leaderOnly) gauge.set(0);
    for (const state of PENDING_PRUNE_STATES) prunePending.set({ state }, 0);
    upgradeSteps.reset();
  };
  dropLeaderState();
  leader.set(0);
  let wasHalted = false;

  // The label sets recorded per cluster, so a departure can remove exactly its series (Flux's Delete*).
  const kindsOf = new Map<string, Set<string>>();
  const providersOf = new Map<string, Set<string>>();
  const versionOf = new Map<string, string>(); // by `kind cluster`, so an upgrade replaces the series
  const remember = (index: Map<string, Set<string>>, cluster: string, value: string) =>
    index.set(cluster, (index.get(cluster) ?? new Set()).add(value));
  const forgetResource = ({ kind, cluster }: { kind: string; cluster: string }) => {
    const labels = { kind, cluster };
    for (const result of ["success", "error"]) reconcileDuration.remove({ ...labels, result });
    reconcileErrors.remove(labels);
    driftCorrections.remove(labels);
    spokeReady.remove(labels);
    const version = versionOf.get(`${kind} ${cluster}`);
    if (version !== undefined) spokeVersion.remove({ ...labels, version });
    versionOf.delete(`${kind} ${cluster}`);
    kindsOf.get(cluster)?.delete(kind);
  };

  return {
    registry,
    forgetResource,
    forgetCluster(cluster) {
      for (const kind of kindsOf.get(cluster) ?? []) forgetResource({ kind, cluster });
      for (const provider of providersOf.get(cluster) ?? []) {
        execPluginDuration.remove({ provider, cluster });
        execPluginErrors.remove({ provider, cluster });
      }
      spokeReachable.remove({ cluster });
      spokeRequests.remove({ cluster });
      kindsOf.delete(cluster);
      providersOf.delete(cluster);
    },
    reportedClusters: () => [...new Set([...kindsOf.keys(), ...providersOf.keys()])],
    reconcileFinished({
      kind,
      cluster,
      durationMs,
      error,
      ready,
      drift,
      drifted,
      requests,
      reachable,
      version,
    }) {
      const labels = { kind, cluster };
      for (const { manager, outcome } of drifted ?? [])
        driftByManager.inc({ manager: boundedManager(manager), outcome });
      remember(kindsOf, cluster, kind);
      reconcileDuration.observe({ ...labels, result: error ? "error" : "success" }, seconds(durationMs));
      reconcileErrors.inc(labels, error ? 1 : 0);
      driftCorrections.inc(labels, drift);
      spokeReady.set(labels, ready ? 1 : 0);
      spokeRequests.inc({ cluster }, requests);
      if (reachable !== undefined) spokeReachable.set({ cluster }, reachable ? 1 : 0);
      const before = versionOf.get(`${kind} ${cluster}`);
      if (version !== undefined && version !== before) {
        if (before !== undefined) spokeVersion.remove({ ...labels, version: before });
        spokeVersion.set({ ...labels, version }, 1);
        versionOf.set(`${kind} ${cluster}`, version);
      }
    },
    gitFetchFinished({ durationMs, error }) {
      gitFetchDuration.observe(seconds(durationMs));
      if (error !== undefined) gitFetchErrors.inc({ reason: error });
    },
    pollFinished({ failed }) {
      syncFailing.set(failed ? 1 : 0);
    },
    syncFinished({ durationMs, trigger }) {
      syncDuration.observe({ trigger }, seconds(durationMs));
    },
    execPluginFinished({ provider, cluster, durationMs, error }) {
      const labels = { provider, cluster };
      remember(providersOf, cluster, provider);
      execPluginDuration.observe(labels, seconds(durationMs));
      execPluginErrors.inc(labels, error ? 1 : 0);
    },
    upgradesObserved(crs) {
      upgradeSteps.reset();
      for (const { chain, step } of crs) {
        const [kind = "", target = ""] = chain.split(" ");
        upgradeSteps.inc({ kind, target, step });
      }
    },
    rolloutObserved({ phase, waiting, wavesCompleted }) {
      const halted = phase === "Halted";
      rolloutHalted.set(halted ? 1 : 0);
      if (halted && !wasHalted) rolloutHalts.inc();
      wasHalted = halted;
      rolloutWaiting.set(waiting);
      rolloutWaves.set(wavesCompleted);
    },
    pruned({ outcome, count }) {
      if (outcome === "pruned") prunedTotal.inc(count);
      for (const state of PENDING_PRUNE_STATES) prunePending.set({ state }, outcome === state ? count : 0);
    },
    notificationSent({ outcome }) {
      notifications.inc({ outcome });
    },
    commitStatusSent({ outcome }) {
      commitStatuses.inc({ outcome });
    },
    statusCommitFinished({ outcome }) {
      statusCommits.inc({ outcome });
      statusWriteFailing.set(outcome === "failed" ? 1 : 0);
    },
    setLeader(isLeader) {
      leader.set(isLeader ? 1 : 0);
      if (!isLeader) {
        dropLeaderState();
        wasHalted = false;
      }
    },
    shardsObserved({ members, clusters }) {
      shardMembers.set(members);
      shardClusters.set(clusters);
    },
  };
}
