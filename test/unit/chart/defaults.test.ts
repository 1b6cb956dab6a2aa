import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import { runCli } from "../../support/cli.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { chartDir, runHelm, withValuesFile } from "../../support/helm.ts";
import { repoRoot } from "../../support/shared.ts";

// What the chart says by default, against what the CLI and the service do (helm template, no cluster):
// the fleet-file glob is the CLI's; the NOTES' example CR names a ClusterProfile namespace the service
// allows, and validate (with the config the chart renders) takes it; every key of that config is in the
// chart README's config.yaml block.

const README = join(chartDir, "README.md");
const work = mkdtempSync(join(tmpdir(), "knative-fleet-chart-defaults-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** `helm template` of the chart at `chart` as release kf in knative-fleet, with `values` and `extra` arguments. */
const template = (chart: string, values: object, ...extra: string[]) =>
  withValuesFile(values, (file) =>
    runHelm([
      "template",
      "kf",
      chart,
      "-n",
      "knative-fleet",
      "-f",
      file,
      "--set",
      `fleet.repository.url=${TEST_REPOSITORY}`,
      ...extra,
    ]),
  );

/** The chart's config.yaml (ConfigMap kf-knative-fleet) rendered with `values`. */
function renderedConfig(values: object): Record<string, unknown> {
  const result = template(chartDir, values);
  expect(result.status, result.stderr).toBe(0);
  const configMap = parseAllDocuments(result.stdout)
    .map(
      (doc) =>
        doc.toJSON() as { kind?: string; metadata?: { name: string }; data?: Record<string, string> } | null,
    )
    .find((o) => o?.kind === "ConfigMap" && o.metadata?.name === "kf-knative-fleet");
  return parse(configMap!.data!["config.yaml"]!) as Record<string, unknown>;
}

/**
 * NOTES.txt as `helm install` prints it, rendered by `helm template` alone: a copy of the chart where a
 * template renders the NOTES through `tpl` (helm template leaves NOTES.txt out, and install needs a cluster).
 */
function renderedNotes(values: object): string {
  const chart = join(work, `chart-${Math.random().toString(36).slice(2)}`);
  cpSync(chartDir, chart, { recursive: true });
  cpSync(join(chart, "templates", "NOTES.txt"), join(chart, "notes.txt"));
  writeFileSync(
    join(chart, "templates", "zz-notes.yaml"),
    '{{- $notes := tpl (.Files.Get "notes.txt") . }}\nnotes: {{ $notes | toJson }}\n',
  );
  try {
    const result = template(chart, values, "--show-only", "templates/zz-notes.yaml");
    expect(result.status, result.stderr).toBe(0);
    return (parse(result.stdout) as { notes: string }).notes;
  } finally {
    rmSync(chart, { recursive: true, force: true });
  }
}

/** The KnativeServing the NOTES show, for cluster `cluster`. */
function notesExample(notes: string, cluster: string): string {
  const start = notes.indexOf("     apiVersion: operator.knative.dev/v1beta1");
  const end = notes.indexOf("\n\n", start);
  return notes
    .slice(start, end)
    .split("\n")
    .map((line) => line.slice(5))
    .join("\n")
    .replaceAll("<cluster>", cluster);
}

describe("the chart's defaults, against the CLI and the service", { timeout: 60_000 }, () => {
  it("selects the fleet files the CLI selects without --config: .yaml and .yml", () => {
    const values = parse(readFileSync(join(chartDir, "values.yaml"), "utf8")) as {
      fleet: { repository: { pathGlob: string } };
    };
    expect(values.fleet.repository.pathGlob).toBe(DEFAULT_FILE_SELECTION.pathGlob);
    expect((renderedConfig({}).repository as { pathGlob: string }).pathGlob).toBe(
      DEFAULT_FILE_SELECTION.pathGlob,
    );
    expect(readFileSync(README, "utf8")).toContain(
      `| \`fleet.repository.pathGlob\` | \`${DEFAULT_FILE_SELECTION.pathGlob}\` |`,
    );
  });

  it("NOTES show a CR that the service admits: its ClusterProfile namespace is the one allowed", async () => {
    const notes = renderedNotes({});
    expect(notes).not.toContain("<ClusterProfile namespace>");
    const example = notesExample(notes, "spoke-1");
    expect(parse(example)).toMatchObject({
      spec: { clusterProfileRef: { name: "spoke-1", namespace: "fleet-system" } },
    });
    // validate, with the config the same values render, takes it as the service would.
    const repo = join(work, "fleet");
    await mkdir(join(repo, "clusters", "spoke-1"), { recursive: true });
    await writeFile(join(repo, "clusters", "spoke-1", "knative-serving.yaml"), example);
    const config = join(work, "config.yaml");
    await writeFile(config, JSON.stringify(renderedConfig({})));
    const run = await runCli("validate", "--config", config, repo);
    expect(run.stdout, run.stderr).toBe("1 file, 1 resource, 0 errors\n");
    expect(run.code).toBe(0);
    await rm(repo, { recursive: true, force: true });
  });

  it("NOTES name the first allowed namespace among several, and a placeholder only when any is allowed", () => {
    const several = notesExample(
      renderedNotes({ multicluster: { allowedClusterProfileNamespaces: ["team-a", "team-b"] } }),
      "c",
    );
    expect(several).toContain("namespace: team-a   # one of team-a, team-b");
    const any = notesExample(
      renderedNotes({ multicluster: { allowedClusterProfileNamespaces: ["*"] } }),
      "c",
    );
    expect(any).toContain("namespace: <ClusterProfile namespace>");
  });

  it("pulls both credential plugins at one cluster-inventory-api release, the one its README names", () => {
    const values = parse(readFileSync(join(chartDir, "values.yaml"), "utf8")) as {
      multicluster: { plugins: { name: string; image: string }[] };
    };
    const tags = values.multicluster.plugins.map(({ image }) => image.split(":").at(-1));
    expect(values.multicluster.plugins.map(({ image }) => image.split(":")[0])).toEqual([
      "registry.k8s.io/cluster-inventory-api/secretreader",
      "registry.k8s.io/cluster-inventory-api/kubeconfig-secretreader",
    ]);
    expect(new Set(tags).size).toBe(1);
    expect(readFileSync(README, "utf8")).toContain(
      `| \`multicluster.plugins[]\` | secretreader, kubeconfig-secretreader \`${tags[0]}\``,
    );
  });

  it("README and NOTES name the published chart and image of the chart's version, as the project README does", () => {
    const { version, appVersion } = parse(readFileSync(join(chartDir, "Chart.yaml"), "utf8")) as {
      version: string;
      appVersion: string;
    };
    const readme = readFileSync(README, "utf8");
    const notes = renderedNotes({});
    for (const text of [readme, notes]) expect(text).not.toMatch(/publishes no image/);
    expect(readme).toContain(
      `helm install knative-fleet oci://ghcr.io/knative-fleet/charts/knative-fleet --version ${version}`,
    );
    expect(readFileSync(join(repoRoot, "README.md"), "utf8")).toContain(
      `helm install knative-fleet oci://ghcr.io/knative-fleet/charts/knative-fleet --version ${version}`,
    );
    expect(notes).toContain(`The pod runs the image ghcr.io/knative-fleet/knative-fleet:${appVersion} `);
    expect(notes).toContain("Each release\n   publishes ghcr.io/knative-fleet/knative-fleet:<version>");
  });

  it("documents every top-level key of the config it renders in the README's config.yaml block", () => {
    const readme = readFileSync(README, "utf8");
    const section = readme.slice(readme.indexOf("### `config.yaml`"));
    const block = section.slice(
      section.indexOf("```yaml"),
      section.indexOf("```\n", section.indexOf("```yaml") + 7),
    );
    const documented = new Set([...block.matchAll(/^([A-Za-z]+):/gm)].map((m) => m[1]!));
    // Everything on: each optional block rendered.
    const config = renderedConfig({
      fleet: {
        commitStatus: { enabled: true, tokenSecretRef: { name: "token" } },
        notifications: { endpoints: [{ name: "team", urlSecretRef: { name: "hook", key: "url" } }] },
        rolloutPrometheusUrl: "http://prometheus:9090",
      },
      webhook: { enabled: true, secretRef: { name: "webhook" } },
      tenancy: { crNamespaces: ["knative-fleet"] },
    });
    const missing = Object.keys(config).filter((key) => !documented.has(key));
    expect(missing).toEqual([]);
  });
});
