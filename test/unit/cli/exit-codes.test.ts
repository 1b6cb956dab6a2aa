import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT_CHANGES, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK } from "../../../src/commands/command.ts";
import { commands } from "../../../src/commands/main.ts";
import { runCli } from "../../support/cli.ts";
import { crText } from "../../support/fleet-files.ts";
import { createFleetRepo, type FleetRepo } from "../../support/fleet-repo.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

// docs/cli.md's table of exit codes, and every command run into each case it can meet without a server.
// The exit 1 of `status` (a CR not Ready) and `clusters` (a spoke unreachable) need a hub: they are checked
// in test/integration/commands/status-command.test.ts and test/integration/access/clusters-command.test.ts.

/** The `| 0 | ... |` rows of the Exit codes section: code -> meaning. */
async function documentedExitCodes(): Promise<Map<number, string>> {
  const doc = await readFile(join(repoRoot, "docs", "cli.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Exit codes"));
  const rows = [...section.matchAll(/^\| (\d) \| ([^|]+) \|/gm)];
  return new Map(rows.map((m) => [Number(m[1]), m[2]!.trim()]));
}

let work: string;
let fleet: FleetRepo;
/** A hub nobody answers at: port 9 (discard) on loopback refuses at once. */
let unreachableHub: string;
const badConfig = () => join(work, "config.yaml");

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "knative-fleet-exit-codes-"));
  await writeFile(badConfig(), "repository:\n  url: https://git.example/fleet.git\n  brnch: main\n");
  unreachableHub = writeTokenKubeconfig(
    { server: "https://127.0.0.1:9", "insecure-skip-tls-verify": true },
    "t",
  );
  fleet = await createFleetRepo();
  await fleet.commit("main", { "README.md": "the fleet\n" });
  const file = "clusters/spoke-1/knative-serving.yaml";
  await fleet.commit("main", {
    [file]: crText({ name: "spoke-1-serving", cluster: "spoke-1", version: "1.22" }),
  });
  await fleet.commit("main", { "clusters/spoke-2/knative-serving.yaml": "kind: KnativeServing\nspec: [\n" });
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
  await rm(fleet.dir, { recursive: true, force: true });
});

/** [command line, expected code]: each documented case a command meets offline. */
const CASES: () => [string[], number][] = () => {
  const plan = ["plan", "--repo", fleet.dir];
  return [
    [["run"], EXIT_ERROR], // --config is required
    [["run", "--config", badConfig(), "--kodata", work], EXIT_ERROR],
    [["validate", join(repoRoot, "fleet-example")], EXIT_OK],
    [["validate", fleet.dir], EXIT_FINDINGS],
    [["validate", join(work, "missing")], EXIT_ERROR],
    [["validate", "--config", badConfig(), join(repoRoot, "fleet-example")], EXIT_ERROR],
    [[...plan, "--base", "HEAD~2", "--head", "HEAD~1", "--kodata", knativeReleasesDir()], EXIT_OK],
    [
      [
        ...plan,
        "--base",
        "HEAD~2",
        "--head",
        "HEAD~1",
        "--kodata",
        knativeReleasesDir(),
        "--detailed-exitcode",
      ],
      EXIT_CHANGES,
    ],
    [[...plan, "--base", "HEAD~1", "--head", "HEAD~1", "--detailed-exitcode"], EXIT_OK], // no change
    [[...plan, "--base", "HEAD~2", "--head", "HEAD~2"], EXIT_FINDINGS], // no fleet file in head
    [[...plan, "--base", "HEAD~1", "--head", "HEAD"], EXIT_FINDINGS], // head's file is broken
    [[...plan, "--base", "HEAD~1", "--head", "HEAD", "--detailed-exitcode"], EXIT_FINDINGS],
    [[...plan, "--base", "HEAD~9", "--head", "HEAD"], EXIT_ERROR],
    // Live, the added CR's cluster is read through the hub: unreachable, the plan says so and exits 2.
    [
      [
        ...plan,
        "--base",
        "HEAD~2",
        "--head",
        "HEAD~1",
        "--kodata",
        knativeReleasesDir(),
        "--kubeconfig",
        unreachableHub,
      ],
      EXIT_ERROR,
    ],
    [["clusters", "--kubeconfig", unreachableHub], EXIT_ERROR],
    [["clusters", "--config", badConfig()], EXIT_ERROR],
    [["status", "--kubeconfig", unreachableHub], EXIT_ERROR],
    [["status", "--kubeconfig", unreachableHub, "--context", "elsewhere"], EXIT_ERROR],
    [["version"], EXIT_OK],
    [["version", "--kodata", join(work, "missing")], EXIT_ERROR],
    [["compile-kodata", "--kodata", join(work, "missing")], EXIT_ERROR],
    [["completion", "bash"], EXIT_OK],
    [["completion"], EXIT_ERROR],
    ...commands.map((command): [string[], number] => [[command.name, "--no-such-flag"], EXIT_ERROR]),
    [["no-such-command"], EXIT_ERROR],
    [[], EXIT_ERROR],
  ];
};

describe("exit codes", () => {
  it("are the four docs/cli.md documents, with the constants the commands use", async () => {
    const documented = await documentedExitCodes();
    expect([...documented.keys()]).toEqual([EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_CHANGES]);
    expect(documented.get(EXIT_CHANGES)).toContain("--detailed-exitcode");
    expect(documented.get(EXIT_FINDINGS)).toContain("what it checked is wrong");
    expect(documented.get(EXIT_ERROR)).toContain("could not do its job");
  });

  it("every command follows the table", async () => {
    const results: string[] = [];
    const expected: string[] = [];
    for (const [argv, code] of CASES()) {
      const run = await runCli(...argv);
      results.push(`${argv.join(" ")} -> ${run.code}${run.code === code ? "" : `\n${run.stderr}`}`);
      expected.push(`${argv.join(" ")} -> ${code}`);
      // Exit 2 always says why (on stderr, or in the plan); a finding or success never prints a stack trace.
      if (code === EXIT_ERROR) expect(run.stderr || run.stdout, argv.join(" ")).toMatch(/\w/);
      if (code !== EXIT_ERROR) expect(run.stderr, argv.join(" ")).not.toMatch(/\n\s+at /);
    }
    expect(results).toEqual(expected);
    const covered = new Set(CASES().map(([argv]) => argv[0]));
    for (const command of commands) expect(covered, command.name).toContain(command.name);
  });

  it("the same unreachable hub is exit 2 from every command that reads it, naming the server", async () => {
    for (const command of ["status", "clusters"]) {
      const run = await runCli(command, "--kubeconfig", unreachableHub);
      expect(run.code, command).toBe(EXIT_ERROR);
      expect(run.stderr, command).toContain("https://127.0.0.1:9");
      expect(run.stderr, command).toContain("ECONNREFUSED");
    }
  });

  it("a service whose hub is unreachable at start says so in one log line naming the hub, and exits 2", async () => {
    // A real process: the service logs (pino) to its own stdout. Found by the soak: a replica restarted while
    // cut off from the hub printed a bare undici stack that named an address only.
    const config = join(work, "run.yaml");
    await writeFile(
      config,
      `repository:\n  url: http://127.0.0.1:9/fleet.git\ncacheDir: ${join(work, "cache")}\nmetricsPort: 0\nbindAddress: 127.0.0.1\n`,
    );
    const argv = ["run", "--config", config, "--kodata", work, "--kubeconfig", unreachableHub];
    const run = await promisify(execFile)(process.execPath, [join(repoRoot, "src", "cli.ts"), ...argv], {
      env: { PATH: process.env.PATH ?? "" },
    }).then(
      () => ({ code: EXIT_OK, stdout: "", stderr: "" }),
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(run.code).toBe(EXIT_ERROR);
    expect(run.stderr).toBe("");
    const lines = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.find((line) => line.level === 60)).toMatchObject({
      msg: "could not start; exiting so a restart tries again",
      err: expect.stringMatching(/hub API server https:\/\/127\.0\.0\.1:9 did not answer .*ECONNREFUSED/),
    });
  }, 60_000); // a Node process that loads the whole service: seconds on a loaded machine

  it("config-file errors name file, line, column and key, as fleet-file errors do", async () => {
    const run = await runCli("validate", "--config", badConfig(), join(repoRoot, "fleet-example"));
    expect(run.stderr).toContain(`${badConfig()}:3:3 repository.brnch: unrecognized key`);
  });
});
