import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { crFile } from "../../support/fleet-files.ts";
import { repoRoot } from "../../support/shared.ts";

// spec.gates in the KnativeRollout policy: its defaults, and every mistake at its file, line and field.

const PATH = "rollout.yaml";
const model = (text: string) =>
  buildFleetModel([{ path: PATH, text }, crFile({ name: "a", cluster: "c1" })], {
    defaultNamespace: "knative-fleet",
  });
const errors = (text: string) => model(text).diagnostics.map(formatDiagnostic);

const HEAD = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata:
  name: default
spec:
  waves:
  - name: canary
    clusterProfiles: [{ namespace: fleet-system, name: c1 }]
  gates:
`;

describe("the gates of a KnativeRollout", () => {
  it("reads a prometheus and an http gate with their defaults", () => {
    const parsed = model(`${HEAD}  - name: error-rate
    waves: [canary]
    prometheus:
      query: 'sum(rate(errors{cluster="{{ .cluster.name }}"}[5m]))'
      threshold: { op: "<", value: 0.05 }
      bearerTokenSecretRef: { name: prometheus-token, key: token }
  - name: healthz
    http:
      url: https://{{ .cluster.name }}.example.com/healthz
`);
    expect(parsed.diagnostics).toEqual([]);
    expect(parsed.rollout.policy!.rollout.spec.gates).toEqual([
      {
        name: "error-rate",
        waves: ["canary"],
        prometheus: {
          query: 'sum(rate(errors{cluster="{{ .cluster.name }}"}[5m]))',
          threshold: { op: "<", value: 0.05 },
          onNoData: "Fail",
          bearerTokenSecretRef: { name: "prometheus-token", key: "token" },
          timeout: "10s",
        },
      },
      {
        name: "healthz",
        http: {
          url: "https://{{ .cluster.name }}.example.com/healthz",
          expectStatus: 200,
          maxLatency: "2s",
          successes: 3,
          interval: "1s",
          timeout: "30s",
        },
      },
    ]);
  });

  it("docs/rollout.md's example is a valid policy", () => {
    const docs = readFileSync(join(repoRoot, "docs", "rollout.md"), "utf8");
    const section = docs.slice(docs.indexOf("## Verification gates"));
    const example = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const parsed = model(`${HEAD.slice(0, HEAD.indexOf("spec:\n"))}${example}`);
    expect(parsed.diagnostics).toEqual([]);
    expect(parsed.rollout.policy!.rollout.spec.gates?.map((g) => g.name)).toEqual(["error-rate", "ingress"]);
  });

  it("a policy without gates has none", () => {
    const parsed = model(HEAD.replace("  gates:\n", ""));
    expect(parsed.diagnostics).toEqual([]);
    expect(parsed.rollout.policy!.rollout.spec.gates).toBeUndefined();
  });

  it("reports an unknown placeholder and a bare one at the query's line", () => {
    expect(
      errors(`${HEAD}  - name: a
    prometheus:
      threshold: { op: "<", value: 1 }
      query: 'up{cluster="{{ .cluster.nme }}"}'
  - name: b
    prometheus:
      threshold: { op: "<", value: 1 }
      query: 'up > {{ .cluster.labels.limit }}'
  - name: c
    http:
      url: http://127.0.0.1/{{ .cluster.label.env }}
`),
    ).toEqual([
      `${PATH}:13:14 spec.gates[0].prometheus.query: unknown placeholder {{ .cluster.nme }}; use {{ .cluster.name }}, {{ .cluster.namespace }}, {{ .cluster.labels.<key> }} or {{ .cluster.properties.<name> }}`,
      `${PATH}:17:14 spec.gates[1].prometheus.query: placeholder {{ .cluster.labels.limit }} must be inside a "…" or '…' string, where its value is escaped (cluster="{{ .cluster.name }}"), and not right after a backslash`,
      `${PATH}:20:12 spec.gates[2].http.url: unknown placeholder {{ .cluster.label.env }}; use {{ .cluster.name }}, {{ .cluster.namespace }}, {{ .cluster.labels.<key> }} or {{ .cluster.properties.<name> }}`,
    ]);
  });

  it("reports each bad field of a gate", () => {
    expect(
      errors(`${HEAD}  - name: Bad_Name
    prometheus:
      url: ftp://prometheus
      query: up
      threshold: { op: "=<", value: .inf }
      onNoData: Skip
  - name: both
    prometheus: { query: up, threshold: { op: "<", value: 1 } }
    http: { url: "http://x/" }
  - name: neither
  - name: probes
    http:
      url: http://x/
      expectStatus: [200, 700]
      successes: 0
      maxLatency: 2 seconds
`),
    ).toEqual([
      `${PATH}:10:11 spec.gates[0].name: must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`,
      `${PATH}:12:12 spec.gates[0].prometheus.url: must be an http or https URL`,
      `${PATH}:14:24 spec.gates[0].prometheus.threshold.op: must be one of < <= > >= == !=`,
      `${PATH}:14:37 spec.gates[0].prometheus.threshold.value: must be a finite number`,
      `${PATH}:15:17 spec.gates[0].prometheus.onNoData: must be Fail or Pass`,
      `${PATH}:16:5 spec.gates[1]: a gate needs exactly one of prometheus or http`,
      `${PATH}:19:5 spec.gates[2]: a gate needs exactly one of prometheus or http`,
      `${PATH}:23:27 spec.gates[3].http.expectStatus[1]: must be an HTTP status code (100-599)`,
      `${PATH}:24:18 spec.gates[3].http.successes: too small: expected number to be >=1`,
      `${PATH}:25:19 spec.gates[3].http.maxLatency: must be a duration such as 30s, 10m or 1h30m`,
    ]);
  });

  it("refuses a gate named twice, a wave the policy lacks, a timeout too short, more than 16 gates", () => {
    const gate = (name: string) => `  - name: ${name}\n    http: { url: "http://127.0.0.1/" }\n`;
    expect(
      errors(`${HEAD}${gate("a")}${gate("a")}  - name: b
    waves: [canary, remaining, staging]
    http: { url: "http://127.0.0.1/", successes: 10, interval: 5s, timeout: 30s }
`),
    ).toEqual([
      `${PATH}:12:11 spec.gates[1].name: gate "a" is named twice`,
      `${PATH}:15:32 spec.gates[2].waves[2]: "staging" is no wave of this policy (canary, remaining)`,
      `${PATH}:16:77 spec.gates[2].http.timeout: is too short for the probes: it must be at least (successes - 1) x interval + maxLatency`,
    ]);
    const many = Array.from({ length: 17 }, (_, i) => gate(`g${i}`)).join("");
    expect(errors(`${HEAD}${many}`)).toEqual([
      `${PATH}:10:3 spec.gates: too big: expected array to have <=16 items`,
    ]);
  });
});
