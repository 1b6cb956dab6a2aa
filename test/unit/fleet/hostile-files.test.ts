import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { buildFleetModel, type FleetFile, MAX_DIAGNOSTICS } from "../../../src/fleet/model.ts";
import { readFleetDir } from "../../../src/fleet/read-dir.ts";
import { DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { decideApplies, decidePrune } from "../../../src/mirror/decide.ts";
import { expandForSync } from "../../../src/placement/combine.ts";
import { readFleetTree } from "../../../src/source/tree.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { crFile, mirrorInput, sourceAt } from "../mirror/support.ts";

const NS = "fleet";
const OPTIONS = { defaultNamespace: NS };
const execFileAsync = promisify(execFile);

/** The hub after a sync of `files`: the CRs as the mirror writes them. */
function hubAfter(files: readonly FleetFile[]): KubeObject[] {
  const { model } = mirrorInput(files, NS, "1".repeat(40));
  return decideApplies(model.resources, sourceAt("1".repeat(40)), []).flatMap((step) =>
    "object" in step ? [step.object] : [],
  );
}

function pruneOf(files: readonly FleetFile[], hub: readonly KubeObject[]) {
  return decidePrune(mirrorInput(files, NS, "2".repeat(40)), hub, {
    applyFailures: 0,
    confirmedToken: undefined,
  });
}

describe("a file that breaks the parser", () => {
  it("is that file's diagnostic with file:line, and the other files still count", () => {
    const good = crFile("good", { namespace: NS });
    const recursive = {
      path: "clusters/recursive.yaml",
      text: "apiVersion: operator.knative.dev/v1beta1\nkind: KnativeServing\nmetadata: {name: r}\nspec: &s {config: {x: *s}}\n",
    };
    const deep = { path: "clusters/deep.yaml", text: `spec: ${"[".repeat(20_000)}${"]".repeat(20_000)}\n` };
    const deepMap = {
      path: "clusters/deep-map.yaml",
      text: `${Array.from({ length: 100 }, (_, i) => `${" ".repeat(i)}a${i}:`).join("\n")} 1\n`,
    };
    const model = buildFleetModel([good, recursive, deep, deepMap], OPTIONS);
    expect(model.resources.map((r) => r.resource.metadata.name)).toEqual(["good"]);
    expect(model.diagnostics.map(formatDiagnostic)).toEqual([
      "clusters/deep-map.yaml:1:1: nested deeper than 64 levels",
      expect.stringMatching(/^clusters\/deep\.yaml:1:\d+: /),
      "clusters/recursive.yaml:1:1: an alias refers to a node that contains it (a recursive alias)",
    ]);
  });
});

describe("conflicts", () => {
  it("stay small and fast: 2,000 CRs naming one ClusterProfile", () => {
    const files = Array.from({ length: 2000 }, (_, i) => ({
      path: `clusters/c${String(i).padStart(4, "0")}.yaml`,
      text: crFile(`c${i}`, { namespace: NS }).text.replace(
        /name: c\d+\n {4}namespace: nowhere/,
        "name: shared\n    namespace: nowhere",
      ),
    }));
    const model = buildFleetModel(files, OPTIONS);
    const output = model.diagnostics.map(formatDiagnostic).join("\n");
    expect(model.files.every((file) => file.status === "failed")).toBe(true);
    expect(model.diagnostics).toHaveLength(MAX_DIAGNOSTICS);
    expect(model.omittedDiagnostics).toBe(2000 - MAX_DIAGNOSTICS);
    expect(output.length).toBeLessThan(250_000);
    expect(model.diagnostics[0]!.message).toMatch(/as does .* and 1996 more; a cluster runs one/);
  }, 60_000);
});

describe("file names", () => {
  it("with control characters are escaped, so a diagnostic stays one line", () => {
    const model = buildFleetModel([{ path: "clusters/a\nb\u001b[31m\u202e.yaml", text: "kind: [" }], OPTIONS);
    const lines = model.diagnostics.map(formatDiagnostic);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^clusters\/a\\nb\\u001b\[31m\\u202e\.yaml:1:\d+: /);
  });
});

describe("paths that are no regular file", () => {
  let dir = "";
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const serving = (name: string) => crFile(name, { namespace: NS }).text;
  const git = (...args: string[]) =>
    execFileAsync("git", ["-c", "user.name=Ada", "-c", "user.email=ada@example.com", ...args], { cwd: dir });

  it("are error diagnostics in a commit and in a checkout, and what they declared is never pruned", async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-odd-"));
    await git("init", "--quiet", "--initial-branch=main");
    const before: Record<string, string> = {};
    for (const name of ["good", "inside", "outside", "folder", "sub", "mac", "wide"]) {
      before[`clusters/${name}.yaml`] = serving(name);
    }
    const beforeFiles = Object.entries(before).map(([path, text]) => ({ path, text }));
    const hub = hubAfter(beforeFiles);
    expect(hub).toHaveLength(7);

    await mkdir(join(dir, "clusters/folder.yaml"), { recursive: true });
    await writeFile(join(dir, "clusters/good.yaml"), serving("good"));
    await writeFile(join(dir, "clusters/folder.yaml/x.txt"), "not yaml");
    await writeFile(join(dir, "target.yaml"), serving("inside"));
    await symlink("../target.yaml", join(dir, "clusters/inside.yaml"));
    await symlink("/etc/hostname", join(dir, "clusters/outside.yaml"));
    await writeFile(join(dir, "clusters/mac.yaml"), serving("mac").replaceAll("\n", "\r"));
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(serving("wide"), "utf16le")]);
    await writeFile(join(dir, "clusters/wide.yaml"), utf16);
    await git("add", "-A");
    // A submodule: a gitlink entry in the tree, and in a checkout a folder with a .git file of its own.
    await git("update-index", "--add", "--cacheinfo", `160000,${"a".repeat(40)},clusters/sub.yaml`);
    await git("commit", "--quiet", "-m", "odd entries");
    const commit = (await git("rev-parse", "HEAD")).stdout.trim();
    await mkdir(join(dir, "clusters/sub.yaml"));
    await writeFile(join(dir, "clusters/sub.yaml/.git"), "gitdir: ../.git/modules/sub\n");

    const store = { fs, gitdir: join(dir, ".git"), cache: {} };
    const fromCommit = await readFleetTree(store, commit, DEFAULT_FILE_SELECTION);
    const fromCheckout = await readFleetDir(dir, DEFAULT_FILE_SELECTION);
    for (const files of [fromCommit, fromCheckout]) {
      const model = buildFleetModel(files, OPTIONS);
      expect(model.resources.map((r) => r.resource.metadata.name)).toEqual(["good"]);
      expect(model.diagnostics.map((d) => `${d.path}:${d.line} ${d.message}`)).toEqual([
        "clusters/folder.yaml:1 a folder is named like a fleet file; fleet files must be regular files",
        "clusters/inside.yaml:1 a symbolic link where fleet files are read; links are not followed: put the file itself here",
        expect.stringMatching(/^clusters\/mac\.yaml:1 a line ends with a carriage return alone/),
        "clusters/outside.yaml:1 a symbolic link where fleet files are read; links are not followed: put the file itself here",
        "clusters/sub.yaml:1 a Git submodule where fleet files are read; its files are not read: put them in this repository",
        "clusters/wide.yaml:1 the file is UTF-16 (byte order mark); save it as UTF-8",
      ]);
      const prune = pruneOf(files, hub);
      expect(prune).toMatchObject({ state: "skipped", reason: "invalid-files" });
    }
  });

  it("a placement file and a rollout policy that become unreadable keep their CRs and hold every change", async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-odd-placement-"));
    await git("init", "--quiet", "--initial-branch=main");
    const placement = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata: {name: serving}
spec:
  clusterProfiles: [{namespace: fleet-system, name: spoke-1}, {namespace: fleet-system, name: spoke-2}]
  template: {spec: {version: "1.22"}}
`;
    const policy = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata: {name: knative}
spec:
  waves: [{name: canary, clusterProfiles: [{namespace: fleet-system, name: spoke-1}]}]
`;
    const good = [
      { path: "clusters/good.yaml", text: serving("good") },
      { path: "clusters/placements/serving.yaml", text: placement },
    ];
    const inventory = { clusters: undefined, decisions: undefined };
    const before = expandForSync(buildFleetModel(good, OPTIONS), inventory, {}).model;
    const hub = decideApplies(before.resources, sourceAt("1".repeat(40)), []).flatMap((step) =>
      "object" in step ? [step.object] : [],
    );
    expect(hub.map((o) => o.metadata.name).sort()).toEqual(["good", "serving-spoke-1", "serving-spoke-2"]);

    await mkdir(join(dir, "clusters/placements"), { recursive: true });
    await writeFile(join(dir, "clusters/good.yaml"), serving("good"));
    await writeFile(join(dir, "clusters/placements/serving.yaml"), placement.replaceAll("\n", "\r"));
    // Saved by an editor in UTF-16, under a name that does not say what it is.
    await writeFile(
      join(dir, "clusters/policy.yaml"),
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(policy, "utf16le")]),
    );
    await writeFile(join(dir, "target.yaml"), policy);
    await symlink("../target.yaml", join(dir, "clusters/rollout.yaml"));
    await git("add", "-A");
    await git("commit", "--quiet", "-m", "odd placement and policy");
    const commit = (await git("rev-parse", "HEAD")).stdout.trim();
    const store = { fs, gitdir: join(dir, ".git"), cache: {} };
    for (const files of [
      await readFleetTree(store, commit, DEFAULT_FILE_SELECTION),
      await readFleetDir(dir, DEFAULT_FILE_SELECTION),
    ]) {
      const sync = expandForSync(buildFleetModel(files, OPTIONS), inventory, {});
      expect(sync.model.rollout).toEqual({ failedPaths: ["clusters/policy.yaml", "clusters/rollout.yaml"] });
      const departures = sync.departures({
        live: hub,
        repository: TEST_REPOSITORY,
        now: 0,
        gracePeriodMs: 60_000,
        previous: new Map(),
      });
      // Held, with no clock running: no departure to be pruned once a grace period is over.
      expect(departures.held.map((h) => h.name).sort()).toEqual(["serving-spoke-1", "serving-spoke-2"]);
      expect(departures.departures).toEqual([]);
      const prune = decidePrune({ ...mirrorInput(files, NS, "2".repeat(40)), model: sync.model }, hub, {
        applyFailures: 0,
        confirmedToken: undefined,
        held: departures.held,
      });
      expect(prune).toMatchObject({ state: "none", candidates: [] });
    }
  });

  it("a fleet file over the size limit is a diagnostic, read no further than the limit", async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-big-"));
    await mkdir(join(dir, "clusters"));
    await writeFile(join(dir, "clusters/big.yaml"), `# ${"x".repeat(2 * 1024 * 1024)}\n`);
    const files = await readFleetDir(dir, DEFAULT_FILE_SELECTION);
    expect(buildFleetModel(files, OPTIONS).diagnostics.map(formatDiagnostic)).toEqual([
      "clusters/big.yaml:1:1: the file is over the limit of 1048576 bytes for a fleet file",
    ]);
  });
});

describe("files that would cost the parser dearly", () => {
  it("are refused before parsing, or told about in bounded form", () => {
    const manyKeys = Array.from({ length: 20_000 }, (_, i) => `  k${i}: v`).join("\n");
    const model = buildFleetModel(
      [
        { path: "clusters/keys.yaml", text: `spec:\n${manyKeys}\n` },
        { path: "clusters/docs.yaml", text: "---\n".repeat(5_000) },
        { path: "clusters/flow.yaml", text: `a: ${"[".repeat(100_000)}${"]".repeat(100_000)}\n` },
        { path: "clusters/dup.yaml", text: "a: 1\nb: 2\na: 3\n" },
      ],
      OPTIONS,
    );
    expect(model.diagnostics.filter((d) => d.path === "clusters/keys.yaml").length).toBeLessThanOrEqual(20);
    expect(model.diagnostics.map(formatDiagnostic)).toContain(
      "clusters/docs.yaml:1001:1: the file holds more than 1000 YAML documents",
    );
    expect(model.diagnostics.map(formatDiagnostic)).toContain(
      "clusters/flow.yaml:1:68: nested deeper than 64 levels",
    );
    expect(model.diagnostics.map(formatDiagnostic)).toContain(
      "clusters/dup.yaml:3:1 a: duplicate key (first at line 1)",
    );
  }, 60_000);
});
