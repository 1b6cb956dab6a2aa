import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  chartDir,
  type KubeObject,
  only,
  PLAIN_RULES_FILE,
  plainRulesFile,
  renderChart,
  renderFailure,
} from "../../support/helm.ts";
import { repoRoot } from "../../support/shared.ts";

// The chart's monitoring objects, rendered by the real helm: the alert rules come from one template as a
// PrometheusRule, a ConfigMap and docs/monitoring/knative-fleet.rules.yaml alike; thresholds are values; the
// dashboard ships as a ConfigMap the Grafana sidecar finds.

interface Rule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
type RuleGroups = { groups: { name: string; rules: Rule[] }[] };

const dataOf = (object: KubeObject) => (object as KubeObject & { data: Record<string, string> }).data;
const ruleOf = (groups: RuleGroups, alert: string) =>
  groups.groups.flatMap((g) => g.rules).find((r) => r.alert === alert);
const BOTH = { alerts: { prometheusRule: { enabled: true }, configMap: { enabled: true } } };

describe("helm template: alert rules, ServiceMonitor and dashboard", () => {
  it("docs/monitoring/knative-fleet.rules.yaml is what the chart renders with its defaults", () => {
    const stale = `${PLAIN_RULES_FILE} is out of date with the chart: run \`npm run generate:monitoring\``;
    expect(readFileSync(join(repoRoot, PLAIN_RULES_FILE), "utf8"), stale).toBe(plainRulesFile());
  });

  it("renders none of them by default", () => {
    const kinds = renderChart().map((o) => `${o.kind}/${o.metadata.name}`);
    expect(kinds.filter((k) => /PrometheusRule|ServiceMonitor|alerts|dashboard/.test(k))).toEqual([]);
  });

  it("the PrometheusRule and the rules ConfigMap carry the same rules, selecting the release's job", () => {
    const objects = renderChart({ values: BOTH });
    const rule = only(objects, "PrometheusRule", "kf-knative-fleet") as KubeObject & { spec: RuleGroups };
    const plain = parse(
      dataOf(only(objects, "ConfigMap", "kf-knative-fleet-alerts"))["knative-fleet.rules.yaml"]!,
    );
    expect(plain).toEqual(rule.spec);
    const rules = rule.spec.groups.flatMap((g) => g.rules);
    expect(rules).toHaveLength(11);
    for (const r of rules) {
      expect(r.expr, r.alert).toContain('job="kf-knative-fleet"');
      expect(r.labels.severity, r.alert).toMatch(/^(critical|warning)$/);
      expect(r.annotations.runbook_url, r.alert).toBe(
        `https://github.com/knative-fleet/knative-fleet/blob/main/docs/monitoring.md#${r.alert.toLowerCase()}`,
      );
      expect(r.annotations.summary && r.annotations.description, r.alert).toBeTruthy();
    }
  });

  it("every runbook_url names a section of docs/monitoring.md", () => {
    const doc = readFileSync(join(repoRoot, "docs/monitoring.md"), "utf8");
    const anchors = new Set([...doc.matchAll(/^#+ (.+)$/gm)].map((m) => m[1]!.trim().toLowerCase()));
    for (const r of (parse(plainRulesFile()) as RuleGroups).groups.flatMap((g) => g.rules))
      expect(anchors.has(r.alert.toLowerCase()), `docs/monitoring.md has no section ${r.alert}`).toBe(true);
  });

  it("thresholds, severities, the selector and extra labels are values; an alert can be turned off", () => {
    const objects = renderChart({
      values: {
        alerts: {
          prometheusRule: { enabled: true, labels: { release: "kube-prometheus-stack" } },
          selector: 'namespace="platform",service="fleet"',
          labels: { team: "platform" },
          rules: {
            KnativeFleetClusterNotReady: { enabled: true, for: "45m", severity: "critical" },
            KnativeFleetReconcileErrorsHigh: { enabled: true, for: "5m", severity: "warning", ratio: 0.1 },
            KnativeFleetPruneHeld: { enabled: false, for: "5m", severity: "warning" },
          },
        },
      },
    });
    const rule = only(objects, "PrometheusRule") as KubeObject & { spec: RuleGroups };
    expect(rule.metadata.labels?.release).toBe("kube-prometheus-stack");
    const notReady = ruleOf(rule.spec, "KnativeFleetClusterNotReady")!;
    expect(notReady).toMatchObject({
      expr: 'knative_fleet_spoke_ready{namespace="platform",service="fleet"} == 0',
      for: "45m",
      labels: { severity: "critical", team: "platform" },
    });
    expect(notReady.annotations.description).toContain("for 45m");
    expect(ruleOf(rule.spec, "KnativeFleetReconcileErrorsHigh")!.expr).toMatch(/> 0\.1$/);
    expect(ruleOf(rule.spec, "KnativeFleetPruneHeld")).toBeUndefined();
  });

  it("the dashboard ConfigMap carries the chart's dashboard JSON with the Grafana sidecar's label", () => {
    const objects = renderChart({
      values: {
        dashboard: { enabled: true, namespace: "monitoring", annotations: { grafana_folder: "Knative" } },
      },
    });
    const map = only(objects, "ConfigMap", "kf-knative-fleet-dashboard");
    expect(map.metadata).toMatchObject({
      namespace: "monitoring",
      labels: { grafana_dashboard: "1" },
      annotations: { grafana_folder: "Knative" },
    });
    const shipped = JSON.parse(readFileSync(join(chartDir, "dashboards/knative-fleet.json"), "utf8"));
    expect(JSON.parse(dataOf(map)["knative-fleet.json"]!)).toEqual(shipped);
  });

  it("the ServiceMonitor scrapes the Service's metrics port, so the job is the Service's name", () => {
    const objects = renderChart({
      values: { metrics: { serviceMonitor: { enabled: true, interval: "15s" } } },
    });
    const monitor = only(objects, "ServiceMonitor") as KubeObject & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        endpoints: { port: string; interval: string }[];
      };
    };
    const service = only(objects, "Service") as KubeObject & { spec: { ports: { name: string }[] } };
    expect(service.metadata.name).toBe("kf-knative-fleet");
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels))
      expect(service.metadata.labels?.[k]).toBe(v);
    expect(monitor.spec.endpoints).toEqual([{ port: "http-metrics", path: "/metrics", interval: "15s" }]);
    expect(service.spec.ports.map((p) => p.name)).toContain("http-metrics");
  });

  it.each([
    [
      "a duration in words",
      { alerts: { rules: { KnativeFleetDown: { enabled: true, for: "5 minutes", severity: "critical" } } } },
      "for",
    ],
    [
      "an unknown alert",
      { alerts: { rules: { KnativeFleetTypo: { enabled: true, for: "5m", severity: "warning" } } } },
      "KnativeFleetTypo",
    ],
    [
      "a ratio above 1",
      {
        alerts: {
          rules: {
            KnativeFleetReconcileErrorsHigh: { enabled: true, for: "5m", severity: "warning", ratio: 2 },
          },
        },
      },
      "ratio",
    ],
  ])("the schema rejects %s", (_name, values, message) => {
    expect(renderFailure({ values })).toContain(message);
  });
});
