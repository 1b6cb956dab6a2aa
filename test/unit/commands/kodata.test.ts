import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readCompiled } from "../../../src/render/compiled.ts";
import { readManifestFiles } from "../../../src/render/files.ts";
import { createKodataSource } from "../../../src/render/index.ts";
import { runCli } from "../../support/cli.ts";
import { crText } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { fleetRepo } from "../plan/support.ts";

// Where plan and version find the Knative release manifests: --kodata, KO_DATA_PATH, then the fetched cache.
// Each plan renders real releases: slow on a loaded machine.
describe("release manifests for the CLI", { timeout: 60_000 }, () => {
  const saved = { KO_DATA_PATH: process.env.KO_DATA_PATH, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
  let cacheHome: string;
  beforeEach(() => {
    cacheHome = mkdtempSync(join(tmpdir(), "knative-fleet-cache-"));
    delete process.env.KO_DATA_PATH;
    process.env.XDG_CACHE_HOME = cacheHome;
  });
  afterEach(() => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
    rmSync(cacheHome, { recursive: true, force: true });
  });

  const SERVING = "clusters/spoke-1/knative-serving.yaml";
  const serving = (version: string) =>
    crText({
      name: "spoke-1-serving",
      cluster: "spoke-1",
      version,
      spec: { ingress: { kourier: { enabled: true } } },
    });
  async function repo(change: Record<string, string | null>) {
    const fleet = await fleetRepo();
    await fleet.commit("main", { [SERVING]: serving("1.21"), "README.md": "fleet\n" });
    await fleet.commit("change", change);
    return fleet;
  }
  const plan = (dir: string, ...flags: string[]) =>
    runCli("plan", "--repo", dir, "--base", "main", "--head", "change", "-o", "json", ...flags);

  it("plans a change that renders nothing without any release manifests", async () => {
    const fleet = await repo({ "README.md": "fleet, documented\n" });
    const { code, stdout, stderr } = await plan(fleet.dir);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({ errors: 0, clusters: [] });
  });

  it("says where to get release manifests when a changed CR must be rendered", async () => {
    const fleet = await repo({ [SERVING]: serving("1.22") });
    const { code, stdout, stderr } = await plan(fleet.dir);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain("knative-fleet plan: no Knative release manifests: pass --kodata DIR");
    expect(stderr).toContain("set KO_DATA_PATH");
    expect(stderr).toMatch(
      /fetch the releases into .*knative-fleet\/kodata with: sh .*scripts\/fetch-kodata\.sh/,
    );
  });

  it("takes them from KO_DATA_PATH, then from the fetched cache", async () => {
    const fleet = await repo({ [SERVING]: serving("1.22") });
    process.env.KO_DATA_PATH = knativeReleasesDir();
    const fromEnv = await plan(fleet.dir);
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
    expect(JSON.parse(fromEnv.stdout).clusters[0].resources[0].version).toMatchObject({ to: "1.22.1" });

    delete process.env.KO_DATA_PATH;
    // An empty cache is found, and holds no release: the CR's rendering fails on its version.
    mkdirSync(join(cacheHome, "knative-fleet", "kodata"), { recursive: true });
    const fromCache = await plan(fleet.dir);
    expect(fromCache.code).toBe(1);
    expect(fromCache.stdout).toContain("version-unknown");
  });

  it("run finds them as plan does: KO_DATA_PATH, then the fetched cache; none is said with the cache's path", async () => {
    const config = join(cacheHome, "no-such-config.yaml");
    const none = await runCli("run", "--config", config);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("no Knative release manifests");
    expect(none.stderr).toContain(join(cacheHome, "knative-fleet", "kodata"));
    // Found: run goes on to read its config (none here), and says nothing of the releases.
    process.env.KO_DATA_PATH = knativeReleasesDir();
    const fromEnv = await runCli("run", "--config", config);
    delete process.env.KO_DATA_PATH;
    mkdirSync(join(cacheHome, "knative-fleet", "kodata"), { recursive: true });
    const fromCache = await runCli("run", "--config", config);
    for (const found of [fromEnv, fromCache]) {
      expect(found.code).toBe(2);
      expect(found.stderr).not.toContain("no Knative release manifests");
      expect(found.stderr).toContain("no-such-config.yaml");
    }
  });

  it("refuses a --kodata or KO_DATA_PATH that is not a directory", async () => {
    const fleet = await repo({ [SERVING]: serving("1.22") });
    expect((await plan(fleet.dir, "--kodata", "/nonexistent")).stderr).toContain(
      "--kodata /nonexistent is not a directory",
    );
    process.env.KO_DATA_PATH = "/nonexistent";
    const fromEnv = await runCli("version");
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain("KO_DATA_PATH /nonexistent is not a directory");
  });

  it("--version and version print the version and the bundled releases", async () => {
    process.env.KO_DATA_PATH = knativeReleasesDir();
    const flag = await runCli("--version");
    expect(flag).toEqual(await runCli("version"));
    expect(flag.code).toBe(0);
    const [first, ...rest] = flag.stdout.trimEnd().split("\n");
    const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
    expect(first).toBe(`knative-fleet ${version} (Node.js ${process.version})`);
    expect(process.version).toMatch(/^v24\./);
    expect(rest).toEqual([
      `Knative releases in ${knativeReleasesDir()} (KO_DATA_PATH):`,
      "  knative-serving: 1.23.0, 1.22.1, 1.21.3, 1.20.3",
      "  knative-eventing: 1.23.0, 1.22.2, 1.21.4, 1.20.3",
      "  ingress 1.20: istio, contour, kourier, gateway-api",
      "  ingress 1.21: istio, contour, kourier, gateway-api",
      "  ingress 1.22: istio, contour, kourier, gateway-api",
      "  ingress 1.23: istio, contour, kourier, gateway-api",
      "  minimum Kubernetes: 1.20 v1.32.0, 1.21 v1.33.0, 1.22 v1.34.0, 1.23 v1.34.0",
    ]);
    delete process.env.KO_DATA_PATH;
    expect((await runCli("version")).stdout).toContain(
      "Knative releases: none found; no Knative release manifests",
    );
  });

  it("compile-kodata compiles the real releases; a source then loads objects equal to their YAML's", async () => {
    // The shared releases are linked in, not copied; .compiled/ goes beside the links.
    const kodata = mkdtempSync(join(tmpdir(), "kodata-"));
    for (const entry of readdirSync(knativeReleasesDir(), { withFileTypes: true }))
      if (entry.isDirectory()) symlinkSync(join(knativeReleasesDir(), entry.name), join(kodata, entry.name));
    const compiled = await runCli("compile-kodata", "--kodata", kodata);
    expect(compiled.code).toBe(0);
    const lines = compiled.stdout.trimEnd().split("\n");
    // 4 Serving, 4 Eventing, 4 ingresses x 4 minors, 6 event sources x 4 minors, 4 Security-Guards
    expect(lines).toHaveLength(52);
    expect(lines.every((line) => / \d+ bytes compiled$/.test(line))).toBe(true);
    expect(readdirSync(join(kodata, ".compiled"))).toHaveLength(52);
    const yaml = createKodataSource({ dir: knativeReleasesDir() });
    const fromCompiled = createKodataSource({ dir: kodata });
    for (const [component, version] of [
      ["knative-serving", "1.23.0"],
      ["knative-eventing", "1.20.3"],
    ] as const) {
      const files = await readManifestFiles(join(kodata, component, version));
      expect(await readCompiled(kodata, files), `${component} ${version} compiled`).toBeDefined();
      expect(await fromCompiled.componentManifests(component, version)).toEqual(
        await yaml.componentManifests(component, version),
      );
    }
    expect(await fromCompiled.ingressManifests("kourier", "1.23")).toEqual(
      await yaml.ingressManifests("kourier", "1.23"),
    );
    const kafka = { kind: "eventing-source", source: "kafka", minor: "1.22" } as const;
    expect(await fromCompiled.addOnManifests(kafka)).toEqual(await yaml.addOnManifests(kafka));
    rmSync(kodata, { recursive: true, force: true });
    const none = await runCli("compile-kodata");
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("no Knative release manifests");
  });
});
