import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crText } from "../../support/fleet-files.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";
import { createFleetRepo, type FleetRepo } from "../../unit/plan/fleet-repo.ts";

const execFileAsync = promisify(execFile);

// The CLI as npm users get it: `npm pack` (prepack builds dist/), then `npm i -g` of the tarball into a
// temporary prefix, run with Node 24 on PATH and nothing of the repository.
describe("the npm package", () => {
  let work: string;
  let bin: string;
  let fleet: FleetRepo;
  let files: string[];
  // Node 24 (the `node` devDependency) first on PATH, as on a user's machine that has it installed.
  const path = (...dirs: string[]) =>
    [...dirs, dirname(process.execPath), process.env.PATH ?? ""].join(delimiter);

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "knative-fleet-npm-"));
    const env = { ...process.env, PATH: path() };
    const packed = await execFileAsync("npm", ["pack", "--json", "--pack-destination", work], {
      cwd: repoRoot,
      env,
      maxBuffer: 16 << 20,
    });
    const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
    files = info.files.map((file) => file.path);
    // From the npm cache the repository's own install filled: no registry round trip for what it holds.
    await execFileAsync(
      "npm",
      [
        "install",
        "--global",
        "--prefix",
        join(work, "prefix"),
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        join(work, info.filename),
      ],
      { env, maxBuffer: 16 << 20 },
    );
    bin = join(work, "prefix", "bin");
    fleet = await createFleetRepo();
    await fleet.commit("main", {
      "clusters/spoke-1/knative-serving.yaml": crText({
        name: "spoke-1-serving",
        cluster: "spoke-1",
        version: "1.21",
      }),
    });
    await fleet.commit("main", {
      "clusters/spoke-1/knative-serving.yaml": crText({
        name: "spoke-1-serving",
        cluster: "spoke-1",
        version: "1.22",
      }),
    });
  }, 240_000);
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
    if (fleet) await rm(fleet.dir, { recursive: true, force: true });
  });

  /** Runs the installed `knative-fleet` from a directory outside the repository. */
  async function cli(args: string[], env: Record<string, string> = {}) {
    try {
      const { stdout, stderr } = await execFileAsync(join(bin, "knative-fleet"), args, {
        cwd: work,
        env: { PATH: path(bin), HOME: work, ...env },
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
      return { code, stdout, stderr };
    }
  }

  it("ships the built CLI and its runtime dependencies, not the sources or tests", async () => {
    expect(files).toContain("dist/cli.js");
    expect(files).toContain("package.json");
    expect(
      files.filter(
        (file) => !/^(dist\/.*\.js|scripts\/fetch-kodata\.sh|package\.json|README\.md)$/.test(file),
      ),
    ).toEqual([]);
    const installed = join(work, "prefix", "lib", "node_modules", "knative-fleet");
    expect((await readFile(join(installed, "dist", "cli.js"), "utf8")).split("\n")[0]).toBe(
      "#!/usr/bin/env node",
    );
    const dependencies = await readdir(join(installed, "node_modules"));
    for (const runtime of ["yaml", "zod", "isomorphic-git", "@kubernetes"])
      expect(dependencies).toContain(runtime);
    for (const dev of ["vitest", "typescript", "@biomejs", "node"]) expect(dependencies).not.toContain(dev);
  });

  it("prints its version and the releases it finds", async () => {
    const { version } = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      version: string;
    };
    const flag = await cli(["--version"], { KO_DATA_PATH: knativeReleasesDir() });
    expect(flag.code, flag.stderr).toBe(0);
    expect(flag.stdout).toMatch(
      new RegExp(`^knative-fleet ${version.replaceAll(".", "\\.")} \\(Node\\.js v24\\.`),
    );
    expect(flag.stdout).toContain("knative-serving: 1.23.0, 1.22.1, 1.21.3, 1.20.3");
    expect(flag.stdout).toContain(
      "minimum Kubernetes: 1.20 v1.32.0, 1.21 v1.33.0, 1.22 v1.34.0, 1.23 v1.34.0",
    );
    expect(await cli(["version"], { KO_DATA_PATH: knativeReleasesDir() })).toEqual(flag);
  });

  it("runs from a clone through the npm script the README names, sources and all", async () => {
    const { stdout } = await execFileAsync("npm", ["run", "-s", "cli", "--", "--version"], {
      cwd: repoRoot,
      env: { ...process.env, KO_DATA_PATH: knativeReleasesDir() },
    });
    expect(stdout).toEqual((await cli(["--version"], { KO_DATA_PATH: knativeReleasesDir() })).stdout);
  });

  it("validates a fleet directory", async () => {
    const good = await cli(["validate", join(repoRoot, "fleet-example")]);
    expect(good.code, good.stdout + good.stderr).toBe(0);
    expect(good.stdout).toMatch(/^\d+ files, \d+ resources, 0 errors$/m);
    const bad = await cli(["validate", "/nonexistent"]);
    expect(bad.code).toBe(2);
  });

  it("plans HEAD~1..HEAD of a repository, and says which manifests it lacks", async () => {
    const args = ["plan", "--repo", fleet.dir, "--base", "HEAD~1", "--head", "HEAD"];
    const planned = await cli([...args, "--kodata", knativeReleasesDir()]);
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain("spoke-1-serving");
    expect(planned.stdout).toContain("1.22.1");
    const missing = await cli(args);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(
      `fetch the releases into ${join(work, ".cache", "knative-fleet", "kodata")} with: sh ${join(work, "prefix", "lib", "node_modules", "knative-fleet", "scripts", "fetch-kodata.sh")}`,
    );
    const unknown = await cli(["plan", "--repo", fleet.dir, "--base", "HEAD~5", "--head", "HEAD"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("has no parent");
  });
});
