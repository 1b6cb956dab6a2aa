import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { rolloutText } from "../../support/fleet-files.ts";
import { startFleetProcess } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { chartDir, renderChart } from "../../support/helm.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import { type RunningPrometheus, startPrometheus } from "../../support/prometheus.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { dropHubCrs, isReady, servingFile } from "../../support/serving-fleet.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";

// A real Prometheus server (Debian's package; on loopback) scrapes a live knative-fleet every second and
// evaluates the chart's alert rules, rendered by helm with every `for:` shortened through the values (the
// only change from what users get). The test provokes what the alerts are for: the Git server stopped, a
// spoke made unreachable, a prune held for confirmation, a rollout halted; it reads the alerts through
// Prometheus' HTTP API as Alertmanager would get them, fixes each cause and watches the alert clear. Then it
// evaluates every query of the chart's Grafana dashboard against that Prometheus and the running fleet: no
// panel may be empty. Last, the service stops and KnativeFleetDown fires. Needs 3 spokes.

const sandbox = loadSandbox();
const REPO = "prometheus-fleet";
const SPOKES = ["spoke-1", "spoke-2", "spoke-3"];
const CLUSTER_PROFILE = "multicluster.x-k8s.io/v1alpha1";
const clusterOf = (spoke: string) => `${CLUSTER_PROFILE_NAMESPACE}/${spoke}`;
/** A change no spoke can run: the activator's new pod asks for a node that does not exist. */
const BAD_WORKLOADS = [{ name: "activator", nodeSelector: { "prometheus-test/no-such-node": "true" } }];

const fleetFiles = (spokes = SPOKES): Record<string, string> =>
  Object.assign({}, ...spokes.map((s) => servingFile(s)));
const rolloutPolicy = rolloutText(
  {
    waves: [{ name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: "spoke-1" }] }],
    soak: "1s",
    timeLimit: "15s",
  },
  { name: "knative" },
);

interface Alert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: "pending" | "firing";
}

/** The chart's rules file (release knative-fleet, so job="knative-fleet"), every `for:` 2 s. */
function testRules(): string {
  const defaults = parse(readFileSync(join(chartDir, "values.yaml"), "utf8")) as {
    alerts: { rules: Record<string, Record<string, unknown>> };
  };
  const rules = Object.fromEntries(
    Object.entries(defaults.alerts.rules).map(([name, rule]) => [name, { ...rule, for: "2s" }]),
  );
  const objects = renderChart({
    release: "knative-fleet",
    values: { alerts: { configMap: { enabled: true }, rules } },
  });
  const map = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === "knative-fleet-alerts");
  return (map as KubeObject & { data: Record<string, string> }).data["knative-fleet.rules.yaml"]!;
}

describe("alerts and dashboard against a real Prometheus", () => {
  let git: GitServer;
  let hub: KubeClient;
  let service: ServiceProcess;
  let prometheus: RunningPrometheus | undefined;
  let promUrl: string;
  const scratch = mkdtempSync(join(tmpdir(), "knative-fleet-prometheus-"));
  const figures: Record<string, number> = {};

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${promUrl}${path}`, { signal: AbortSignal.timeout(5_000) });
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`${path}: ${body.error}`);
    return body.data;
  };
  const alerts = async () => (await api<{ alerts: Alert[] }>("/api/v1/alerts")).alerts;
  const matching = (list: Alert[], name: string, labels: Record<string, string>) =>
    list.filter(
      (a) => a.labels.alertname === name && Object.entries(labels).every(([k, v]) => a.labels[k] === v),
    );
  /** Waits until the alert fires; returns it, and notes how long after `since` it did. */
  const firing = async (name: string, labels: Record<string, string>, since: number, timeoutMs = 120_000) => {
    const alert = await waitUntil(
      `${name} ${JSON.stringify(labels)} firing`,
      async () => matching(await alerts(), name, labels).find((a) => a.state === "firing"),
      timeoutMs,
    );
    figures[`${name} fired (ms)`] = Date.now() - since;
    return alert;
  };
  const cleared = async (
    name: string,
    labels: Record<string, string>,
    since: number,
    timeoutMs = 120_000,
  ) => {
    await waitUntil(
      `${name} ${JSON.stringify(labels)} cleared`,
      async () => (matching(await alerts(), name, labels).length === 0 ? true : undefined),
      timeoutMs,
    );
    figures[`${name} cleared (ms)`] = Date.now() - since;
  };
  const expectQuiet = async (name: string, labels: Record<string, string> = {}) =>
    expect(matching(await alerts(), name, labels), `${name} before the fault`).toEqual([]);

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 3").toBeGreaterThanOrEqual(3);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, "knative-fleet");
    await dropHubCrs(hub);
    await resetRolloutState(hub, "knative-fleet");
    await cleanSpokes(sandbox, SPOKES);
    git = await startGitServer();
    await git.createRepo(REPO, fleetFiles());
    service = startFleetProcess({
      sandbox,
      service: { repositoryUrl: git.url(REPO), statusInterval: "1s" },
      config: { rollout: { checkInterval: "1s" }, logLevel: "info" },
      scratch,
      name: "knative-fleet",
    });
    const metricsPort = service.metricsPort;
    const rulesFile = join(scratch, "knative-fleet.rules.yaml");
    writeFileSync(rulesFile, testRules());
    prometheus = await startPrometheus(scratch, {
      rule_files: [rulesFile],
      scrape_configs: [
        {
          job_name: "knative-fleet",
          static_configs: [{ targets: [`127.0.0.1:${metricsPort}`], labels: { namespace: "knative-fleet" } }],
        },
      ],
    });
    promUrl = prometheus.url;

    for (const spoke of SPOKES)
      await waitUntil(
        `serving-${spoke} Ready`,
        async () => ((await isReady(hub, "KnativeServing", `serving-${spoke}`)) ? true : undefined),
        600_000,
      );
  }, 900_000);

  afterAll(async () => {
    prometheus?.stop();
    await service?.stop();
    await dropHubCrs(hub);
    await resetRolloutState(hub, "knative-fleet");
    await cleanSpokes(sandbox, SPOKES);
    await git?.close();
    console.log("prometheus alert figures:", JSON.stringify(figures, null, 1));
  }, 300_000);

  it("scrapes the service and loads the chart's eleven rules", async () => {
    const groups = await api<{ groups: { rules: { name: string; health: string }[] }[] }>("/api/v1/rules");
    const rules = groups.groups.flatMap((g) => g.rules);
    expect(rules).toHaveLength(11);
    expect(rules.filter((r) => r.health === "err")).toEqual([]);
    const up = await waitUntil("the target up", async () => {
      const { result } = await api<{ result: { value: [number, string] }[] }>("/api/v1/query?query=up");
      return result[0]?.value[1] === "1" ? result : undefined;
    });
    expect(up).toHaveLength(1);
    // A fleet that is Ready: no component is reported not Ready, the leader is there. On a loaded machine a
    // scrape during the first installs may outlast its 900 ms timeout, and with `for: 2s` that fires
    // KnativeFleetDown for a moment; what users rely on is that it clears once the target answers.
    const upSince = Date.now();
    await cleared("KnativeFleetClusterNotReady", {}, upSince);
    await cleared("KnativeFleetDown", {}, upSince, 30_000);
    await cleared("KnativeFleetNoLeader", {}, upSince, 30_000);
  });

  it("the Git server stopped: KnativeFleetGitSyncFailing fires, and clears once it is back", async () => {
    await expectQuiet("KnativeFleetGitSyncFailing");
    const stopped = Date.now();
    await git.stop();
    const alert = await firing("KnativeFleetGitSyncFailing", { job: "knative-fleet" }, stopped);
    expect(alert.labels.severity).toBe("warning");
    expect(alert.annotations.runbook_url).toMatch(/docs\/monitoring\.md#knativefleetgitsyncfailing$/);
    expect(alert.annotations.description).toContain("has failed for 2s");
    const restarted = Date.now();
    await git.start();
    await cleared("KnativeFleetGitSyncFailing", {}, restarted);
  });

  it("a spoke made unreachable: KnativeFleetSpokeUnreachable fires for it, and clears once it answers", async () => {
    const original = (await hub.get(
      CLUSTER_PROFILE,
      "ClusterProfile",
      CLUSTER_PROFILE_NAMESPACE,
      "spoke-3",
    ))!;
    const status = original.status as { accessProviders: { cluster: Record<string, unknown> }[] };
    const withServer = (server?: string) =>
      hub.apply(
        {
          apiVersion: CLUSTER_PROFILE,
          kind: "ClusterProfile",
          metadata: { name: "spoke-3", namespace: CLUSTER_PROFILE_NAMESPACE },
          status: server
            ? {
                ...status,
                accessProviders: status.accessProviders.map((p) => ({
                  ...p,
                  cluster: { ...p.cluster, server },
                })),
              }
            : status,
        },
        { subresource: "status" },
      );
    const labels = { cluster: clusterOf("spoke-3") };
    await expectQuiet("KnativeFleetSpokeUnreachable", labels);
    const cut = Date.now();
    await withServer("https://127.0.0.1:9"); // port 9 on loopback refuses at once
    const alert = await firing("KnativeFleetSpokeUnreachable", labels, cut);
    expect(alert.annotations.description).toContain(`Cluster ${clusterOf("spoke-3")} has not answered`);
    // Only that spoke.
    expect(matching(await alerts(), "KnativeFleetSpokeUnreachable", {}).map((a) => a.labels.cluster)).toEqual(
      [clusterOf("spoke-3")],
    );
    const fixed = Date.now();
    await withServer(); // the ClusterProfile as the sandbox made it
    await cleared("KnativeFleetSpokeUnreachable", labels, fixed);
    await waitUntil(
      "serving-spoke-3 Ready again",
      async () => ((await isReady(hub, "KnativeServing", "serving-spoke-3")) ? true : undefined),
      120_000,
    );
  });

  it("two of three CRs' files removed: KnativeFleetPruneHeld fires, and clears once they are back", async () => {
    await expectQuiet("KnativeFleetPruneHeld");
    const removed = Date.now();
    await git.pushChange(REPO, {
      files: { "clusters/serving-spoke-2.yaml": null, "clusters/serving-spoke-3.yaml": null },
      message: "remove two of three clusters",
    });
    const alert = await firing("KnativeFleetPruneHeld", { state: "held" }, removed);
    expect(alert.annotations.description).toMatch(/^2 hub CRs whose files left the fleet repository/);
    const restored = Date.now();
    await git.pushChange(REPO, { files: fleetFiles(), message: "put them back" });
    await cleared("KnativeFleetPruneHeld", {}, restored);
    for (const spoke of SPOKES)
      expect(await isReady(hub, "KnativeServing", `serving-${spoke}`), spoke).toBe(true);
  });

  it("a change that never becomes healthy: KnativeFleetRolloutHalted fires, and clears once a fix rolls out", async () => {
    await git.pushChange(REPO, {
      files: { "clusters/rollout.yaml": rolloutPolicy },
      message: "rollout policy",
    });
    await waitUntil("the rollout policy read", async () =>
      (await hub.get("v1", "ConfigMap", "knative-fleet", ROLLOUT_STATE_CONFIGMAP)) ? true : undefined,
    );
    await expectQuiet("KnativeFleetRolloutHalted");
    const pushed = Date.now();
    const bad = servingFile("spoke-1");
    const [path, text] = Object.entries(bad)[0]!;
    const cr = parse(text) as { spec: Record<string, unknown> };
    await git.pushChange(REPO, {
      files: { [path]: stringify({ ...cr, spec: { ...cr.spec, workloads: BAD_WORKLOADS } }) },
      message: "activator on a node that does not exist",
    });
    const alert = await firing("KnativeFleetRolloutHalted", { job: "knative-fleet" }, pushed, 180_000);
    expect(alert.labels.severity).toBe("warning");
    const fixed = Date.now();
    await git.pushChange(REPO, { files: bad, message: "fix: no node selector" });
    await cleared("KnativeFleetRolloutHalted", {}, fixed, 300_000);
  });

  it("every query of the dashboard returns data for the running fleet", async () => {
    const dashboard = JSON.parse(readFileSync(join(chartDir, "dashboards/knative-fleet.json"), "utf8")) as {
      panels: { title: string; type: string; targets?: { expr: string }[] }[];
    };
    const queries = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
    );
    expect(queries.length).toBeGreaterThan(20);
    const empty: string[] = [];
    for (const { panel, expr } of queries) {
      // Grafana's variables as it fills them: the job picked, the rate window.
      const query = expr.replaceAll("$job", "knative-fleet").replaceAll("$__rate_interval", "5m");
      const { result } = await api<{ result: { value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(query)}`,
      );
      const values = result.map((r) => Number(r.value[1])).filter((v) => Number.isFinite(v));
      if (values.length === 0) empty.push(`${panel}: ${expr}`);
    }
    expect(empty, "panels whose query returns no data").toEqual([]);
    // The fleet table names every cluster with its installed release and Ready, once the fleet is Ready
    // again: the test before rolled a fix out to the canary, which becomes Ready some seconds after.
    const table = async () => {
      const { result } = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(
          dashboard.panels
            .find((p) => p.type === "table")!
            .targets![0]!.expr.replaceAll("$job", "knative-fleet"),
        )}`,
      );
      return result
        .map((r) => [r.metric.cluster, r.metric.kind, Boolean(r.metric.version), r.value[1]])
        .sort();
    };
    const everyClusterReady = SPOKES.map((s) => [clusterOf(s), "KnativeServing", true, "1"]);
    for (const spoke of SPOKES)
      await waitUntil(`serving-${spoke} Ready`, async () =>
        (await isReady(hub, "KnativeServing", `serving-${spoke}`)) ? true : undefined,
      );
    await waitUntil("the fleet table shows every cluster Ready", async () =>
      JSON.stringify(await table()) === JSON.stringify(everyClusterReady) ? true : undefined,
    ).catch(() => undefined);
    expect(await table()).toEqual(everyClusterReady);
  });

  it("the service stopped: KnativeFleetDown fires", async () => {
    await cleared("KnativeFleetDown", {}, Date.now(), 30_000);
    const stopped = Date.now();
    await service.stop();
    const alert = await firing("KnativeFleetDown", {}, stopped);
    expect(alert.labels.severity).toBe("critical");
  });
});
