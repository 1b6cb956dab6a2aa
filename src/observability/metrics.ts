import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/**
 * The service's Prometheus metrics. Label values are bounded by what the operator configures: `kind` is
 * KnativeServing or KnativeEventing, `cluster` the ClusterProfile `namespace/name` (or "hub"), `provider`
 * an access provider's name, git error kinds a fixed set. A value taken from a CR's spec never becomes a
 * label, so no commit to the fleet repository can grow the series count.
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
  }): void;
  /** `error`: the failure's kind (GitErrorKind), absent on success. */
  gitFetchFinished(r: { durationMs: number; error?: string }): void;
  execPluginFinished(r: { provider: string; cluster: string; durationMs: number; error: boolean }): void;
  /** A CR left its cluster (finalized): its series go, so a gone install is not reported forever. */
  forgetResource(r: { kind: string; cluster: string }): void;
  /** A cluster left the inventory: every series that names it goes. */
  forgetCluster(cluster: string): void;
  pruned(r: { outcome: PruneOutcome; count: number }): void;
  statusCommitFinished(r: { outcome: StatusCommitOutcome }): void;
  setLeader(isLeader: boolean): void;
  /** The rollout's state after a sync (src/rollout): halted or not, the open wave's position. */
  rolloutObserved(r: { phase: string }): void;
}

export type PruneOutcome = "pruned" | "held" | "skipped" | "none";
export type StatusCommitOutcome = "pushed" | "unchanged" | "failed";

const PRUNE_OUTCOMES: readonly PruneOutcome[] = ["pruned", "held", "skipped", "none"];
const STATUS_COMMIT_OUTCOMES: readonly StatusCommitOutcome[] = ["pushed", "unchanged", "failed"];

// A reconcile ranges from a no-op (tens of ms) to a first install that waits for CRDs and rollouts (minutes).
const RECONCILE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
// A shallow fetch of the fleet repository: sub-second when nothing changed, longer on a first clone.
const GIT_FETCH_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
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
  const gitFetchDuration = new Histogram({
    name: "knative_fleet_git_fetch_duration_seconds",
    help: "Time to fetch the fleet repository (asking for the head, and fetching when it moved), failed fetches included.",
    buckets: GIT_FETCH_BUCKETS,
    registers,
  });
  const gitFetchErrors = new Counter({
    name: "knative_fleet_git_fetch_errors_total",
    help: "Failed fetches of the fleet repository, by error kind (network, timeout, auth, ...).",
    labelNames: ["kind"] as const,
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
  const pruneTotal = new Counter({
    name: "knative_fleet_prune_total",
    help: "Hub CRs whose file left the fleet repository, by what the mirror did with them.",
    labelNames: ["outcome"] as const,
    registers,
  });
  const statusCommits = new Counter({
    name: "knative_fleet_status_commits_total",
    help: "Status write-backs to the fleet repository, by outcome.",
    labelNames: ["outcome"] as const,
    registers,
  });
  const leader = new Gauge({
    name: "knative_fleet_leader",
    help: "1 while this replica holds the leader Lease and reconciles, else 0.",
    registers,
  });

  // Series with a fixed label set start at 0, so rate() and alerts see them before the first event.
  for (const outcome of PRUNE_OUTCOMES) pruneTotal.inc({ outcome }, 0);
  for (const outcome of STATUS_COMMIT_OUTCOMES) statusCommits.inc({ outcome }, 0);
  leader.set(0);
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
  rolloutHalted.set(0);
  let wasHalted = false;

  // The label sets recorded per cluster, so a departure can remove exactly its series (Flux's Delete*).
  const kindsOf = new Map<string, Set<string>>();
  const providersOf = new Map<string, Set<string>>();
  const remember = (index: Map<string, Set<string>>, cluster: string, value: string) =>
    index.set(cluster, (index.get(cluster) ?? new Set()).add(value));
  const forgetResource = ({ kind, cluster }: { kind: string; cluster: string }) => {
    const labels = { kind, cluster };
    for (const result of ["success", "error"]) reconcileDuration.remove({ ...labels, result });
    reconcileErrors.remove(labels);
    driftCorrections.remove(labels);
    spokeReady.remove(labels);
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
      kindsOf.delete(cluster);
      providersOf.delete(cluster);
    },
    reconcileFinished({ kind, cluster, durationMs, error, ready, drift }) {
      const labels = { kind, cluster };
      remember(kindsOf, cluster, kind);
      reconcileDuration.observe({ ...labels, result: error ? "error" : "success" }, seconds(durationMs));
      reconcileErrors.inc(labels, error ? 1 : 0);
      driftCorrections.inc(labels, drift);
      spokeReady.set(labels, ready ? 1 : 0);
    },
    gitFetchFinished({ durationMs, error }) {
      gitFetchDuration.observe(seconds(durationMs));
      if (error !== undefined) gitFetchErrors.inc({ kind: error });
    },
    execPluginFinished({ provider, cluster, durationMs, error }) {
      const labels = { provider, cluster };
      remember(providersOf, cluster, provider);
      execPluginDuration.observe(labels, seconds(durationMs));
      execPluginErrors.inc(labels, error ? 1 : 0);
    },
    rolloutObserved({ phase }) {
      const halted = phase === "Halted";
      rolloutHalted.set(halted ? 1 : 0);
      if (halted && !wasHalted) rolloutHalts.inc();
      wasHalted = halted;
    },
    pruned({ outcome, count }) {
      pruneTotal.inc({ outcome }, count);
    },
    statusCommitFinished({ outcome }) {
      statusCommits.inc({ outcome });
    },
    setLeader(isLeader) {
      leader.set(isLeader ? 1 : 0);
    },
  };
}
