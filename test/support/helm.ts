import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../../src/kube/object.ts";
import { ensureTools, toolPath } from "../sandbox/tools.ts";
import { TEST_REPOSITORY } from "./fleet-files.ts";
import { repoRoot } from "./shared.ts";

/** The chart under test and the real `helm` (v3, built from Go by the sandbox tools). */
export const chartDir = join(repoRoot, "charts", "knative-fleet");

let helmPath: string | undefined;
function helmBinary(): string {
  helmPath ??= toolPath(ensureTools(), "helm");
  return helmPath;
}

export interface HelmResult {
  status: number;
  stdout: string;
  stderr: string;
}

export function runHelm(args: readonly string[]): HelmResult {
  const result = spawnSync(helmBinary(), args, { encoding: "utf8", timeout: 60_000 });
  if (result.error) throw result.error;
  return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}

/** Runs helm with the values written to a file (`-f`), as a user's values file would be. */
export function withValuesFile<T>(values: object, run: (file: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), "knative-fleet-chart-"));
  try {
    const file = join(dir, "values.yaml");
    writeFileSync(file, JSON.stringify(values));
    return run(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface RenderOptions {
  values?: object;
  /** The hub's Kubernetes version as .Capabilities.KubeVersion sees it. */
  kubeVersion?: string;
  release?: string;
  namespace?: string;
  /** Sets fleet.repository.url to TEST_REPOSITORY (the one required value); default true. */
  withRepository?: boolean;
}

export function templateArgs(options: RenderOptions, valuesFile: string): string[] {
  return [
    "template",
    options.release ?? "kf",
    chartDir,
    "--namespace",
    options.namespace ?? "knative-fleet",
    "--kube-version",
    options.kubeVersion ?? "1.35.0",
    "-f",
    valuesFile,
    ...(options.withRepository === false ? [] : ["--set", `fleet.repository.url=${TEST_REPOSITORY}`]),
  ];
}

/** `helm template`: the rendered objects, or an Error carrying helm's message. */
export function renderChart(options: RenderOptions = {}): KubeObject[] {
  const result = withValuesFile(options.values ?? {}, (file) => runHelm(templateArgs(options, file)));
  if (result.status !== 0) throw new Error(`helm template failed: ${result.stderr.trim()}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJSON() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null);
}

/** `helm template` that must fail: helm's error output. */
export function renderFailure(options: RenderOptions): string {
  const result = withValuesFile(options.values ?? {}, (file) => runHelm(templateArgs(options, file)));
  if (result.status === 0) throw new Error("helm template succeeded where it must fail");
  return result.stderr;
}

export type { KubeObject };

export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

export interface RbacRole extends KubeObject {
  rules: PolicyRule[];
}

export interface RbacBinding extends KubeObject {
  roleRef: { apiGroup: string; kind: string; name: string };
  subjects: { kind: string; name: string; namespace?: string }[];
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

export interface Probe {
  httpGet?: { path: string; port: string | number };
}

export interface Container {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  env?: { name: string }[];
  ports?: { name: string; containerPort: number }[];
  securityContext?: Record<string, unknown>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  volumeMounts?: VolumeMount[];
}

export interface Volume {
  name: string;
  emptyDir?: { sizeLimit?: string };
  image?: { reference: string; pullPolicy?: string };
  configMap?: { name: string; items?: { key: string; path: string }[] };
  secret?: { secretName: string; items?: { key: string; path: string }[] };
}

export interface PodSpec {
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: Container[];
  initContainers?: Container[];
  volumes: Volume[];
}

export interface Deployment extends KubeObject {
  spec: {
    replicas: number;
    strategy: { type: string };
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

/** The one object of a kind (and name, when given); fails the test when there is not exactly one. */
export function only<T extends KubeObject>(objects: readonly KubeObject[], kind: string, name?: string): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  if (found.length !== 1) {
    const names = objects.filter((o) => o.kind === kind).map((o) => o.metadata.name);
    throw new Error(
      `expected one ${kind}${name ? ` ${name}` : ""}, found ${found.length} (${kind}s: ${names})`,
    );
  }
  return found[0] as T;
}

export const ofKind = <T extends KubeObject>(objects: readonly KubeObject[], kind: string): T[] =>
  objects.filter((o) => o.kind === kind) as T[];

/** The chart's alert rules as a plain Prometheus rules file, rendered with the defaults and release knative-fleet. */
export const PLAIN_RULES_FILE = "docs/monitoring/knative-fleet.rules.yaml";

/** What PLAIN_RULES_FILE holds: `npm run generate:monitoring` writes it, a chart test keeps it in sync. */
export function plainRulesFile(): string {
  const objects = renderChart({
    release: "knative-fleet",
    namespace: "knative-fleet",
    values: { alerts: { configMap: { enabled: true } } },
  });
  const configMap = only(objects, "ConfigMap", "knative-fleet-alerts") as KubeObject & {
    data: Record<string, string>;
  };
  return (
    "# Generated from charts/knative-fleet/templates/_alerts.tpl with the chart's default values (release\n" +
    '# knative-fleet, so job="knative-fleet") by `npm run generate:monitoring`; do not edit. The chart renders the\n' +
    "# same rules as a PrometheusRule (alerts.prometheusRule.enabled) or a ConfigMap (alerts.configMap.enabled).\n" +
    configMap.data["knative-fleet.rules.yaml"]
  );
}
