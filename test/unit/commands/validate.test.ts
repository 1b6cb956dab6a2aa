import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ValidateReport } from "../../../src/commands/validate.ts";
import { runCli } from "../../support/cli.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// validate as CI and pre-commit run it: the release lookup plan and run use, skipped checks said out loud,
// placements expanded from a ClusterProfile snapshot, each finding at its field, and the machine formats.

const run = (...argv: string[]) => runCli("validate", ...argv);

const serving = (cluster: string, spec = "") => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: ${cluster}-serving
spec:
  clusterProfileRef: {name: ${cluster}, namespace: fleet-system}
${spec}`;

/** A placement selecting by labels, its template at `version` (line 10, column 16). */
const byLabels = (version: string) => `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata:
  name: prod
spec:
  clusterSelectorTerms:
    - labelSelector: {matchLabels: {env: prod}}
  template:
    spec:
      version: "${version}"
`;

const SNAPSHOT = `apiVersion: v1
kind: List
items:
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata: { name: eu-1, namespace: fleet-system, labels: { env: prod } }
  spec: { clusterManager: { name: ocm } }
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata: { name: us-1, namespace: fleet-system, labels: { env: dev } }
  spec: { clusterManager: { name: ocm } }
`;

describe("knative-fleet validate", () => {
  let dir = "";
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-validate-"));
    vi.stubEnv("KO_DATA_PATH", "");
    vi.stubEnv("XDG_CACHE_HOME", join(dir, "cache"));
  });
  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(dir, { recursive: true, force: true });
  });

  async function write(files: Record<string, string>, root = join(dir, "repo")) {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(root, path)), { recursive: true });
      await writeFile(join(root, path), text);
    }
    return root;
  }

  it("finds the releases as plan does: --kodata, else $KO_DATA_PATH, else the fetched cache; none is said", async () => {
    const repo = await write({ "clusters/a.yaml": serving("a", '  version: "1.99"\n') });
    const none = await run(repo);
    expect(none.code).toBe(0);
    expect(none.stderr).toContain(
      "knative-fleet validate: skipped: no release manifests found (--kodata, $KO_DATA_PATH, the fetched cache): spec.version and the settings a release knows are not checked\n",
    );
    const refused = "clusters/a.yaml:7:3 spec.version: KnativeServing 1.99 is not available";
    vi.stubEnv("KO_DATA_PATH", knativeReleasesDir());
    expect((await run(repo)).stdout).toContain(refused);
    vi.stubEnv("KO_DATA_PATH", "");
    await mkdir(join(dir, "cache", "knative-fleet"), { recursive: true });
    await symlink(knativeReleasesDir(), join(dir, "cache", "knative-fleet", "kodata"));
    const cached = await run(repo);
    expect(cached.code).toBe(1);
    expect(cached.stdout).toContain(refused);
    expect(cached.stderr).not.toContain("skipped");
    vi.stubEnv("KO_DATA_PATH", join(dir, "nowhere"));
    expect(await run(repo)).toMatchObject({ code: 2, stderr: expect.stringContaining("KO_DATA_PATH") });
  });

  it("checks a placement's template version whether or not it is expanded, and says what it did not expand", async () => {
    const repo = await write({ "clusters/prod.yaml": byLabels("1.99") });
    const result = await run("--kodata", knativeReleasesDir(), repo);
    expect(result.code).toBe(1);
    expect(result.stdout.split("\n")[0]).toMatch(
      /^clusters\/prod\.yaml:10:16 spec\.template\.spec\.version: KnativeServing 1\.99 is not available/,
    );
    expect(result.stdout).toContain("1 file, 0 resources, 1 placement, 1 error\n");
    expect(result.stderr).toContain(
      "knative-fleet validate: skipped: clusters/prod.yaml:1: KnativeServingPlacement knative-fleet/prod is not expanded: the hub's ClusterProfiles are not known yet; give --cluster-profiles to check its CRs and conflicts\n",
    );
    await write({ "clusters/prod.yaml": byLabels("1.21") });
    expect((await run("--kodata", knativeReleasesDir(), repo)).code).toBe(0);
  });

  it("with --cluster-profiles (a file or a folder) expands placements and finds their conflicts", async () => {
    const repo = await write({
      "clusters/prod.yaml": byLabels("1.21"),
      "clusters/eu-1/serving.yaml": serving("eu-1"),
    });
    await write({ "profiles.yaml": SNAPSHOT }, join(dir, "inventory"));
    for (const profiles of [join(dir, "inventory", "profiles.yaml"), join(dir, "inventory")]) {
      const result = await run("--cluster-profiles", profiles, repo);
      expect(result.code).toBe(1);
      expect(result.stdout).toMatch(/^clusters\/eu-1\/serving\.yaml:\d+:\d+ .*fleet-system\/eu-1/m);
      expect(result.stderr).not.toContain("is not expanded");
    }
    await rm(join(repo, "clusters/eu-1"), { recursive: true });
    expect(await run("--cluster-profiles", join(dir, "inventory"), repo)).toMatchObject({
      code: 0,
      stdout: "1 file, 1 resource, 1 placement, 0 errors\n",
    });
    await write({ "bad.yaml": "kind: Secret\n" }, join(dir, "inventory"));
    expect(await run("--cluster-profiles", join(dir, "inventory"), repo)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('"Secret" is neither a ClusterProfile nor a PlacementDecision'),
    });
  });

  it("a placement's CRs refused by the admission: one finding at the placement's field, naming how many", async () => {
    const repo = await write({
      "clusters/prod.yaml": byLabels("1.21").replace("  name: prod\n", "  name: prod\n  namespace: team-b\n"),
    });
    const snapshot = SNAPSHOT.replace("labels: { env: dev }", "labels: { env: prod }");
    await write({ "profiles.yaml": snapshot }, join(dir, "inventory"));
    const { stdout } = await run("--cluster-profiles", join(dir, "inventory"), repo);
    expect(stdout.split("\n")[0]).toMatch(
      /^clusters\/prod\.yaml:5:3 metadata\.namespace: team-b is not a hub namespace .*; the hub refuses KnativeServing team-b\/prod-eu-1 and 1 more$/,
    );
  });

  it("with releases, checks what a release knows a CR may set, as plan does: errors at their key, warnings apart", async () => {
    const repo = await write({
      "clusters/a.yaml": serving(
        "a",
        '  version: "1.21"\n  config:\n    autoscalr:\n      enable-scale-to-zero: "false"\n',
      ),
      "clusters/prod.yaml": `${byLabels("1.21")}      high-availability: {replicas: 2}\n`,
    });
    await write(
      { "profiles.yaml": SNAPSHOT.replace("labels: { env: dev }", "labels: { env: prod }") },
      join(dir, "inventory"),
    );
    const args = ["--kodata", knativeReleasesDir(), "--cluster-profiles", join(dir, "inventory"), repo];
    const { code, stdout } = await run(...args);
    expect(code).toBe(1);
    expect(stdout.split("\n")[0]).toMatch(
      /^clusters\/a\.yaml:9:5 spec\.config\.autoscalr: no ConfigMap config-autoscalr .*did you mean autoscaler\?/,
    );
    const report = JSON.parse((await run("-o", "json", ...args)).stdout) as ValidateReport;
    expect(report.errors).toBe(1);
    // The two CRs the placement makes warn at its one field (activator's and webhook's PDB): each once.
    const warnings = report.diagnostics.filter((d) => d.severity === "warning");
    expect(warnings.map((d) => [d.file, d.line, d.field, d.message.split(" ")[1]])).toEqual([
      ["clusters/prod.yaml", 11, "spec.template.spec.high-availability.replicas", "activator-pdb"],
      ["clusters/prod.yaml", 11, "spec.template.spec.high-availability.replicas", "webhook-pdb"],
    ]);
    expect(report.warnings).toBe(2);
    expect(stdout).toMatch(
      /^clusters\/prod\.yaml:11:\d+ spec\.template\.spec\.high-availability\.replicas: warning: /m,
    );
    expect(stdout).toContain("2 files, 3 resources, 1 placement, 1 error, 2 warnings\n");
    const without = await run(repo);
    expect(without.stdout).not.toContain("autoscalr");
    expect(without.stderr).toContain("settings a release knows are not checked");
  });

  it("-o json: schemaVersion, every finding with its severity, the skipped checks and the counts", async () => {
    const repo = await write({
      "clusters/a.yaml": serving("a", "  registry:\n    overide: {}\n"),
      "clusters/b.yaml": serving("b"),
      "clusters/prod.yaml": byLabels("1.21"),
    });
    const { code, stdout, stderr } = await run("-o", "json", repo);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as ValidateReport;
    expect(report).toEqual({
      schemaVersion: 1,
      root: repo,
      files: 3,
      resources: 1,
      placements: 1,
      errors: 1,
      warnings: 0,
      diagnostics: [
        {
          file: "clusters/a.yaml",
          line: 8,
          column: 5,
          field: "spec.registry.overide",
          message: "unrecognized key; did you mean override?",
          severity: "error",
        },
      ],
      omitted: 0,
      skipped: [
        { check: "versions", message: expect.stringContaining("no release manifests found") },
        {
          check: "placement",
          file: "clusters/prod.yaml",
          line: 1,
          message: expect.stringContaining("give --cluster-profiles"),
        },
      ],
    });
    expect(stderr).toContain("knative-fleet validate: 3 files, 1 resource, 1 placement, 1 error\n");
  });

  it("-o github: workflow commands at file, line and column, escaped as the runner reads them", async () => {
    const repo = await write({ "clusters/a,b:c.yaml": serving("a", "  registry:\n    overide: {}\n") });
    const { code, stdout } = await run("-o", "github", repo);
    expect(code).toBe(1);
    expect(stdout).toBe(
      "::error file=clusters/a%2Cb%3Ac.yaml,line=8,col=5,title=knative-fleet%3A spec.registry.overide::unrecognized key; did you mean override?\n" +
        "::notice title=knative-fleet validate%3A check skipped::no release manifests found (--kodata, $KO_DATA_PATH, the fetched cache): spec.version and the settings a release knows are not checked\n" +
        "1 file, 0 resources, 1 error\n",
    );
    await write({ "clusters/a,b:c.yaml": "a: 100%\nb: [\n" });
    const broken = await run("-o", "github", repo);
    expect(broken.stdout.split("\n")[0]).toMatch(
      /^::error file=clusters\/a%2Cb%3Ac\.yaml,line=\d+,col=\d+,title=knative-fleet::[^\n]+$/,
    );
  });

  it("-o gitlab: a Code Quality report whose fingerprints survive a line moving", async () => {
    const repo = await write({ "clusters/a.yaml": serving("a", "  registry:\n    overide: {}\n") });
    const { code, stdout } = await run("-o", "gitlab", repo);
    expect(code).toBe(1);
    const [issue, ...rest] = JSON.parse(stdout);
    expect(rest).toEqual([]);
    expect(issue).toEqual({
      description: "spec.registry.overide: unrecognized key; did you mean override?",
      check_name: "knative-fleet/error",
      fingerprint: expect.stringMatching(/^[0-9a-f]{32}$/),
      severity: "major",
      location: {
        path: "clusters/a.yaml",
        lines: { begin: 8 },
        positions: { begin: { line: 8, column: 5 } },
      },
    });
    await write({ "clusters/a.yaml": `# moved\n${serving("a", "  registry:\n    overide: {}\n")}` });
    const [moved] = JSON.parse((await run("-o", "gitlab", repo)).stdout);
    expect(moved.location.lines.begin).toBe(9);
    expect(moved.fingerprint).toBe(issue.fingerprint);
    expect((await run("-o", "yaml", repo)).code).toBe(2);
  });

  it("given files (as pre-commit passes them): reports only those, in their repository's paths, with the whole tree's cross-file checks", async () => {
    const repo = await write({
      ".git/HEAD": "ref: refs/heads/main\n",
      "clusters/a.yaml": serving("a"),
      "clusters/copy.yaml": serving("a"),
      "clusters/broken.yaml": "a: [\n",
      "clusters/b.yaml": serving("b"),
      "clusters/prod.yaml": byLabels("1.21"),
      "docs/example.yaml": "a: 1\n",
    });
    const copy = await run(join(repo, "clusters/copy.yaml"));
    expect(copy.code).toBe(1);
    expect(copy.stdout).toMatch(/^clusters\/copy\.yaml:\d+:\d+ .*also declared at clusters\/a\.yaml/);
    expect(copy.stdout).not.toContain("broken.yaml");
    expect(copy.stderr).not.toContain("prod.yaml");
    expect(copy.stdout).toMatch(/\n1 file, 0 resources, 1 error\n$/);
    expect(await run(join(repo, "clusters/b.yaml"), join(repo, "docs/example.yaml"))).toMatchObject({
      code: 0,
      stdout: "1 file, 1 resource, 0 errors\n",
      stderr: expect.stringContaining(
        "1 YAML file is not a fleet file (clusters/**/*.{yaml,yml} leaves it out): docs/example.yaml",
      ),
    });
    expect((await run(join(repo, "clusters/b.yaml"), repo)).code).toBe(2);
  });

  // Without an inventory a placement that selects by labels is not expanded: the settings check then takes
  // its template and each override as they are, so a typo there fails validate too.
  it("an unexpanded placement's settings: the template's and the override's typos, at their fields", async () => {
    const repo = await write({
      "clusters/placements/prod.yaml": `${byLabels("1.21")}      config:
        autoscalr: {enable-scale-to-zero: "false"}
  overrides:
    - clusterSelector: {labelSelector: {matchLabels: {ring: canary}}}
      patch:
        workloads: [{name: activatr, replicas: 2}]
`,
    });
    const { code, stdout } = await runCli("validate", "-o", "json", "--kodata", knativeReleasesDir(), repo);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as ValidateReport;
    expect(
      report.diagnostics.map((d) => [d.line, d.column, d.field, /did you mean (\S+)\?/.exec(d.message)?.[1]]),
    ).toEqual([
      [12, 9, "spec.template.spec.config.autoscalr", "autoscaler"],
      [16, 28, "spec.overrides[0].patch.workloads[0].name", "activator"],
    ]);
    expect(report.skipped).toContainEqual(expect.objectContaining({ check: "placement" }));
  });
});

describe("knative-fleet version -o json", () => {
  it("the version, Node.js and the releases found, for tools", async () => {
    const { code, stdout } = await runCli("version", "-o", "json", "--kodata", knativeReleasesDir());
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    expect(report).toMatchObject({
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      node: process.version,
      kodata: { dir: knativeReleasesDir(), from: "--kodata" },
    });
    expect(report.kodata.releases["knative-serving"]).toContain("1.21.3");
    expect(report.kodata.releases["knative-eventing"].length).toBeGreaterThan(0);
  });
});
