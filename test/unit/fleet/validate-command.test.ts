import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { runCli } from "../../support/cli.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

const run = (...argv: string[]) => runCli("validate", ...argv);

const NO_RELEASES =
  "no release manifests found (--kodata, $KO_DATA_PATH, the fetched cache): spec.version and the settings a release knows are not checked";

const SERVING = `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: spoke-1-serving
spec:
  clusterProfileRef: {name: spoke-1, namespace: fleet-system}
`;

describe("knative-fleet validate", () => {
  let dir = "";
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-validate-"));
    // No release manifests unless a test names them: not the machine's $KO_DATA_PATH or fetched cache.
    vi.stubEnv("KO_DATA_PATH", "");
    vi.stubEnv("XDG_CACHE_HOME", join(dir, "no-cache"));
  });
  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(dir, { recursive: true, force: true });
  });

  async function write(files: Record<string, string>) {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), text);
    }
  }

  it("exits 0 and prints the summary for fleet-example, naming the worked examples the glob leaves out", async () => {
    expect(await run(join(repoRoot, "fleet-example"))).toEqual({
      code: 0,
      stdout: "2 files, 2 resources, 0 errors\n",
      stderr:
        `knative-fleet validate: skipped: ${NO_RELEASES}\n` +
        "knative-fleet validate: 2 YAML files are not fleet files (clusters/**/*.{yaml,yml} leaves them out): placements/knative-serving.yaml, rollout/knative-rollout.yaml\n",
    });
  });

  it("exits 1 and prints every error as file:line:col field: message, in order", async () => {
    await write({
      "clusters/spoke-1/knative-serving.yaml": `${SERVING}  registry:\n    overide: {}\n`,
      "clusters/spoke-2/knative-eventing.yaml": "apiVersion: v1\nkind: ConfigMap\n",
      "clusters/spoke-3/knative-serving.yml": SERVING.replace(/spoke-1/g, "spoke-3"),
      "status/spoke-1.yaml": "not: [valid\n",
    });
    const { code, stdout } = await run(dir);
    expect(code).toBe(1);
    expect(stdout.split("\n")).toEqual([
      "clusters/spoke-1/knative-serving.yaml:8:5 spec.registry.overide: unrecognized key; did you mean override?",
      'clusters/spoke-2/knative-eventing.yaml:2:7 kind: "ConfigMap" (apiVersion v1) is not accepted; a fleet file holds KnativeServing or KnativeEventing (apiVersion operator.knative.dev/v1beta1)',
      "3 files, 1 resource, 2 errors",
      "",
    ]);
  });

  it("selects files with --path-glob", async () => {
    await write({ "fleet/spoke-1.yaml": SERVING, "clusters/broken.yaml": "a: [\n" });
    expect(await run("--path-glob", "fleet/*.yaml", dir)).toMatchObject({
      code: 0,
      stdout: "1 file, 1 resource, 0 errors\n",
    });
  });

  it("no file matched is an error (the service would prune every CR); YAML files the glob leaves out are named", async () => {
    await write({
      "fleet/spoke-1.yaml": SERVING,
      "status/fleet.yaml": "a: 1\n",
      ".github/workflows/plan.yml": "on: pull_request\n",
      "README.md": "# fleet\n",
    });
    expect(await run(dir)).toEqual({
      code: 1,
      stdout: "0 files, 0 resources, 1 error\n",
      stderr:
        `knative-fleet validate: skipped: ${NO_RELEASES}\n` +
        `knative-fleet validate: no file below ${dir} matches clusters/**/*.{yaml,yml}\n` +
        "knative-fleet validate: 1 YAML file is not a fleet file (clusters/**/*.{yaml,yml} leaves it out): fleet/spoke-1.yaml\n",
    });
    await write({
      "clusters/spoke-1.yaml": SERVING,
      "clusters/notes.txt": "x\n",
      "clusters/a/b.YML": "x: 1\n",
    });
    const matched = await run(dir);
    expect(matched.code).toBe(0);
    expect(matched.stderr).toBe(
      `knative-fleet validate: skipped: ${NO_RELEASES}\n` +
        "knative-fleet validate: 2 YAML files are not fleet files (clusters/**/*.{yaml,yml} leaves them out): clusters/a/b.YML, fleet/spoke-1.yaml\n",
    );
  });

  describe("refuses what the service's hub admission refuses, by its defaults or --config", () => {
    const spoke = (spec: string, metadata = "") =>
      `apiVersion: operator.knative.dev/v1beta1\nkind: KnativeServing\nmetadata:\n  name: s\n${metadata}spec:\n${spec}`;
    const REF = "  clusterProfileRef: {name: spoke-1, namespace: fleet-system}\n";
    const config = async (text: string) => {
      await write({ "config.yaml": `repository: {url: https://git.example/fleet.git}\n${text}` });
      return join(dir, "config.yaml");
    };
    const cases: { name: string; file: string; error: RegExp; config?: string }[] = [
      {
        name: "a CR in a hub namespace the service does not reconcile",
        file: spoke(REF, "  namespace: team-b\n"),
        error:
          /:5:3 metadata\.namespace: team-b is not a hub namespace whose CRs knative-fleet reconciles \(tenancy\.crNamespaces: knative-fleet\); delete the metadata\.namespace line .*, or add team-b to tenancy\.crNamespaces .*; the hub refuses KnativeServing team-b\/s$/,
        config: "tenancy: {crNamespaces: [knative-fleet, team-b]}\n",
      },
      {
        name: "a ClusterProfile namespace that may not be targeted",
        file: spoke("  clusterProfileRef: {name: spoke-1, namespace: other}\n"),
        error: /spec\.clusterProfileRef\.namespace: ClusterProfiles in namespace other may not be targeted/,
        config: "allowedClusterProfileNamespaces: [fleet-system, other]\n",
      },
      {
        name: "a CR without clusterProfileRef while hub installs are off",
        file: spoke("  version: '1.21'\n"),
        error: /spec\.clusterProfileRef: is required: installing on the hub itself is disabled/,
        config: "hubInstall: {enabled: true}\n",
      },
      {
        name: "a manifest location outside the allowed prefixes",
        file: spoke(`${REF}  manifests: [{URL: "https://example.com/serving.yaml"}]\n`),
        error:
          /spec\.manifests\[0\]\.URL: manifest location https:\/\/example\.com\/serving\.yaml is refused/,
        config: "manifestLocations: {allowedPrefixes: ['https://example.com/']}\n",
      },
      {
        name: "the abandon-cleanup annotation, whatever the config",
        file: spoke(REF, "  annotations: {fleet.knative.dev/abandon-cleanup: 'true'}\n"),
        error:
          /metadata\.annotations\["fleet\.knative\.dev\/abandon-cleanup"\]: cannot come from a fleet file/,
      },
    ];
    for (const { name, file, error, config: opened } of cases) {
      it(name, async () => {
        await write({ "clusters/s.yaml": file });
        const refused = await run(dir);
        expect(refused.code).toBe(1);
        expect(refused.stdout.split("\n")[0]).toMatch(/^clusters\/s\.yaml:\d+:\d+ /);
        expect(refused.stdout.split("\n")[0]).toMatch(error);
        expect(refused.stdout).toMatch(/^1 file, [01] resources?, 1 error$/m);
        if (opened === undefined) {
          expect((await run("--config", await config("hubInstall: {enabled: true}\n"), dir)).code).toBe(1);
          return;
        }
        expect(await run("--config", await config(opened), dir)).toMatchObject({
          code: 0,
          stdout: "1 file, 1 resource, 0 errors\n",
        });
      });
    }

    it("a placement's CRs, as the service expands them, and a placement's version like a file's", async () => {
      const placement = (clusters: string, version: string) =>
        `apiVersion: fleet.knative.dev/v1alpha1\nkind: KnativeServingPlacement\nmetadata:\n  name: p\nspec:\n  clusterProfiles: ${clusters}\n  template:\n    spec:\n      version: "${version}"\n`;
      await write({ "clusters/p.yaml": placement("[{namespace: fleet-system, name: a}]", "1.99") });
      const unknown = await run("--kodata", knativeReleasesDir(), dir);
      expect(unknown.code).toBe(1);
      expect(unknown.stdout).toMatch(
        /^clusters\/p\.yaml:9:16 spec\.template\.spec\.version: KnativeServing 1\.99 is not available/,
      );
      await write({ "clusters/p.yaml": placement("[{namespace: fleet-system, name: a}]", "1.21") });
      expect((await run("--kodata", knativeReleasesDir(), dir)).code).toBe(0);
    });
  });

  it("with --kodata, rejects a spec.version no release has and lists the ones there are", async () => {
    await write({
      "clusters/spoke-1/knative-serving.yaml": `${SERVING}  version: "1.99"\n`,
      "clusters/spoke-2/knative-serving.yaml": `${SERVING.replace(/spoke-1/g, "spoke-2")}  version: "1.21"\n`,
    });
    const { code, stdout } = await run("--kodata", knativeReleasesDir(), dir);
    expect(code).toBe(1);
    expect(stdout.split("\n")).toEqual([
      expect.stringMatching(
        /^clusters\/spoke-1\/knative-serving\.yaml:7:3 spec\.version: KnativeServing 1\.99 is not available \(available: [\d., ]*1\.21\.\d/,
      ),
      "2 files, 2 resources, 1 error",
      "",
    ]);
    expect((await run(dir)).code).toBe(0); // without release manifests, versions cannot be checked
  });

  it("with --config, selects files and defaults the namespace as the service would", async () => {
    await write({
      "fleet/spoke-1.yaml": SERVING,
      "fleet/spoke-1-copy.yaml": SERVING.replace(
        "name: spoke-1-serving",
        "name: spoke-1-serving\n  namespace: team-a",
      ),
      "clusters/broken.yaml": "a: [\n",
      "config.yaml":
        "repository: {url: https://git.example/fleet.git, pathGlob: 'fleet/*.yaml'}\ndefaultNamespace: team-a\n",
    });
    const { code, stdout } = await run("--config", join(dir, "config.yaml"), dir);
    expect(code).toBe(1);
    expect(stdout).toContain("KnativeServing team-a/spoke-1-serving is also declared at fleet/spoke-1.yaml");
    const bad = await run("--config", join(dir, "fleet/spoke-1.yaml"), dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("invalid config");
  });

  it("exits 2 on usage errors", async () => {
    const missing = await run();
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("missing <dir> or <file>...");
    const notADirectory = await run(join(dir, "nope"));
    expect(notADirectory.code).toBe(2);
    expect(notADirectory.stderr).toContain("nope is not a file or directory");
    expect((await run(dir, "extra")).code).toBe(2);
    expect((await run("--path", "x", dir)).code).toBe(2);
  });
});
