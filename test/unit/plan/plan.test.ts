import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ALLOW_UNKNOWN_SETTINGS_ANNOTATION } from "../../../src/api/labels.ts";
import { DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import { describeRef } from "../../../src/kube/object.ts";
import { PLAN_MARKER, renderMarkdown } from "../../../src/plan/markdown.ts";
import { buildPlan } from "../../../src/plan/plan.ts";
import type { FleetPlan } from "../../../src/plan/report.ts";
import { readRevisions } from "../../../src/plan/revisions.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { DEFAULT_FLEET_SETTINGS } from "../../../src/sync/settings.ts";
import { SCHEMA_VERSION } from "../../../src/text/schema-version.ts";
import { runCli } from "../../support/cli.ts";
import { crText } from "../../support/fleet-files.ts";
import type { FleetRepo } from "../../support/fleet-repo.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { fleetRepo, planJson, resourceOf, runPlan } from "./support.ts";

// Offline plans of real Git repositories with branches, rendered from the real releases of ../shared.

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
// Each command run parses the releases afresh (a second or so alone); the unit project runs its files in
// parallel, so a loaded machine needs more than the default five seconds.
const SLOW = { timeout: 60_000 };
const SERVING = "clusters/spoke-1/knative-serving.yaml";
const EVENTING = "clusters/spoke-2/knative-eventing.yaml";
const KOURIER = { ingress: { kourier: { enabled: true } } };

const serving = (spec: Record<string, unknown> = KOURIER, version = "1.21") =>
  crText({ name: "spoke-1-serving", cluster: "spoke-1", spec, version });
const eventing = (version = "1.21", spec: Record<string, unknown> = {}) =>
  crText({ kind: "KnativeEventing", name: "spoke-2-eventing", cluster: "spoke-2", version, spec });

/** A repository whose main holds Serving on spoke-1 and Eventing on spoke-2, and a branch with `change`. */
async function repoWith(change: Record<string, string | null>): Promise<FleetRepo> {
  const repo = await fleetRepo();
  await repo.commit("main", { [SERVING]: serving(), [EVENTING]: eventing() });
  await repo.commit("change", change);
  return repo;
}

async function planOf(repo: FleetRepo): Promise<FleetPlan> {
  const revisions = await readRevisions(repo.dir, { base: "main", head: "change" }, DEFAULT_FILE_SELECTION);
  return buildPlan(revisions, {
    releases,
    kodataDir: knativeReleasesDir(),
    settings: DEFAULT_FLEET_SETTINGS,
  });
}

const names = (refs: readonly { kind: string; name: string }[], kind: string) =>
  refs.filter((ref) => ref.kind === kind).map((ref) => ref.name);

describe("plan, offline", SLOW, () => {
  it("an added file: the CR's whole install is created, anchor and namespace first", async () => {
    const plan = await planOf(
      await repoWith({
        "clusters/spoke-3/knative-serving.yaml": crText({ name: "spoke-3-serving", cluster: "spoke-3" }),
      }),
    );
    expect(plan.files).toEqual([{ path: "clusters/spoke-3/knative-serving.yaml", change: "added" }]);
    const added = resourceOf(plan, "spoke-3-serving");
    expect(added).toMatchObject({
      cluster: "fleet-system/spoke-3",
      action: "create",
      source: "offline",
      version: { to: "1.21.3" },
      findings: [],
    });
    expect(added.offlineReason).toContain("no --kubeconfig");
    const { created, changed, deleted } = added.objects;
    expect(names(created, "Namespace")).toEqual(["knative-serving"]);
    expect(names(created, "ConfigMap")).toContain("knativeserving-spoke-3-serving-root-owner");
    expect(names(created, "Deployment")).toEqual(
      expect.arrayContaining(["activator", "controller", "webhook"]),
    );
    expect([changed, deleted]).toEqual([[], []]);
    expect(plan).toMatchObject({ errors: 0, warnings: 0 });
  });

  it("a changed file: field-level changes, and what the new release no longer has is pruned", async () => {
    const plan = await planOf(
      await repoWith({
        [SERVING]: serving(
          { ...KOURIER, config: { autoscaler: { "enable-scale-to-zero": "false" } } },
          "1.22",
        ),
      }),
    );
    const updated = resourceOf(plan, "spoke-1-serving");
    expect(updated).toMatchObject({
      action: "update",
      version: { from: "1.21.3", to: "1.22.1" },
      findings: [],
    });
    const byRef = new Map(updated.objects.changed.map((change) => [describeRef(change), change.fields]));
    expect(byRef.get("ConfigMap knative-serving/config-autoscaler")).toContainEqual({
      path: "data.enable-scale-to-zero",
      after: "false",
    });
    expect(byRef.get("Deployment.apps knative-serving/controller")).toContainEqual(
      expect.objectContaining({ path: "spec.template.spec.containers[name=controller].image" }),
    );
    expect(names(updated.objects.created, "Job")).toEqual(
      expect.arrayContaining(["storage-version-migration-serving-serving-1.22.1"]),
    );
    expect(names(updated.objects.deleted, "Job")).toEqual(
      expect.arrayContaining(["storage-version-migration-serving-serving-1.21.3"]),
    );
    // Eventing's file did not change: it is not in the plan.
    expect(plan.clusters.map((cluster) => cluster.cluster)).toEqual(["fleet-system/spoke-1"]);
    // The objects whose only change is the version label: a count per kind and the label's change once;
    // the particular changes keep their own diffs.
    const versionOnly = updated.objects.changed.filter((change) =>
      change.fields.every((field) => field.path === 'metadata.labels["app.kubernetes.io/version"]'),
    );
    expect(versionOnly.length).toBeGreaterThan(20);
    const text = renderMarkdown(plan);
    expect(text).toContain(`Only the version label changes on ${versionOnly.length} of them`);
    expect(text).toMatch(/^- ClusterRole\.rbac\.authorization\.k8s\.io: \d+$/m);
    expect(text).toContain(
      '- metadata.labels["app.kubernetes.io/version"]: "1.21.3"\n+ metadata.labels["app.kubernetes.io/version"]: "1.22.1"\n',
    );
    for (const quiet of versionOnly) expect(text).not.toContain(`\`${quiet.name}\``);
    expect(text).toContain("`ConfigMap knative-serving/config-autoscaler`");
    expect(text.split("\n").length).toBeLessThan(250);
  });

  it("a removed file: which cluster loses Knative and what FinalizeRemoteCluster deletes; CRDs stay", async () => {
    const plan = await planOf(await repoWith({ [EVENTING]: null }));
    const removed = resourceOf(plan, "spoke-2-eventing");
    expect(removed).toMatchObject({
      cluster: "fleet-system/spoke-2",
      action: "delete",
      version: { from: "1.21.4" },
      removal: { prune: "pruned" },
    });
    expect(removed.findings).toEqual([
      expect.objectContaining({ severity: "warning", code: "removes-knative" }),
    ]);
    const { deleted } = removed.objects;
    expect(names(deleted, "ClusterRole").length).toBeGreaterThan(10); // cluster-scoped: deleted by name
    expect(names(deleted, "ConfigMap")).toContain("knativeeventing-spoke-2-eventing-root-owner"); // the anchor
    expect(names(deleted, "Deployment")).toContain("eventing-controller"); // owned: garbage-collected
    expect(names(deleted, "CustomResourceDefinition")).toEqual([]);
    expect(names(removed.removal!.kept, "CustomResourceDefinition")).toContain(
      "brokers.eventing.knative.dev",
    );
    expect(names(removed.removal!.kept, "Namespace")).toEqual(["knative-eventing"]);
  });

  it("a removal the safeguards hold is flagged with the token that confirms it", async () => {
    const repo = await fleetRepo();
    const extra = "clusters/spoke-3/knative-serving.yaml";
    await repo.commit("main", {
      [SERVING]: serving(),
      [EVENTING]: eventing(),
      [extra]: crText({ name: "spoke-3-serving", cluster: "spoke-3" }),
    });
    await repo.commit("change", { [EVENTING]: null, [extra]: null });
    const plan = await planOf(repo);
    expect(plan.prune).toMatchObject({ state: "held", reason: "over-max-fraction" });
    const held = resourceOf(plan, "spoke-2-eventing");
    expect(held.removal).toMatchObject({ prune: "held", token: expect.stringMatching(/^[0-9a-f]{16}$/) });
    expect(held.findings).toContainEqual(
      expect.objectContaining({ code: "prune-held", severity: "warning" }),
    );
    expect(renderMarkdown(plan)).toContain("uninstalls KnativeEventing once a person confirms");
  });

  it("each upgrade of the window, one minor at a time: the versions, the new Jobs and the old ones pruned", async () => {
    for (const [from, to, fromRelease, toRelease] of [
      ["1.20", "1.21", "1.20.3", "1.21.3"],
      ["1.21", "1.22", "1.21.3", "1.22.1"],
      ["1.22", "1.23", "1.22.1", "1.23.0"],
    ] as const) {
      const repo = await fleetRepo();
      await repo.commit("main", { [SERVING]: serving(KOURIER, from) });
      await repo.commit("change", { [SERVING]: serving(KOURIER, to) });
      const step = resourceOf(await planOf(repo), "spoke-1-serving");
      expect(step).toMatchObject({
        action: "update",
        version: { from: fromRelease, to: toRelease },
        findings: [],
      });
      expect(names(step.objects.created, "Job")).toEqual(
        expect.arrayContaining([`storage-version-migration-serving-serving-${toRelease}`]),
      );
      expect(names(step.objects.deleted, "Job")).toEqual(
        expect.arrayContaining([`storage-version-migration-serving-serving-${fromRelease}`]),
      );
      expect(
        step.objects.deleted.filter((ref) => ref.kind !== "Job"),
        `${from} -> ${to}`,
      ).toEqual([]);
    }
  });

  it("a cluster whose ClusterProfile reports a Kubernetes older than the release needs: an error, nothing planned", async () => {
    const repo = await repoWith({ [SERVING]: serving(KOURIER, "1.22"), [EVENTING]: eventing("1.22") });
    const revisions = await readRevisions(repo.dir, { base: "main", head: "change" }, DEFAULT_FILE_SELECTION);
    const plan = await buildPlan(revisions, {
      releases,
      settings: DEFAULT_FLEET_SETTINGS,
      inventory: {
        source: "snapshot",
        inventory: { clusters: [], decisions: [] },
        kubernetesVersions: new Map([
          ["fleet-system/spoke-1", "v1.33.4"], // 1.22 needs v1.34.0
          ["fleet-system/spoke-2", "v1.34.0"],
        ]),
      },
    });
    const refused = resourceOf(plan, "spoke-1-serving");
    expect(refused.version).toEqual({ from: "1.21.3", to: "1.22.1" });
    expect(refused.findings).toEqual([
      {
        severity: "error",
        code: "kubernetes-version",
        message:
          "Kubernetes v1.33.4 is older than v1.34.0, the oldest Kubernetes Knative 1.22.1 runs on " +
          "(knative.dev/pkg's minimum version check), by the cluster's ClusterProfile " +
          "(status.version.kubernetes). The hub controller applies nothing to it (InstallSucceeded=False, " +
          "KubernetesVersionUnsupported) until it is upgraded.",
      },
    ]);
    expect(refused.objects).toEqual({ created: [], changed: [], deleted: [] });
    expect(resourceOf(plan, "spoke-2-eventing").findings).toEqual([]);
    expect(plan.errors).toBe(1);
  });

  it("a version two minors ahead is an upgrade chain: the plan is its first step, and says what follows", async () => {
    const plan = await planOf(await repoWith({ [EVENTING]: eventing("1.23") }));
    const chained = resourceOf(plan, "spoke-2-eventing");
    expect(chained.version).toEqual({ from: "1.21.4", to: "1.22.2" });
    expect(chained.chain).toEqual({ minors: ["1.21", "1.22", "1.23"], step: "1.22", target: "1.23" });
    expect(chained.findings).toEqual([]);
    expect(chained.objects.changed.length).toBeGreaterThan(0);
    expect(plan.errors).toBe(0);
    expect(renderMarkdown(plan)).toContain(
      "1.21.4 → 1.22.2, step of the upgrade chain 1.21 → **1.22** → 1.23 to 1.23 (one minor per rollout)",
    );
  });

  it("a jump of more than one minor down is an error, and nothing is planned on the cluster", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", { [SERVING]: serving(), [EVENTING]: eventing("1.23") });
    await repo.commit("change", { [EVENTING]: eventing("1.21") });
    const plan = await planOf(repo);
    const jumped = resourceOf(plan, "spoke-2-eventing");
    expect(jumped.version).toEqual({ from: "1.23.0", to: "1.21.4" });
    expect(jumped.findings).toEqual([expect.objectContaining({ severity: "error", code: "version-jump" })]);
    expect(jumped.findings[0]!.message).toContain("multiple MINOR versions");
    expect(jumped.objects).toEqual({ created: [], changed: [], deleted: [] });
    expect(plan.errors).toBe(1);
  });

  it("an unknown version is an error naming the versions there are", async () => {
    const plan = await planOf(await repoWith({ [EVENTING]: eventing("1.30") }));
    const finding = resourceOf(plan, "spoke-2-eventing").findings[0];
    expect(finding).toMatchObject({ severity: "error", code: "version-unknown" });
    expect(finding?.message).toBe(
      "Knative Eventing 1.30 is not available (available: 1.23.0, 1.22.2, 1.21.4, 1.20.3)",
    );
  });

  it("an ingress change is a warning", async () => {
    const plan = await planOf(
      await repoWith({ [SERVING]: serving({ ingress: { istio: { enabled: true } } }) }),
    );
    const finding = resourceOf(plan, "spoke-1-serving").findings[0];
    expect(finding).toMatchObject({ severity: "warning", code: "ingress-change" });
    expect(finding?.message).toContain("from kourier to istio");
  });

  it("moving a CR to another cluster is refused by the hub: an error, nothing planned", async () => {
    const moved = serving().replace("name: spoke-1\n", "name: spoke-9\n");
    const plan = await planOf(await repoWith({ [SERVING]: moved }));
    expect(resourceOf(plan, "spoke-1-serving")).toMatchObject({
      cluster: "fleet-system/spoke-1",
      findings: [expect.objectContaining({ code: "cluster-immutable" })],
    });
  });

  it("masks credential-like config values in the diff", async () => {
    // A key no release documents (as a newer minor's or a plugin's might be), kept by the annotation.
    const text = (token: string) =>
      crText({
        name: "spoke-1-serving",
        cluster: "spoke-1",
        version: "1.21",
        spec: { ...KOURIER, config: { tracing: { "bearer-token": token } } },
        annotations: { [ALLOW_UNKNOWN_SETTINGS_ANNOTATION]: "spec.config.tracing.bearer-token" },
      });
    const repo = await fleetRepo();
    await repo.commit("main", { [SERVING]: text("old-s3cr3t") });
    await repo.commit("change", { [SERVING]: text("new-s3cr3t") });
    const plan = await planOf(repo);
    const shown = `${JSON.stringify(plan)}${renderMarkdown(plan)}`;
    expect(shown).not.toContain("s3cr3t");
    expect(resourceOf(plan, "spoke-1-serving").objects.changed).toContainEqual(
      expect.objectContaining({
        name: "config-tracing",
        fields: [{ path: "data.bearer-token", before: "(masked)", after: "(masked)" }],
      }),
    );
  });
});

describe("knative-fleet plan (the command)", SLOW, () => {
  it("prints the same Markdown on every run: marker, summary table, one collapsed section per cluster", async () => {
    const repo = await repoWith({ [SERVING]: serving(KOURIER, "1.22"), [EVENTING]: null });
    const first = await runPlan("--repo", repo.dir, "--base", "main", "--head", "change");
    const second = await runPlan("--repo", repo.dir, "--base", "main", "--head", "change");
    expect(first.code).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    const text = first.stdout;
    expect(text.startsWith(`${PLAN_MARKER}\n`)).toBe(true);
    expect(text).toContain("**Offline** (no --kubeconfig or --context): no cluster was read;");
    // Said once, at the top: neither CR's section repeats it.
    expect(text.match(/offline/gi)).toHaveLength(1);
    expect(text).not.toContain("no --kubeconfig was given");
    expect(text).toContain("| Cluster | CR | Action | Objects +/~/- |");
    expect(text).toMatch(
      /\| fleet-system\/spoke-2 \| KnativeEventing knative-fleet\/spoke-2-eventing \| ⚠️ \*\*delete\*\*/,
    );
    expect(text.match(/<details>/g)).toHaveLength(2);
    expect(text).not.toMatch(/\d{4}-\d\d-\d\dT\d\d:/); // no timestamps
  });

  it("-o json carries the same data, schemaVersion first; --output-file writes the file instead of stdout", async () => {
    const repo = await repoWith({ [SERVING]: serving(KOURIER, "1.22") });
    const refs = ["--repo", repo.dir, "--base", "main", "--head", "change"];
    const { code, plan } = await planJson(...refs);
    expect(code).toBe(0);
    expect(Object.keys(plan)[0]).toBe("schemaVersion");
    expect(plan).toMatchObject({
      schemaVersion: SCHEMA_VERSION,
      source: "offline",
      errors: 0,
      base: { ref: "main" },
      head: { ref: "change" },
    });
    const output = join(repo.dir, "plan.md");
    expect(await runPlan(...refs, "--output-file", output)).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(await readFile(output, "utf8")).toBe(renderMarkdown(plan));
    // --output is the format, as kubectl spells it: a file name there is refused, never written to.
    const asFile = await runPlan(...refs, "--output", output);
    expect(asFile).toMatchObject({ code: 2, stdout: "" });
    expect(asFile.stderr).toContain(`not "${output}" (--output-file FILE writes to a file)`);
    const json = join(repo.dir, "json");
    expect(await runPlan(...refs, "--output", "json", "--output-file", json)).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(JSON.parse(await readFile(json, "utf8"))).toEqual(plan);
  });

  it("offline, --cluster-profiles gives each cluster's Kubernetes: one too old for head's release fails the plan", async () => {
    const repo = await repoWith({ [SERVING]: serving(KOURIER, "1.22"), [EVENTING]: eventing("1.22") });
    const profile = (name: string, kubernetes: string) =>
      `- { apiVersion: multicluster.x-k8s.io/v1alpha1, kind: ClusterProfile, metadata: { name: ${name}, ` +
      `namespace: fleet-system }, spec: { clusterManager: { name: m } }, status: { version: { kubernetes: ${kubernetes} } } }`;
    const snapshot = join(repo.dir, "inventory.yaml");
    await writeFile(
      snapshot,
      `apiVersion: v1\nkind: List\nitems:\n${profile("spoke-1", "v1.35.4")}\n${profile("spoke-2", "v1.33.9")}\n`,
    );
    const refs = ["--repo", repo.dir, "--base", "main", "--head", "change", "--cluster-profiles", snapshot];
    const { code, plan } = await planJson(...refs);
    expect(code).toBe(1);
    expect(resourceOf(plan, "spoke-1-serving").findings).toEqual([]);
    expect(resourceOf(plan, "spoke-2-eventing").findings).toEqual([
      expect.objectContaining({ code: "kubernetes-version" }),
    ]);
    expect((await runPlan(...refs)).stdout).toContain(
      "Kubernetes v1.33.9 is older than v1.34.0, the oldest Kubernetes Knative 1.22.2 runs on",
    );
  });

  it("exits 1 on an invalid file and prints the diagnostics exactly as validate does", async () => {
    const repo = await repoWith({ [SERVING]: serving().replace("version:", "verison:") });
    const { code, stdout } = await runPlan("--repo", repo.dir, "--base", "main", "--head", "change");
    expect(code).toBe(1);
    // The branch is checked out: validate reads head's files from the working tree.
    const validate = await runCli("validate", repo.dir);
    const diagnostic = validate.stdout.split("\n")[0]!;
    expect(diagnostic).toMatch(
      /^clusters\/spoke-1\/knative-serving\.yaml:\d+:\d+ spec\.verison: unrecognized key; did you mean version\?$/,
    );
    expect(stdout).toContain(diagnostic);
    expect(stdout).toContain("⛔ **blocked**");
  });

  it("warns of YAML files head adds or changes that the glob leaves out, as validate lists them", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", { [SERVING]: serving(), "charts/values.yaml": "replicas: 1\n" });
    // A CR put in cluster/ (the glob is clusters/**) and a new CI file; the chart's file is unchanged.
    const stray = "cluster/spoke-3/knative-serving.yaml";
    await repo.commit("change", {
      [stray]: crText({ name: "spoke-3-serving", cluster: "spoke-3" }),
      "ci/pipeline.yaml": "steps: []\n",
    });
    const plan = await planOf(repo);
    expect(plan.findings.filter((f) => f.code === "files-left-out")).toEqual([
      {
        subject: "change",
        severity: "warning",
        code: "files-left-out",
        message: `head adds or changes 2 YAML files that ${DEFAULT_FILE_SELECTION.pathGlob} leaves out, so nothing reads them: ci/pipeline.yaml, ${stray}`,
      },
    ]);
    expect(plan.changes).toBe(0);
    const { stdout } = await runPlan("--repo", repo.dir, "--base", "main", "--head", "change");
    expect(stdout).toContain(stray);
    const validate = await runCli("validate", repo.dir);
    expect(validate.stderr).toContain(stray);
  });

  it("exits 2 on usage errors, saying what is missing", async () => {
    const repo = await repoWith({});
    const refs = ["--base", "main", "--head", "change"];
    const unknownRef = await runPlan("--repo", repo.dir, "--base", "main", "--head", "nope");
    expect(unknownRef).toMatchObject({ code: 2, stdout: "" });
    expect(unknownRef.stderr).toContain('no commit "nope"');
    expect((await runPlan("--repo", repo.dir, ...refs, "-o", "yaml")).stderr).toContain(
      '-o/--output is the output format, markdown, json, not "yaml"',
    );
    const noProviderHub = await runPlan(
      "--repo",
      repo.dir,
      ...refs,
      "--clusterprofile-provider-file",
      "x.json",
    );
    expect(noProviderHub).toMatchObject({ code: 2 });
    expect((await runPlan("--repo", "/nonexistent", ...refs)).stderr).toContain("not in a Git repository");
    expect((await runPlan(...refs)).stderr).toContain("--repo is required");
  });
});
