import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { parse } from "yaml";
import { ROLLOUT_REFUSED_ANNOTATION } from "../../../src/api/labels.ts";
import { commitOfHubRollout } from "../../../src/commands/approve.ts";
import { approvalKey } from "../../../src/fleet/approval-document.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { DEFAULT_NAMESPACE } from "../../../src/fleet/parse.ts";
import { readFleetDir } from "../../../src/fleet/read-dir.ts";
import { DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { RolloutState } from "../../../src/rollout/state.ts";
import { runCli } from "../../support/cli.ts";
import { createFleetRepo, type FleetRepo } from "../../support/fleet-repo.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";

// `knative-fleet approve` in real Git repositories: the approval it commits is read by the real fleet parser
// as the approval of the rollout's commit and wave; the wave is checked against the repository's policy, the
// file against the service's file selection, and hostile input is refused or written so it reads back.

const execFileAsync = promisify(execFile);

const POLICY_PATH = "clusters/knative-rollout.yaml";
/** A policy of three waves, one needing an approval; `extra` adds waves. */
const policy = (extra = "") => `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata:
  name: knative
spec:
  waves:
    - name: canary
      clusterProfiles: [{ namespace: fleet-system, name: spoke-1 }]
    - name: staging
      clusterSelectorTerms: [{ labelSelector: { matchLabels: { env: staging } } }]
    - name: production
      clusterSelectorTerms: [{ labelSelector: { matchLabels: { env: prod } } }]
      approval: Required
${extra}`;

const SERVING = `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: spoke-1-serving
spec:
  clusterProfileRef: { name: spoke-1, namespace: fleet-system }
`;

let repo: FleetRepo;
/** The rollout's commit: the merge that changed the serving CR. */
let rollout: string;

const git = async (...args: string[]) => (await execFileAsync("git", args, { cwd: repo.dir })).stdout.trim();
const approve = (...argv: string[]) => runCli("approve", "--repo", repo.dir, ...argv);
const approvalsIn = async () => {
  const files = await readFleetDir(repo.dir, DEFAULT_FILE_SELECTION);
  return buildFleetModel(files, { defaultNamespace: DEFAULT_NAMESPACE });
};
const approvalFiles = () => readdir(join(repo.dir, "clusters/approvals")).catch(() => [] as string[]);

beforeEach(async () => {
  repo = await createFleetRepo();
  await repo.commit("main", { [POLICY_PATH]: policy() });
  rollout = await repo.commit("main", { "clusters/spoke-1/knative-serving.yaml": SERVING });
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await rm(repo.dir, { recursive: true, force: true });
});

describe("knative-fleet approve", () => {
  it("commits an approval the fleet parser reads as the approval of the rollout's commit and wave", async () => {
    const run = await approve("--wave", "production", "--commit", rollout, "--by", "Alice");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const path = `clusters/approvals/production-${rollout.substring(0, 12)}.yaml`;
    expect(run.stdout).toContain(`Wrote ${path}`);

    const model = await approvalsIn();
    expect(model.diagnostics).toEqual([]);
    expect(model.approvals).toHaveLength(1);
    const [approval] = model.approvals;
    expect(approvalKey(approval!.commit, approval!.wave)).toBe(approvalKey(rollout, "production"));
    expect(approval).toMatchObject({ path, approvedBy: "Alice", commit: rollout });
    const document = parse(await readFile(join(repo.dir, path), "utf8"));
    expect(document.metadata).toEqual({ name: `production-${rollout.substring(0, 12)}` });

    // One commit on top of the rollout's, holding the file as written, and nothing left to commit.
    expect(await git("rev-parse", "HEAD~1")).toBe(rollout);
    expect(await git("show", "--format=", "--name-only", "HEAD")).toBe(path);
    expect(await git("show", `HEAD:${path}`)).toBe((await readFile(join(repo.dir, path), "utf8")).trim());
    expect(await git("log", "-1", "--format=%s")).toBe(
      `approve wave production of the rollout of ${rollout.substring(0, 12)}`,
    );
    expect(await git("log", "-1", "--format=%b")).toContain(rollout);
    expect(await git("log", "-1", "--format=%an")).toBe("Alice");
    expect(await git("status", "--porcelain")).toBe("");
    expect(run.stdout).toContain("push it");
  });

  it("resolves a short commit in the clone to the whole id; an unknown or non-hex one is exit 2", async () => {
    const run = await approve("--wave", "production", "--commit", rollout.substring(0, 7).toUpperCase());
    expect(run.code).toBe(0);
    expect((await approvalsIn()).approvals.map((a) => a.commit)).toEqual([rollout]);

    const unknown = await approve("--wave", "production", "--commit", "0000000");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no commit of that id");
    for (const bad of ["HEAD", "abc12", "--x", `${rollout}0`]) {
      const refused = await approve("--wave", "production", `--commit=${bad}`);
      expect(refused.code, bad).toBe(2);
    }
    expect(await approvalFiles()).toHaveLength(1);
  });

  it("refuses a wave the policy does not have, naming the policy's waves; warns for one without approval", async () => {
    const unknown = await approve("--wave", "prod", "--commit", rollout);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(
      `${POLICY_PATH} has no wave prod; its waves: canary, staging, production`,
    );
    expect(await approvalFiles()).toEqual([]);

    const staging = await approve("--wave", "staging", "--commit", rollout, "--by", "Bob");
    expect(staging.code).toBe(0);
    expect(staging.stderr).toContain("wave staging does not require an approval");
    expect((await approvalsIn()).approvals.map((a) => a.wave)).toEqual(["staging"]);
  });

  it("refuses without a valid rollout policy: none, or a broken one", async () => {
    await repo.commit("main", { [POLICY_PATH]: null });
    const none = await approve("--wave", "production", "--commit", rollout);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("no KnativeRollout among the fleet files");
    await repo.commit("main", { [POLICY_PATH]: policy().replace("approval: Required", "approval: Yes") });
    const broken = await approve("--wave", "production", "--commit", rollout);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain(`the rollout policy (${POLICY_PATH}) does not validate`);
    expect(await approvalFiles()).toEqual([]);
  });

  it("is idempotent: an approval of the same commit and wave, wherever it is, is not written again", async () => {
    expect((await approve("--wave", "production", "--commit", rollout, "--by", "Alice")).code).toBe(0);
    const head = await git("rev-parse", "HEAD");
    const again = await approve("--wave", "production", "--commit", rollout.substring(0, 9), "--by", "Bob");
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("is already approved in clusters/approvals/production-");
    expect(again.stdout).not.toContain("not committed");
    expect(await git("rev-parse", "HEAD")).toBe(head);
    expect(await approvalFiles()).toHaveLength(1);

    // One written by hand, elsewhere in the selection and not committed yet, counts as well.
    const byHand = "clusters/ok/by-hand.yaml";
    await mkdir(join(repo.dir, "clusters/ok"), { recursive: true });
    await writeFile(
      join(repo.dir, byHand),
      `apiVersion: fleet.knative.dev/v1alpha1\nkind: KnativeRolloutApproval\nmetadata: {name: by-hand}\nspec: {commit: "${rollout}", wave: staging}\n`,
    );
    const handed = await approve("--wave", "staging", "--commit", rollout, "--by", "Bob");
    expect(handed.code).toBe(0);
    expect(handed.stdout).toContain(`already approved in ${byHand} (not committed yet`);
    expect(await approvalFiles()).toHaveLength(1);
    expect(await git("rev-parse", "HEAD")).toBe(head);
  });

  it("refuses a --dir outside the repository, hidden, through a link or outside the file selection", async () => {
    const outside = await mkdtemp(join(tmpdir(), "knative-fleet-approve-outside-"));
    await symlink(outside, join(repo.dir, "clusters", "linked"));
    const cases: [string, string][] = [
      ["../elsewhere", "outside the repository"],
      ["clusters/../../elsewhere", "outside the repository"],
      [outside, "outside the repository"],
      [".git/approvals", "hidden folder"],
      ["clusters/linked", "symbolic link"],
      ["clusters/spoke-1/knative-serving.yaml", "not a folder"],
      ["approvals", "is not among the fleet files the service reads (clusters/**/*.{yaml,yml}"],
      [".", "is not among the fleet files"],
    ];
    for (const [dir, message] of cases) {
      const run = await approve("--wave", "production", "--commit", rollout, "--by", "A", "--dir", dir);
      expect(run.code, dir).toBe(2);
      expect(run.stderr, dir).toContain(message);
    }
    expect(await readdir(outside)).toEqual([]);
    expect(await git("rev-parse", "HEAD")).toBe(rollout);
    expect(await git("status", "--porcelain")).toBe("?? clusters/linked");
    await rm(outside, { recursive: true, force: true });
  });

  it("checks the folder against --config's file selection, the one the service reads", async () => {
    const config = join(repo.dir, "..", `${repo.dir.split("/").pop()}-config.yaml`);
    await writeFile(
      config,
      'repository:\n  url: https://git.example/fleet.git\n  pathGlob: "fleet/**/*.yaml"\n',
    );
    try {
      await repo.commit("main", { "fleet/knative-rollout.yaml": policy() });
      const byDefault = await approve("--config", config, "--wave", "production", "--commit", rollout);
      expect(byDefault.code).toBe(2);
      expect(byDefault.stderr).toContain("(fleet/**/*.yaml)");
      expect(byDefault.stderr).not.toContain("--config with the service's config file");
      const given = ["--config", config, "--wave", "production", "--commit", rollout, "--by", "A"];
      const run = await approve(...given, "--dir", "fleet/approvals");
      expect(run.code).toBe(0);
      expect(await git("show", "--format=", "--name-only", "HEAD")).toBe(
        `fleet/approvals/production-${rollout.substring(0, 12)}.yaml`,
      );
    } finally {
      await rm(config, { force: true });
    }
  });

  it("refuses a wave name that is no DNS label, before reading anything", async () => {
    for (const wave of ["Production", "prod;rm -rf /", "../x", "a\nb", "", "x".repeat(64)]) {
      const run = await approve("--wave", wave, "--commit", rollout, "--by", "A");
      expect(run.code, wave).toBe(2);
      expect(run.stderr, wave).toContain("is not a wave name");
    }
    expect((await approve("--commit", rollout)).stderr).toContain("--wave is required");
    expect(await approvalFiles()).toEqual([]);
  });

  it("writes a hostile reason and approver so that they read back as given; the commit message keeps one line", async () => {
    const reason =
      "canary flat\n---\nkind: KnativeRollout\n# not a comment: yes\n\"quoted\" 'single' {a: b} [c] & *alias !tag %x @y `z`\ttab 🚀";
    const by = "no: yes";
    const run = await approve("--wave", "production", "--commit", rollout, "--by", by, "--reason", reason);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const [file] = await approvalFiles();
    const text = await readFile(join(repo.dir, "clusters/approvals", file!), "utf8");
    expect(parse(text, { version: "1.1" }).spec).toEqual({
      commit: rollout,
      wave: "production",
      approvedBy: by,
      reason,
    });
    const model = await approvalsIn();
    expect(model.diagnostics).toEqual([]);
    expect(model.approvals.map((a) => [a.approvedBy, approvalKey(a.commit, a.wave)])).toEqual([
      [by, approvalKey(rollout, "production")],
    ]);
    expect(model.rollout.policy?.path).toBe(POLICY_PATH);
    const body = await git("log", "-1", "--format=%b");
    expect(body.split("\n")).toEqual([
      `Approves wave production of the rollout of commit ${rollout}.`,
      expect.stringMatching(
        /^Reason: canary flat --- kind: KnativeRollout # not a comment: yes "quoted" .* tab 🚀$/,
      ),
    ]);

    const tooLong = await approve(
      "--wave",
      "staging",
      "--commit",
      rollout,
      "--by",
      "A",
      "--reason",
      "x".repeat(1025),
    );
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toContain("--reason");
  });

  it("never puts `rollout` in the file name, and keeps a long wave's name a DNS label", async () => {
    const long = `rollout-${"a".repeat(40)}-rollout-x`; // 58 characters
    const longer = `${"b".repeat(41)}-rollout-two`; // shares nothing with long; 53 characters
    const twin = `${"b".repeat(41)}-rollout-one`; // cut to the same beginning as `longer`
    const waves = [long, longer, twin, "rollout"]
      .map(
        (name, index) =>
          `    - name: ${name}\n      clusterProfiles: [{ namespace: fleet-system, name: spoke-${index + 2} }]\n      approval: Required\n`,
      )
      .join("");
    await repo.commit("main", { [POLICY_PATH]: policy(waves) });
    for (const wave of [long, longer, twin, "rollout"]) {
      const run = await approve("--wave", wave, "--commit", rollout, "--by", "A");
      expect(run.stderr, wave).toBe("");
      expect(run.code, wave).toBe(0);
    }
    const files = await approvalFiles();
    expect(files).toHaveLength(4);
    for (const file of files) expect(file).not.toMatch(/rollout/i);
    const model = await approvalsIn();
    expect(model.diagnostics).toEqual([]);
    expect(model.rollout.failedPaths).toEqual([]);
    expect(model.approvals.map((a) => a.wave).sort()).toEqual([long, longer, twin, "rollout"].sort());
    for (const file of files) {
      const { metadata } = parse(await readFile(join(repo.dir, "clusters/approvals", file), "utf8"));
      expect(metadata.name.length).toBeLessThanOrEqual(63);
      expect(metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      expect(metadata.name.endsWith(`-${rollout.substring(0, 12)}`)).toBe(true);
    }
  });

  it("--no-commit writes the file only; a commit takes no other staged change along", async () => {
    const noCommit = await approve("--wave", "staging", "--commit", rollout, "--no-commit");
    expect(noCommit.code).toBe(0);
    expect(await git("rev-parse", "HEAD")).toBe(rollout);
    expect(await git("status", "--porcelain", "--untracked-files=all")).toBe(
      `?? clusters/approvals/staging-${rollout.substring(0, 12)}.yaml`,
    );

    await writeFile(join(repo.dir, "README.md"), "staged, not approved\n");
    await git("add", "README.md");
    const run = await approve("--wave", "production", "--commit", rollout, "--by", "A");
    expect(run.code).toBe(0);
    expect(await git("show", "--format=", "--name-only", "HEAD")).toBe(
      `clusters/approvals/production-${rollout.substring(0, 12)}.yaml`,
    );
    expect((await git("status", "--porcelain", "--untracked-files=all")).split("\n").sort()).toEqual([
      "?? clusters/approvals/staging-" + `${rollout.substring(0, 12)}.yaml`,
      "A  README.md",
    ]);
  });

  it("approves as the repository's user.name without --by; refuses to commit as nobody", async () => {
    const home = await mkdtemp(join(tmpdir(), "knative-fleet-approve-home-"));
    vi.stubEnv("HOME", home);
    vi.stubEnv("XDG_CONFIG_HOME", join(home, ".config"));
    try {
      const nobody = await approve("--wave", "production", "--commit", rollout);
      expect(nobody.code).toBe(2);
      expect(nobody.stderr).toContain("give --by NAME");
      expect(await approvalFiles()).toEqual([]);

      await writeFile(
        join(home, ".gitconfig"),
        '[user]\n\tname = "Grace H" # global\n\temail = grace@example.com\n',
      );
      expect((await approve("--wave", "staging", "--commit", rollout)).code).toBe(0);
      expect(await git("log", "-1", "--format=%an <%ae>")).toBe("Grace H <grace@example.com>");

      await git("config", "user.name", "Ada Lovelace");
      expect((await approve("--wave", "production", "--commit", rollout)).code).toBe(0);
      expect((await approvalsIn()).approvals.map((a) => a.approvedBy).sort()).toEqual([
        "Ada Lovelace",
        "Grace H",
      ]);
      expect(await git("log", "-1", "--format=%an|%cn|%ce")).toBe(
        "Ada Lovelace|Ada Lovelace|grace@example.com",
      );
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
  it("without --commit, a hub it cannot reach is named in status's and plan's words, exit 2", async () => {
    // Port 9 (discard) on loopback: nothing listens there, so the connection is refused at once.
    const server = "https://127.0.0.1:9";
    const kubeconfig = writeTokenKubeconfig({ server, "insecure-skip-tls-verify": true }, "t");
    const { code, stderr } = await approve("--wave", "production", "--kubeconfig", kubeconfig);
    expect(code).toBe(2);
    expect(stderr).toContain(
      `cannot reach the hub ${server}: connection refused (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9)`,
    );
    expect(await git("rev-parse", "HEAD")).toBe(rollout);
  });
});

describe("the rollout's commit, read off the hub's state", () => {
  const namespace = "knative-fleet";
  const commit = "3f9c2a7d1b4e5f60718293a4b5c6d7e8f9a0b1c2";
  const state = (changes: Partial<RolloutState>): RolloutState => ({
    schema: 2,
    phase: "Progressing",
    commit,
    startedAt: "2026-01-01T00:00:00Z",
    waveName: "production",
    waves: { canary: { opened: "2026-01-01T00:01:00Z", completed: "2026-01-01T00:20:00Z" } },
    crs: {},
    ...changes,
  });
  const configMap = (data: Record<string, string>, annotations?: Record<string, string>): KubeObject => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "knative-fleet-rollout", namespace, ...(annotations && { annotations }) },
    data,
  });
  const stored = (changes: Partial<RolloutState>) => configMap({ state: JSON.stringify(state(changes)) });

  it("is the commit of a Progressing rollout", () => {
    expect(commitOfHubRollout(stored({}), namespace)).toEqual({ commit });
  });

  it("is refused, saying what was found, for no state, one that cannot be read, or one that is not Progressing", () => {
    const problem = (found: KubeObject | undefined) => {
      const picked = commitOfHubRollout(found, namespace);
      expect(picked).not.toHaveProperty("commit");
      return (picked as { problem: string }).problem;
    };
    expect(problem(undefined)).toContain(
      "no rollout state (no ConfigMap knative-fleet/knative-fleet-rollout",
    );
    expect(problem(configMap({ state: "{" }))).toContain("cannot be read");
    expect(problem(stored({ phase: "Complete" }))).toContain(
      "the rollout is Complete, not Progressing, so no wave waits for an approval: rollout of 3f9c2a7d1b4e has reached every wave",
    );
    const halt = {
      wave: "canary",
      waveIndex: 0,
      resource: "KnativeServing knative-fleet/spoke-1-serving",
      cluster: "fleet-system/spoke-1",
      hash: "ab",
      commit,
      reason: "Deployments not available",
      at: "2026-01-01T00:05:00Z",
    };
    expect(problem(stored({ phase: "Halted", halt }))).toContain("Halted, not Progressing");
    expect(problem(stored({ phase: "Halted", halt }))).toContain("Deployments not available");
    expect(problem(stored({ commit: "3f9c2a7" }))).toContain(
      'names the commit "3f9c2a7", not a whole commit id',
    );
    const refused = configMap(
      { state: JSON.stringify(state({})) },
      { [ROLLOUT_REFUSED_ANNOTATION]: "its MAC does not match" },
    );
    expect(problem(refused)).toContain("Refused, not Progressing");
    expect(problem(refused)).toContain("its MAC does not match");
    for (const found of [undefined, stored({ phase: "Complete" })])
      expect(problem(found)).toContain("give --commit");
  });
});
