import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runCli } from "../../support/cli.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

const run = (...argv: string[]) => runCli("validate", ...argv);

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
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  async function write(files: Record<string, string>) {
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), text);
    }
  }

  it("exits 0 and prints the summary for fleet-example", async () => {
    expect(await run(join(repoRoot, "fleet-example"))).toEqual({
      code: 0,
      stdout: "2 files, 2 resources, 0 errors\n",
      stderr: "",
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
      "3 files, 1 resources, 2 errors",
      "",
    ]);
  });

  it("selects files with --path-glob", async () => {
    await write({ "fleet/spoke-1.yaml": SERVING, "clusters/broken.yaml": "a: [\n" });
    expect(await run("--path-glob", "fleet/*.yaml", dir)).toMatchObject({
      code: 0,
      stdout: "1 files, 1 resources, 0 errors\n",
    });
  });

  it("exits 0 but says so on stderr when no file matches", async () => {
    expect(await run(dir)).toEqual({
      code: 0,
      stdout: "0 files, 0 resources, 0 errors\n",
      stderr: `knative-fleet validate: no file below ${dir} matches clusters/**/*.{yaml,yml}\n`,
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
        /^clusters\/spoke-1\/knative-serving\.yaml:1:1 spec\.version: KnativeServing 1\.99 is not available \(available: [\d., ]*1\.21\.\d/,
      ),
      "2 files, 2 resources, 1 errors",
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
    expect(missing.stderr).toContain("missing <dir>");
    const notADirectory = await run(join(dir, "nope"));
    expect(notADirectory.code).toBe(2);
    expect(notADirectory.stderr).toContain("is not a directory");
    expect((await run(dir, "extra")).code).toBe(2);
    expect((await run("--path", "x", dir)).code).toBe(2);
  });
});
