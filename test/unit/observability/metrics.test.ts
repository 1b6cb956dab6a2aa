import { register as globalRegistry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createMetrics, type FleetMetrics } from "../../../src/observability/metrics.ts";

/** The exposition's sample lines (no HELP/TYPE comments), for exact matching. */
async function samples(metrics: FleetMetrics): Promise<string[]> {
  return (await metrics.registry.metrics()).split("\n").filter((line) => line && !line.startsWith("#"));
}

describe("fleet metrics", () => {
  it("uses a registry of its own, with the default process metrics", async () => {
    const metrics = createMetrics();
    expect(metrics.registry).not.toBe(globalRegistry);
    const text = await metrics.registry.metrics();
    expect(text).toContain("# TYPE process_cpu_user_seconds_total counter");
    expect(text).toContain("# TYPE nodejs_heap_size_used_bytes gauge");
    expect(await globalRegistry.metrics()).not.toContain("knative_fleet_");
  });

  it("starts the fixed-label series at 0 and the leader gauge at 0", async () => {
    const lines = await samples(createMetrics());
    expect(lines).toContain("knative_fleet_pruned_total 0");
    for (const state of ["held", "skipped"]) {
      expect(lines).toContain(`knative_fleet_prune_pending{state="${state}"} 0`);
    }
    for (const outcome of ["pushed", "unchanged", "failed"]) {
      expect(lines).toContain(`knative_fleet_status_commits_total{outcome="${outcome}"} 0`);
    }
    expect(lines).toContain("knative_fleet_leader 0");
  });

  it("counts drifted objects by the field manager that changed them, at most 16 names then other", async () => {
    const metrics = createMetrics();
    const pass = (drifted: { manager?: string; outcome: string }[]) =>
      metrics.reconcileFinished({
        kind: "KnativeServing",
        cluster: "fleet/spoke-1",
        durationMs: 10,
        error: false,
        ready: true,
        drift: drifted.filter((d) => d.outcome === "corrected").length,
        drifted,
        requests: 1,
      });
    pass([{ manager: "kubectl-edit", outcome: "corrected" }, { outcome: "kept" }]);
    pass(Array.from({ length: 20 }, (_, i) => ({ manager: `script-${i}`, outcome: "corrected" })));
    const lines = await samples(metrics);
    expect(lines).toContain(
      'knative_fleet_drift_objects_total{manager="kubectl-edit",outcome="corrected"} 1',
    );
    expect(lines).toContain('knative_fleet_drift_objects_total{manager="unknown",outcome="kept"} 1');
    expect(lines).toContain('knative_fleet_drift_objects_total{manager="script-13",outcome="corrected"} 1');
    expect(lines).not.toContain(
      'knative_fleet_drift_objects_total{manager="script-14",outcome="corrected"} 1',
    );
    expect(lines).toContain('knative_fleet_drift_objects_total{manager="other",outcome="corrected"} 6');
    expect(lines.filter((l) => l.startsWith("knative_fleet_drift_objects_total{"))).toHaveLength(17);
  });

  it("records a reconcile: duration by result, errors, readiness and drift per kind and cluster", async () => {
    const metrics = createMetrics();
    const labels = 'kind="KnativeServing",cluster="fleet/spoke-1"';
    metrics.reconcileFinished({
      kind: "KnativeServing",
      cluster: "fleet/spoke-1",
      durationMs: 1500,
      error: false,
      ready: true,
      drift: 2,
      requests: 12,
      reachable: true,
      version: "1.21.2",
    });
    let lines = await samples(metrics);
    expect(lines).toContain(
      `knative_fleet_reconcile_duration_seconds_bucket{le="2.5",${labels},result="success"} 1`,
    );
    expect(lines).toContain(
      `knative_fleet_reconcile_duration_seconds_bucket{le="1",${labels},result="success"} 0`,
    );
    expect(lines).toContain(`knative_fleet_reconcile_duration_seconds_sum{${labels},result="success"} 1.5`);
    expect(lines).toContain(`knative_fleet_reconcile_duration_seconds_count{${labels},result="success"} 1`);
    expect(lines).toContain(`knative_fleet_reconcile_errors_total{${labels}} 0`);
    expect(lines).toContain(`knative_fleet_spoke_ready{${labels}} 1`);
    expect(lines).toContain(`knative_fleet_drift_corrections_total{${labels}} 2`);
    expect(lines).toContain('knative_fleet_spoke_reachable{cluster="fleet/spoke-1"} 1');
    expect(lines).toContain('knative_fleet_spoke_requests_total{cluster="fleet/spoke-1"} 12');
    expect(lines).toContain(`knative_fleet_spoke_version_info{${labels},version="1.21.2"} 1`);

    metrics.reconcileFinished({
      kind: "KnativeServing",
      cluster: "fleet/spoke-1",
      durationMs: 40,
      error: true,
      ready: false,
      drift: 0,
      requests: 0,
      reachable: false,
      version: "1.22.1",
    });
    metrics.reconcileFinished({
      kind: "KnativeEventing",
      cluster: "hub",
      durationMs: 10,
      error: false,
      ready: true,
      drift: 0,
      requests: 3,
    });
    lines = await samples(metrics);
    expect(lines).toContain(`knative_fleet_reconcile_duration_seconds_count{${labels},result="error"} 1`);
    expect(lines).toContain(`knative_fleet_reconcile_duration_seconds_count{${labels},result="success"} 1`);
    expect(lines).toContain(`knative_fleet_reconcile_errors_total{${labels}} 1`);
    expect(lines).toContain(`knative_fleet_spoke_ready{${labels}} 0`);
    expect(lines).toContain(`knative_fleet_drift_corrections_total{${labels}} 2`);
    expect(lines).toContain('knative_fleet_spoke_ready{kind="KnativeEventing",cluster="hub"} 1');
    expect(lines).toContain('knative_fleet_spoke_reachable{cluster="fleet/spoke-1"} 0');
    // An upgrade replaces the version's series: one per component and cluster.
    expect(lines.filter((l) => l.startsWith(`knative_fleet_spoke_version_info{${labels}`))).toEqual([
      `knative_fleet_spoke_version_info{${labels},version="1.22.1"} 1`,
    ]);
    // A pass that never tried to reach its cluster says nothing about it.
    expect(lines.filter((l) => l.startsWith('knative_fleet_spoke_reachable{cluster="hub"}'))).toEqual([]);
  });

  it("records git fetches: every duration, errors by reason; the last poll's failure until one succeeds", async () => {
    const metrics = createMetrics();
    metrics.gitFetchFinished({ durationMs: 300 });
    metrics.gitFetchFinished({ durationMs: 30_000, error: "timeout" });
    metrics.gitFetchFinished({ durationMs: 200, error: "auth" });
    metrics.gitFetchFinished({ durationMs: 30_000, error: "timeout" });
    const lines = await samples(metrics);
    expect(lines).toContain("knative_fleet_git_fetch_duration_seconds_count 4");
    expect(lines).toContain('knative_fleet_git_fetch_duration_seconds_bucket{le="0.5"} 2');
    expect(lines).toContain('knative_fleet_git_fetch_errors_total{reason="timeout"} 2');
    expect(lines).toContain('knative_fleet_git_fetch_errors_total{reason="auth"} 1');
    expect(lines).toContain("knative_fleet_sync_failing 0");
    metrics.pollFinished({ failed: true });
    expect(await samples(metrics)).toContain("knative_fleet_sync_failing 1");
    metrics.pollFinished({ failed: false });
    expect(await samples(metrics)).toContain("knative_fleet_sync_failing 0");
  });

  it("records exec plugin runs per provider and cluster", async () => {
    const metrics = createMetrics();
    const labels = 'provider="gke",cluster="fleet/spoke-1"';
    metrics.execPluginFinished({ provider: "gke", cluster: "fleet/spoke-1", durationMs: 80, error: false });
    metrics.execPluginFinished({ provider: "gke", cluster: "fleet/spoke-1", durationMs: 5000, error: true });
    const lines = await samples(metrics);
    expect(lines).toContain(`knative_fleet_exec_plugin_duration_seconds_bucket{le="0.1",${labels}} 1`);
    expect(lines).toContain(`knative_fleet_exec_plugin_duration_seconds_count{${labels}} 2`);
    expect(lines).toContain(`knative_fleet_exec_plugin_errors_total{${labels}} 1`);
  });

  it("counts pruned CRs, the pending prune of the last sync, status commits, and flips the leader gauge", async () => {
    const metrics = createMetrics();
    metrics.pruned({ outcome: "pruned", count: 3 });
    metrics.pruned({ outcome: "held", count: 40 });
    metrics.pruned({ outcome: "held", count: 40 });
    metrics.statusCommitFinished({ outcome: "pushed" });
    metrics.statusCommitFinished({ outcome: "failed" });
    metrics.setLeader(true);
    let lines = await samples(metrics);
    expect(lines).toContain("knative_fleet_pruned_total 3");
    expect(lines).toContain('knative_fleet_prune_pending{state="held"} 40');
    expect(lines).toContain('knative_fleet_prune_pending{state="skipped"} 0');
    expect(lines).toContain('knative_fleet_status_commits_total{outcome="pushed"} 1');
    expect(lines).toContain('knative_fleet_status_commits_total{outcome="unchanged"} 0');
    expect(lines).toContain('knative_fleet_status_commits_total{outcome="failed"} 1');
    expect(lines).toContain("knative_fleet_status_write_failing 1");
    expect(lines).toContain("knative_fleet_leader 1");
    metrics.pruned({ outcome: "skipped", count: 2 });
    metrics.statusCommitFinished({ outcome: "unchanged" });
    lines = await samples(metrics);
    expect(lines).toContain('knative_fleet_prune_pending{state="held"} 0');
    expect(lines).toContain('knative_fleet_prune_pending{state="skipped"} 2');
    expect(lines).toContain("knative_fleet_status_write_failing 0");
  });

  it("a replica that stops leading drops the Git side's state: a standby reports no held prune or halt", async () => {
    const metrics = createMetrics();
    metrics.setLeader(true);
    metrics.pruned({ outcome: "held", count: 5 });
    metrics.rolloutObserved({ phase: "Halted", waiting: 3, wavesCompleted: 1 });
    metrics.upgradesObserved([
      { chain: "KnativeServing 1.23", step: "1.21" },
      { chain: "KnativeServing 1.23", step: "1.21" },
      { chain: "KnativeServing 1.23", step: "1.22" },
    ]);
    metrics.pollFinished({ failed: true });
    metrics.statusCommitFinished({ outcome: "failed" });
    let lines = await samples(metrics);
    expect(lines).toContain("knative_fleet_rollout_halted 1");
    expect(lines).toContain("knative_fleet_rollout_halts_total 1");
    expect(lines).toContain("knative_fleet_rollout_waiting_resources 3");
    expect(lines).toContain("knative_fleet_rollout_waves_completed 1");
    expect(lines).toContain(
      'knative_fleet_upgrade_chain_resources{kind="KnativeServing",target="1.23",step="1.21"} 2',
    );
    expect(lines).toContain(
      'knative_fleet_upgrade_chain_resources{kind="KnativeServing",target="1.23",step="1.22"} 1',
    );
    metrics.setLeader(false);
    lines = await samples(metrics);
    expect(lines.filter((line) => line.startsWith("knative_fleet_upgrade_chain_resources{"))).toEqual([]);
    for (const line of [
      "knative_fleet_leader 0",
      'knative_fleet_prune_pending{state="held"} 0',
      "knative_fleet_rollout_halted 0",
      "knative_fleet_rollout_waiting_resources 0",
      "knative_fleet_sync_failing 0",
      "knative_fleet_status_write_failing 0",
    ])
      expect(lines).toContain(line);
    expect(lines).toContain("knative_fleet_rollout_halts_total 1");
  });

  it("keeps two instances apart (each replica, or each test, has its own registry)", async () => {
    const a = createMetrics();
    const b = createMetrics();
    a.setLeader(true);
    expect(await samples(a)).toContain("knative_fleet_leader 1");
    expect(await samples(b)).toContain("knative_fleet_leader 0");
  });

  it("forgets a CR's series when it leaves its cluster, and every series of a cluster that leaves", async () => {
    const metrics = createMetrics();
    const reconcile = (kind: string, cluster: string) =>
      metrics.reconcileFinished({
        kind,
        cluster,
        durationMs: 10,
        error: false,
        ready: true,
        drift: 0,
        requests: 4,
        reachable: true,
      });
    reconcile("KnativeServing", "fleet/spoke-1");
    reconcile("KnativeEventing", "fleet/spoke-1");
    reconcile("KnativeServing", "fleet/spoke-2");
    metrics.execPluginFinished({ provider: "ocm", cluster: "fleet/spoke-1", durationMs: 5, error: false });
    const naming = async (text: string) => (await samples(metrics)).filter((line) => line.includes(text));

    metrics.forgetResource({ kind: "KnativeEventing", cluster: "fleet/spoke-1" });
    expect(await naming('kind="KnativeEventing"')).toEqual([]);
    expect(await naming('kind="KnativeServing",cluster="fleet/spoke-1"')).not.toEqual([]);

    expect(metrics.reportedClusters().sort()).toEqual(["fleet/spoke-1", "fleet/spoke-2"]);
    metrics.forgetCluster("fleet/spoke-1");
    expect(await naming('cluster="fleet/spoke-1"')).toEqual([]);
    expect(metrics.reportedClusters()).toEqual(["fleet/spoke-2"]);
    expect(await naming('cluster="fleet/spoke-2"')).not.toEqual([]);
  });
});
