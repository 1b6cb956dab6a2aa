import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type Gitea, startGitea } from "../../sandbox/gitea.ts";
import { waitUntil } from "../../support/wait.ts";

// The sandbox's forge is the real Gitea (test/sandbox/gitea.ts): this proves the parts the forge tests
// stand on, each through Gitea's own surface: a push over HTTP with the token, the branch head Gitea
// records, and a commit status written and read back through its REST API. No kube sandbox is needed.
const execFileAsync = promisify(execFile);

async function git(cwd: string, args: string[]): Promise<string> {
  const { stdout } = await execFileAsync("git", args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" },
  });
  return stdout.trim();
}

interface CommitStatus {
  status: string;
  context: string;
  description: string;
  creator: { login: string };
}

describe("the sandbox's Gitea", () => {
  let gitea: Gitea;
  beforeAll(async () => {
    gitea = await startGitea();
  });
  afterAll(async () => {
    await gitea?.stop();
  });

  it("takes a push over HTTP with the token, and a commit status on the pushed commit", async () => {
    expect(new URL(gitea.url).hostname).toBe("127.0.0.1");
    const repo = await gitea.createRepo("fleet");
    expect(repo).toEqual({
      owner: gitea.user,
      name: "fleet",
      cloneUrl: `${gitea.url}/${gitea.user}/fleet.git`,
    });

    const work = await mkdtemp(join(tmpdir(), "knative-fleet-gitea-work-"));
    onTestFinished(() => rm(work, { recursive: true, force: true }));
    await git(work, ["init", "--quiet", "--initial-branch=main"]);
    await writeFile(join(work, "README.md"), "# fleet\n");
    await git(work, ["add", "README.md"]);
    await git(work, [
      "-c",
      "user.name=Ada Operator",
      "-c",
      "user.email=ada@example.com",
      "commit",
      "--quiet",
      "-m",
      "first",
    ]);
    const sha = await git(work, ["rev-parse", "HEAD"]);
    const basic = Buffer.from(`${gitea.user}:${gitea.token}`).toString("base64");
    await git(work, [
      "-c",
      `http.extraHeader=Authorization: Basic ${basic}`,
      "push",
      "--quiet",
      repo.cloneUrl,
      "main",
    ]);

    // Gitea takes in a push's refs asynchronously: until it has, the new branch is missing (404), and on a
    // repository that was empty its API even fails (500, the repository still marked empty).
    const head = await waitUntil(
      "Gitea's main branch after the push",
      () =>
        gitea
          .api<{ commit: { id: string } }>("GET", `/repos/${repo.owner}/${repo.name}/branches/main`)
          .then((branch) => branch.commit.id)
          .catch(() => undefined),
      15_000,
    );
    expect(head).toBe(sha);

    await gitea.api("POST", `/repos/${repo.owner}/${repo.name}/statuses/${sha}`, {
      state: "pending",
      context: "knative-fleet/test/c1",
      description: "applying",
    });
    const statuses = await gitea.api<CommitStatus[]>(
      "GET",
      `/repos/${repo.owner}/${repo.name}/commits/${sha}/statuses`,
    );
    expect(
      statuses.map((s) => ({
        status: s.status,
        context: s.context,
        description: s.description,
        by: s.creator.login,
      })),
    ).toEqual([
      { status: "pending", context: "knative-fleet/test/c1", description: "applying", by: gitea.user },
    ]);
  });
});
