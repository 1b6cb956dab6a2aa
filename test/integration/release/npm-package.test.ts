import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSandbox } from "../../sandbox/index.ts";
import { copyCheckout } from "../../support/checkout.ts";
import { crText } from "../../support/fleet-files.ts";
import { createFleetRepo, type FleetRepo } from "../../support/fleet-repo.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

const execFileAsync = promisify(execFile);

// The routes the README documents, each from a fresh clone (the checkout's files as git has them: no
// node_modules, no dist) on a machine with one Node.js and npm: `npm pack`, the global install of the tarball,
// `npm run cli`. Then the installed CLI on every supported Node line (npm's `node@N` packages, installed
// once into a cache outside the repository), and the one-line refusal on an older line.

const SUPPORTED_LINES = ["22", "24", "26"] as const;
const OLDER_LINE = "20";
/** The oldest supported line: what a user with the least Node we promise to work with has. */
const USER_LINE = SUPPORTED_LINES[0];

const sandbox = loadSandbox();

/** The bin directory of Node.js `line` (its newest release), installed from npm into the cache once. */
async function nodeLine(line: string): Promise<string> {
  const cache = process.env.KNATIVE_FLEET_CACHE ?? join(homedir(), ".cache", "knative-fleet");
  const dir = join(cache, "node", line);
  const bin = join(dir, "node_modules", ".bin");
  const installed = await stat(join(bin, "node")).then(
    () => true,
    () => false,
  );
  if (!installed) {
    await mkdir(dir, { recursive: true });
    await execFileAsync(
      "npm",
      [
        "install",
        "--prefix",
        dir,
        "--no-save",
        "--no-package-lock",
        "--no-audit",
        "--no-fund",
        `node@${line}`,
      ],
      { maxBuffer: 16 << 20 },
    );
  }
  return bin;
}

/** Whether `version` satisfies a caret range `^X.Y.Z` (the form of every runtime dependency's range). */
function satisfiesCaret(version: string, range: string): boolean {
  const parse = (v: string) => v.split("-")[0]!.split(".").map(Number) as [number, number, number];
  if (!range.startsWith("^")) throw new Error(`not a caret range: ${range}`);
  const [v, r] = [parse(version), parse(range.slice(1))];
  const atLeast = v[0] > r[0] || (v[0] === r[0] && (v[1] > r[1] || (v[1] === r[1] && v[2] >= r[2])));
  const same =
    r[0] > 0 ? v[0] === r[0] : r[1] > 0 ? v[0] === 0 && v[1] === r[1] : v.join(".") === r.join(".");
  return atLeast && same;
}

describe("the npm package, from a fresh clone", () => {
  let work: string;
  const bins: Record<string, string> = {};
  let packClone: string;
  let cliClone: string;
  let tarball: string;
  let files: string[];
  let prefix: string;
  let fleet: FleetRepo;
  let cliRun: Promise<{ stdout: string }>;
  /** PATH with `dirs` first, then what a user's shell has (never the repository's node_modules/.bin). */
  const path = (...dirs: string[]) =>
    [...dirs, ...(process.env.PATH ?? "").split(delimiter).filter((d) => !d.includes("node_modules"))].join(
      delimiter,
    );
  /** npm with Node `line` on PATH, as a user with that Node has it; the npm cache the repository filled. */
  const npm = (line: string, args: string[], cwd: string) =>
    execFileAsync("npm", args, {
      cwd,
      env: { ...process.env, PATH: path(bins[line]!), npm_config_prefer_offline: "true" },
      maxBuffer: 32 << 20,
    });

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "knative-fleet-npm-"));
    packClone = join(work, "pack-clone");
    cliClone = join(work, "cli-clone");
    prefix = join(work, "prefix");
    const lines = [...SUPPORTED_LINES, OLDER_LINE];
    const located = await Promise.all(lines.map(nodeLine));
    lines.forEach((line, i) => {
      bins[line] = located[i]!;
    });
    await Promise.all([copyCheckout(packClone), copyCheckout(cliClone)]);
    // The `npm run cli` route runs in its own clone meanwhile; its test awaits it.
    cliRun = npm(USER_LINE, ["run", "-s", "cli", "--", "-v"], cliClone).catch((err: { stderr: string }) => {
      throw new Error(`npm run cli failed: ${err.stderr}`);
    });
    cliRun.catch(() => {}); // reported by its test
    const packed = await npm(USER_LINE, ["pack", "--json"], packClone);
    const [info] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
    files = info.files.map((file) => file.path);
    tarball = join(packClone, info.filename);
    await npm(
      USER_LINE,
      ["install", "--global", "--prefix", prefix, "--no-audit", "--no-fund", tarball],
      work,
    );

    fleet = await createFleetRepo();
    const cr = (version: string) => crText({ name: "spoke-1-serving", cluster: "spoke-1", version });
    await fleet.commit("main", { "clusters/spoke-1/knative-serving.yaml": cr("1.21") });
    await fleet.commit("main", { "clusters/spoke-1/knative-serving.yaml": cr("1.22") });
  }, 600_000);
  afterAll(async () => {
    await rm(work, { recursive: true, force: true });
    if (fleet) await rm(fleet.dir, { recursive: true, force: true });
  });

  /** Runs the installed `knative-fleet` on Node `line`, from a directory outside the repository. */
  async function cli(line: string, args: string[], env: Record<string, string> = {}) {
    try {
      const { stdout, stderr } = await execFileAsync(join(prefix, "bin", "knative-fleet"), args, {
        cwd: work,
        env: { PATH: path(join(prefix, "bin"), bins[line]!), HOME: work, ...env },
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
      return { code, stdout, stderr };
    }
  }

  it("npm pack installs and builds what it needs, and ships the CLI and LICENSE under 1 MB, without its dependencies", async () => {
    // The dependencies are installed by npm from their ranges, as for any package (they were bundled until
    // 0.1.0's release work: 12.7 MB packed, 111 MB unpacked; see docs/release.md).
    expect(files.filter((file) => file.startsWith("node_modules/"))).toEqual([]);
    expect((await stat(tarball)).size).toBeLessThan(1_000_000);
    const own = files;
    expect(
      own.filter(
        (file) =>
          !/^(dist\/.*\.js|scripts\/fetch-kodata\.sh|package\.json|README\.md|CHANGELOG\.md|LICENSE)$/.test(
            file,
          ),
      ),
    ).toEqual([]);
    for (const file of ["dist/cli.js", "LICENSE", "README.md", "CHANGELOG.md"]) expect(own).toContain(file);
    expect(await readFile(join(packClone, "LICENSE"), "utf8")).toContain("Apache License\n");
    // The install npm pack ran left the lock as it was: the committed lock is the stable form.
    expect(await readFile(join(packClone, "package-lock.json"), "utf8")).toBe(
      await readFile(join(repoRoot, "package-lock.json"), "utf8"),
    );
    const ignored = await execFileAsync("git", ["check-ignore", "-q", "knative-fleet-0.1.0.tgz"], {
      cwd: repoRoot,
    }).then(
      () => true,
      () => false,
    );
    expect(ignored).toBe(true);
  });

  it("a global install of the tarball installs the runtime dependencies within their ranges, and no dev dependency", async () => {
    const installed = join(prefix, "lib", "node_modules", "knative-fleet");
    expect((await readFile(join(installed, "dist", "cli.js"), "utf8")).split("\n")[0]).toBe(
      "#!/usr/bin/env node",
    );
    // npm installs them from package.json's ranges (a global install of a tarball reads no lock:
    // npm/cli#5325), into the package's own node_modules.
    const top = await readdir(join(installed, "node_modules"));
    const names = (
      await Promise.all(
        top.map(async (name) =>
          name.startsWith("@")
            ? (await readdir(join(installed, "node_modules", name))).map((inner) => `${name}/${inner}`)
            : name.startsWith(".")
              ? []
              : [name],
        ),
      )
    ).flat();
    expect(names.length).toBeGreaterThan(10);
    for (const dev of ["vitest", "typescript", "@biomejs/biome", "node"]) expect(names).not.toContain(dev);
    const { dependencies: runtime } = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
    };
    for (const [name, range] of Object.entries(runtime)) {
      expect(names).toContain(name);
      const { version } = JSON.parse(
        await readFile(join(installed, "node_modules", name, "package.json"), "utf8"),
      ) as { version: string };
      expect(`${name}@${version} ${satisfiesCaret(version, range) ? "in" : "outside"} ${range}`).toBe(
        `${name}@${version} in ${range}`,
      );
    }
  });

  it.each(SUPPORTED_LINES)(
    "runs on Node.js %s: version, validate, plan, and a hub over TLS",
    async (line) => {
      const { version } = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
        version: string;
      };
      const releases = { KO_DATA_PATH: knativeReleasesDir() };
      const printed = await cli(line, ["-v"], releases);
      expect(printed.code, printed.stderr).toBe(0);
      expect(printed.stdout).toMatch(
        new RegExp(`^knative-fleet ${version.replaceAll(".", "\\.")} \\(Node\\.js v${line}\\.`),
      );
      expect(printed.stdout).toContain("knative-serving: 1.23.0, 1.22.1, 1.21.3, 1.20.3");
      expect(printed.stdout).toContain(
        "minimum Kubernetes: 1.20 v1.32.0, 1.21 v1.33.0, 1.22 v1.34.0, 1.23 v1.34.0",
      );
      expect(await cli(line, ["version"], releases)).toEqual(printed);

      const good = await cli(line, ["validate", join(repoRoot, "fleet-example")]);
      expect(good.code, good.stdout + good.stderr).toBe(0);
      expect(good.stdout).toMatch(/^\d+ files, \d+ resources, 0 errors$/m);
      expect((await cli(line, ["validate", "/nonexistent"])).code).toBe(2);

      const args = ["plan", "--repo", fleet.dir, "--base", "HEAD~1", "--head", "HEAD"];
      const planned = await cli(line, [...args, "--kodata", knativeReleasesDir(), "-o", "json"]);
      expect(planned.code, planned.stderr).toBe(0);
      expect(planned.stdout).toContain('"spoke-1-serving"');
      const missing = await cli(line, args);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain(
        `fetch the releases into ${join(work, ".cache", "knative-fleet", "kodata")} with: sh ${join(prefix, "lib", "node_modules", "knative-fleet", "scripts", "fetch-kodata.sh")}`,
      );

      // The hub's client (undici, TLS, the API's JSON) on this Node: the sandbox hub, and a refused port.
      const status = await cli(line, ["status", "--kubeconfig", sandbox.hub.adminKubeconfig, "-o", "json"]);
      expect([0, 1], status.stderr).toContain(status.code);
      expect(JSON.parse(status.stdout)).toMatchObject({ schemaVersion: 1, items: expect.any(Array) });
      const refused = writeTokenKubeconfig(
        { server: "https://127.0.0.1:9", "insecure-skip-tls-verify": true },
        "t",
      );
      const down = await cli(line, ["clusters", "--kubeconfig", refused]);
      expect(down.code).toBe(2);
      expect(down.stderr).toContain("ECONNREFUSED");
    },
  );

  it(`on Node.js ${OLDER_LINE} says in one line which Node it needs, and exits 2`, async () => {
    for (const args of [["-v"], ["--help"], ["status"]]) {
      const old = await cli(OLDER_LINE, args);
      expect(old.code).toBe(2);
      expect(old.stdout).toBe("");
      expect(old.stderr).toMatch(
        new RegExp(`^knative-fleet needs Node\\.js >= 22\\.19\\.0; this is v${OLDER_LINE}\\.\\d+\\.\\d+\\n$`),
      );
    }
  });

  it("runs from a fresh clone through `npm run cli`, which installs what it needs first", async () => {
    const { stdout } = await cliRun;
    // The clone's own Node (the `node` devDependency, 24) runs the sources.
    expect(stdout).toMatch(/^knative-fleet \S+ \(Node\.js v24\./);
  });
});
