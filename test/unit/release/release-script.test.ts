import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { ensureTools, toolPath } from "../../sandbox/tools.ts";
import { repoRoot } from "../../support/shared.ts";

const execFileAsync = promisify(execFile);

// The release as the tag's workflow makes it (.github/workflows/release.yml), run here up to the push: the
// workflow's own release step, in a copy of the checkout, with --skip-image instead of --push (the image is
// scripts/build-image.sh's, built as root with buildah, about a minute even with its layers cached; the
// script's image step only passes the tag on). Then what the release would publish: an npm package under
// 1 MB that carries no dependencies, and a chart whose version and appVersion are package.json's version and
// whose image tag follows them. Then the same with --push, every tool that would reach a registry (and the
// image build) stubbed, for the image's tag and the pushes' order. And the refusals: versions that disagree
// stop the script before it builds.

const WORKFLOW = join(repoRoot, ".github", "workflows", "release.yml");
const MB = 1_000_000;

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  env?: Record<string, string>;
  with?: Record<string, string>;
}
interface Workflow {
  on: { push: { tags: string[] } };
  permissions: Record<string, string>;
  jobs: Record<string, { steps: Step[] }>;
}

/** A GitHub Actions expression as the workflow writes it: `${{ expr }}`. */
const gh = (expr: string) => `\${{ ${expr} }}`;
const workflow = async () => parse(await readFile(WORKFLOW, "utf8")) as Workflow;
const releaseStep = (wf: Workflow): Step => {
  const steps = Object.values(wf.jobs).flatMap((job) => job.steps);
  const found = steps.filter((step) => step.run?.includes("scripts/release.sh"));
  expect(found).toHaveLength(1);
  return found[0]!;
};
const packageVersion = async () =>
  (JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string }).version;

/** The files git has for the checkout (tracked, and new ones it does not ignore), as a fresh clone has them. */
async function copyCheckout(into: string, only?: string[]): Promise<void> {
  const { stdout } = await execFileAsync(
    "git",
    ["ls-files", "-z", "--cached", "--others", "--exclude-standard", ...(only ?? [])],
    { cwd: repoRoot, maxBuffer: 16 << 20 },
  );
  for (const file of stdout.split("\0").filter((f) => f !== "")) {
    const isFile = await stat(join(repoRoot, file)).then(
      (s) => s.isFile(),
      () => false,
    );
    if (!isFile) continue;
    await mkdir(dirname(join(into, file)), { recursive: true });
    await copyFile(join(repoRoot, file), join(into, file));
  }
}

async function run(file: string, args: string[], cwd: string, env: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await execFileAsync(file, args, {
      cwd,
      env: { ...process.env, ...env },
      maxBuffer: 16 << 20,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
    return { code, stdout, stderr };
  }
}

describe("the release workflow", () => {
  it("runs on a v* tag, with the rights to push packages", async () => {
    const wf = await workflow();
    expect(wf.on.push.tags).toEqual(["v*"]);
    expect(wf.permissions).toMatchObject({ contents: "read", packages: "write" });
  });

  it("builds and pushes through scripts/release.sh, given the tag, to ghcr.io and npm", async () => {
    const wf = await workflow();
    const step = releaseStep(wf);
    expect(step.run).toMatch(/scripts\/release\.sh "\$\{GITHUB_REF_NAME\}" --push/);
    expect(step.run).toContain('--image-repo "ghcr.io/$owner/knative-fleet"');
    expect(step.run).toContain('--chart-repo "oci://ghcr.io/$owner/charts"');
    expect(step.env?.NODE_AUTH_TOKEN).toBe(gh("secrets.NPM_TOKEN"));
    const steps = Object.values(wf.jobs).flatMap((job) => job.steps);
    const setupNode = steps.find((s) => s.uses?.startsWith("actions/setup-node@"));
    expect(setupNode?.with).toMatchObject({ "registry-url": "https://registry.npmjs.org" });
    // The logins come before the release step: buildah's as root (the image is in root's storage), helm's.
    const login = steps.findIndex((s) => /sudo buildah login .*ghcr\.io/.test(s.run ?? ""));
    expect(login).toBeGreaterThanOrEqual(0);
    expect(steps[login]!.run).toMatch(/helm registry login .*ghcr\.io/);
    expect(login).toBeLessThan(steps.indexOf(step));
  });
});

describe("scripts/release.sh, run as the workflow runs it, up to the push", () => {
  let work: string;
  let clone: string;
  let out: string;
  let version: string;
  let helm: string;
  let result: { code: number; stdout: string; stderr: string };
  const tarball = () => join(out, "npm", `knative-fleet-${version}.tgz`);
  const chart = () => join(out, "chart", `knative-fleet-${version}.tgz`);

  beforeAll(async () => {
    version = await packageVersion();
    helm = toolPath(ensureTools("helm"), "helm");
    work = await mkdtemp(join(tmpdir(), "knative-fleet-release-"));
    clone = join(work, "clone");
    await copyCheckout(clone);
    // The checkout's installed dependencies (the lock's), so npm pack's prepack builds without installing.
    await symlink(join(repoRoot, "node_modules"), join(clone, "node_modules"));
    const script = releaseStep(await workflow()).run!;
    expect(script).toContain(" --push");
    // A runner's environment, and a repository owner with capitals (ghcr.io wants lowercase names).
    const runnerTemp = join(work, "runner-temp");
    out = join(runnerTemp, "release");
    result = await run(
      "bash",
      ["-euo", "pipefail", "-c", script.replace(" --push", " --skip-image")],
      clone,
      {
        GITHUB_REF_NAME: `v${version}`,
        GITHUB_REPOSITORY_OWNER: "Knative-Fleet",
        RUNNER_TEMP: runnerTemp,
        HELM: helm,
      },
    );
  }, 300_000);
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("builds the npm package and the chart, pushes nothing and says what --push would push", () => {
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("Not pushed (no --push)");
    expect(result.stdout).toContain(`helm push ${chart()} oci://ghcr.io/knative-fleet/charts`);
    expect(result.stdout).toContain(`npm publish ${tarball()} --access public --tag latest`);
    expect(result.stderr).toContain("image: skipped (--skip-image)");
  });

  it("packs the CLI under 1 MB, its dependencies left to npm install", async () => {
    const { size } = await stat(tarball());
    expect(size).toBeLessThan(MB);
    const { stdout } = await execFileAsync("tar", ["-tzf", tarball()], { maxBuffer: 16 << 20 });
    const entries = stdout.split("\n").filter((e) => e !== "");
    expect(entries.filter((e) => e.includes("node_modules/"))).toEqual([]);
    for (const file of [
      "package/dist/cli.js",
      "package/package.json",
      "package/LICENSE",
      "package/CHANGELOG.md",
    ])
      expect(entries).toContain(file);
    const { stdout: manifest } = await execFileAsync("tar", ["-xzOf", tarball(), "package/package.json"]);
    const packed = JSON.parse(manifest) as {
      version: string;
      bundleDependencies?: unknown;
      dependencies: object;
    };
    expect(packed.version).toBe(version);
    expect(packed.bundleDependencies).toBeUndefined();
    expect(Object.keys(packed.dependencies)).toContain("@kubernetes/client-node");
  });

  it("packages the chart with version = appVersion = the package's version, its image tag following", async () => {
    const { stdout } = await execFileAsync(helm, ["show", "chart", chart()]);
    const meta = parse(stdout) as { name: string; version: string; appVersion: string };
    expect(meta).toMatchObject({ name: "knative-fleet", version, appVersion: version });
    const rendered = await execFileAsync(
      helm,
      ["template", "fleet", chart(), "--set", "fleet.repository.url=https://git.example/fleet.git"],
      { maxBuffer: 16 << 20 },
    );
    const deployment = parseAllDocuments(rendered.stdout)
      .map(
        (doc) =>
          doc.toJS() as {
            kind?: string;
            spec?: { template: { spec: { containers: { name: string; image: string }[] } } };
          },
      )
      .find((obj) => obj?.kind === "Deployment");
    const container = deployment?.spec?.template.spec.containers.find((c) => c.name === "knative-fleet");
    expect(container?.image).toBe(`ghcr.io/knative-fleet/knative-fleet:${version}`);
  });

  it("leaves what the workflow keeps as artifacts where its upload step looks", async () => {
    const upload = Object.values((await workflow()).jobs)
      .flatMap((job) => job.steps)
      .find((s) => s.uses?.startsWith("actions/upload-artifact@"));
    const paths = (upload?.with?.path ?? "").split("\n").filter((p) => p.trim() !== "");
    expect(paths.map((p) => p.trim())).toEqual([
      `${gh("runner.temp")}/release/npm/*.tgz`,
      `${gh("runner.temp")}/release/chart/*.tgz`,
    ]);
    for (const file of [tarball(), chart()]) expect((await stat(file)).size).toBeGreaterThan(0);
  });

  // The image step and the pushes themselves, with the tools that would reach a registry replaced: the
  // image build (scripts/build-image.sh, root and buildah) by a stub that records its arguments, and
  // `buildah push`, `helm push` and `npm publish` by wrappers that record the command instead (helm and npm
  // do everything else for real). As root only: the script runs the image steps through sudo otherwise.
  it.skipIf(process.getuid?.() !== 0)(
    "with --push: builds the image tagged with the version, then pushes image, chart and npm package in that order",
    async () => {
      const calls = join(work, "calls.log");
      const stubs = join(work, "stubs");
      await mkdir(stubs, { recursive: true });
      const realNpm = (await execFileAsync("bash", ["-c", "command -v npm"])).stdout.trim();
      const stub = async (name: string, body: string) =>
        writeFile(join(stubs, name), `#!/bin/bash\n${body}\n`, { mode: 0o755 });
      await stub("buildah", `echo "buildah $*" >>${calls}`);
      await stub("helm", `if [ "$1" = push ]; then echo "helm $*" >>${calls}; else exec ${helm} "$@"; fi`);
      await stub(
        "npm",
        `if [ "$1" = publish ]; then echo "npm $*" >>${calls}; else exec ${realNpm} "$@"; fi`,
      );
      await writeFile(
        join(clone, "scripts", "build-image.sh"),
        `#!/bin/bash\necho "build-image $*" >>${calls}\n`,
      );
      const pushOut = join(work, "push-out");
      const pushed = await run(
        "bash",
        [
          join(clone, "scripts", "release.sh"),
          `v${version}`,
          "--push",
          "--out",
          pushOut,
          "--image-repo",
          "registry.test/acme/knative-fleet",
          "--chart-repo",
          "oci://registry.test/acme/charts",
        ],
        clone,
        { PATH: `${stubs}:${process.env.PATH}`, HELM: join(stubs, "helm") },
      );
      expect(pushed.code, pushed.stderr).toBe(0);
      const image = `registry.test/acme/knative-fleet:${version}`;
      const packages = {
        npm: join(pushOut, "npm", `knative-fleet-${version}.tgz`),
        chart: join(pushOut, "chart", `knative-fleet-${version}.tgz`),
      };
      expect((await readFile(calls, "utf8")).trim().split("\n")).toEqual([
        `build-image --tag ${image} --archive ${join(pushOut, "image", `knative-fleet-${version}.oci.tar`)}`,
        `buildah push --quiet ${image} docker://${image}`,
        `helm push ${packages.chart} oci://registry.test/acme/charts`,
        `npm publish ${packages.npm} --access public --tag latest`,
      ]);
      expect(pushed.stdout).toContain(
        `Released knative-fleet ${version}: npm knative-fleet@${version}, image ${image}, chart oci://registry.test/acme/charts/knative-fleet:${version}`,
      );
    },
    300_000,
  );
});

describe("scripts/release.sh refuses versions that disagree, before building anything", () => {
  let work: string;
  let version: string;
  beforeAll(async () => {
    version = await packageVersion();
    work = await mkdtemp(join(tmpdir(), "knative-fleet-release-refuse-"));
  });
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** A checkout with only what the version check reads, Chart.yaml edited by `chartEdit`. */
  async function checkout(name: string, chartEdit: (text: string) => string = (t) => t): Promise<string> {
    const dir = join(work, name);
    await copyCheckout(dir, [
      "package.json",
      "package-lock.json",
      "scripts/release.sh",
      "charts/knative-fleet/Chart.yaml",
    ]);
    const chartFile = join(dir, "charts", "knative-fleet", "Chart.yaml");
    await writeFile(chartFile, chartEdit(await readFile(chartFile, "utf8")));
    return dir;
  }
  const release = (dir: string, args: string[], env: Record<string, string> = {}) =>
    run("bash", [join(dir, "scripts", "release.sh"), ...args, "--out", join(dir, "out")], dir, {
      HELM: "/nonexistent/helm",
      ...env,
    });
  const builtNothing = async (dir: string) =>
    expect(
      await stat(join(dir, "out")).then(
        () => "built",
        () => "nothing",
      ),
    ).toBe("nothing");

  it("a tag other than the version", async () => {
    const dir = await checkout("tag");
    const refused = await release(dir, ["v99.0.0"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`release: the versions disagree; package.json says ${version}, but:`);
    expect(refused.stderr).toContain("  the version given v99.0.0\n");
    await builtNothing(dir);
    // The version itself, with or without its v, passes the check: the script goes on to npm pack (here an
    // npm that fails at once, so nothing is built).
    const stub = join(work, "stub-bin");
    await mkdir(stub, { recursive: true });
    await writeFile(join(stub, "npm"), "#!/bin/sh\necho 'stub npm' >&2\nexit 3\n", { mode: 0o755 });
    for (const given of [`v${version}`, version]) {
      const d = await checkout(`tag-${given}`);
      const passed = await release(d, [given], { PATH: `${stub}:${process.env.PATH}` });
      expect(passed.stderr).not.toContain("disagree");
      expect(passed.stderr).toContain(`release: knative-fleet ${version} into`);
      expect(passed.stderr).toContain("stub npm");
    }
  });

  it("a chart whose appVersion or version differs from package.json's", async () => {
    const dir = await checkout("chart", (text) =>
      text.replace(/^appVersion: .*$/m, 'appVersion: "9.9.9"').replace(/^version: .*$/m, "version: 9.9.8"),
    );
    const refused = await release(dir, []);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("  charts/knative-fleet/Chart.yaml version 9.9.8\n");
    expect(refused.stderr).toContain("  charts/knative-fleet/Chart.yaml appVersion 9.9.9\n");
    expect(refused.stderr).toContain("Chart.yaml's version and appVersion");
    await builtNothing(dir);
  });

  it("a package-lock.json of another version", async () => {
    const dir = await checkout("lock");
    const lockFile = join(dir, "package-lock.json");
    const lock = JSON.parse(await readFile(lockFile, "utf8")) as { version: string };
    lock.version = "0.0.1";
    await writeFile(lockFile, JSON.stringify(lock));
    const refused = await release(dir, []);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("  package-lock.json version 0.0.1\n");
    await builtNothing(dir);
  });

  it("--push without the image", async () => {
    const dir = await checkout("push");
    const refused = await release(dir, ["--push", "--skip-image"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("--push with --skip-image would publish a release without its image");
    await builtNothing(dir);
  });
});
