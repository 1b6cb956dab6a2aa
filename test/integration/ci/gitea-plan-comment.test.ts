import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { PLAN_MARKER } from "../../../src/plan/index.ts";
import { type Gitea, type GiteaRepo, startGitea } from "../../sandbox/gitea.ts";
import { installCliShims, type Ran, runScript, type Step, substitute } from "../../support/ci-steps.ts";
import { pushChangeOverHttp } from "../../support/git-server.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// The Gitea Actions example (fleet-example/.gitea/workflows/plan.yml) against a real Gitea: a fleet
// repository, a branch with a change and a real pull request; then the example's checkout (as its `with`
// says), its plan step and its comment step, their scripts taken from the YAML with the `${{ }}` Gitea would
// fill in, run in the runner's shell. What is checked is what Gitea then shows on the pull request: one
// comment of the token's user that is the plan, edited on the next push, and a comment someone else starts
// with the marker left alone. `docker run IMAGE` is the CLI on this machine (test/support/ci-steps.ts). No
// kube sandbox is used. The token is a bot account's (KNATIVE_FLEET_PLAN_TOKEN): a job token exists only
// inside a Gitea Actions run.
const execFileAsync = promisify(execFile);

const WORKFLOW = "fleet-example/.gitea/workflows/plan.yml";
const SERVING = (cluster: string, version: string) => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: ${cluster}-serving
spec:
  clusterProfileRef: {name: ${cluster}, namespace: fleet-system}
  version: "${version}"
`;
const FILE = "clusters/spoke-1/knative-serving.yaml";
const SECOND = "clusters/spoke-2/knative-serving.yaml";

interface Workflow {
  env: Record<string, string>;
  jobs: { plan: { steps: Step[] } };
}
interface PullRequest {
  number: number;
  base: { sha: string };
  head: { sha: string };
}
interface Comment {
  id: number;
  body: string;
  user: { id: number; login: string };
}
interface User {
  login: string;
  password: string;
  token: string;
}

async function git(cwd: string, args: string[]): Promise<string> {
  const { stdout } = await execFileAsync("git", args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1", GIT_TERMINAL_PROMPT: "0" },
  });
  return stdout.trim();
}

describe("the Gitea example's plan comment, on a real pull request on Gitea", { timeout: 180_000 }, () => {
  let gitea: Gitea;
  let repo: GiteaRepo;
  let fullName = "";
  let work = "";
  let bin = "";
  let bot: User;
  let reviewer: User;
  let pull = 0;
  /** The comment the reviewer starts with the marker, quoting a plan: the bot's runs must never edit it. */
  let quoted: Comment;
  /** The bot's comment after the first run. */
  let posted: Comment;
  const timings: Record<string, number> = {};

  const createUser = async (login: string, scopes: string[]): Promise<User> => {
    const password = randomBytes(12).toString("hex");
    await gitea.api("POST", "/admin/users", {
      username: login,
      email: `${login}@example.com`,
      password,
      must_change_password: false,
    });
    return { login, password, token: await createToken(login, password, scopes) };
  };
  const createToken = async (login: string, password: string, scopes: string[]): Promise<string> => {
    // Gitea makes a user's tokens only with that user's own password (basic auth).
    const response = await fetch(`${gitea.url}/api/v1/users/${login}/tokens`, {
      method: "POST",
      headers: {
        authorization: `Basic ${Buffer.from(`${login}:${password}`).toString("base64")}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ name: `plan-${randomBytes(4).toString("hex")}`, scopes }),
    });
    expect(response.status, await response.clone().text()).toBe(201);
    return ((await response.json()) as { sha1: string }).sha1;
  };
  const commentAs = async (user: User, body: string): Promise<Comment> => {
    const response = await fetch(`${gitea.url}/api/v1/repos/${fullName}/issues/${pull}/comments`, {
      method: "POST",
      headers: { authorization: `token ${user.token}`, "content-type": "application/json" },
      body: JSON.stringify({ body }),
    });
    expect(response.status, await response.clone().text()).toBe(201);
    return (await response.json()) as Comment;
  };
  const comments = () => gitea.api<Comment[]>("GET", `/repos/${fullName}/issues/${pull}/comments`);
  const markerComments = async (login: string) =>
    (await comments()).filter((c) => c.user.login === login && c.body.startsWith(PLAN_MARKER));
  const push = (files: Record<string, string>, branch: string, message: string) =>
    pushChangeOverHttp(
      repo.cloneUrl,
      { username: gitea.user, password: gitea.token },
      { files, message, branch },
    );
  /** A person's next commit on the pull request's branch (pushChangeOverHttp starts from main). */
  const pushOnto = async (
    branch: string,
    files: Record<string, string>,
    message: string,
  ): Promise<string> => {
    const clone = await mkdtemp(join(work, "person-"));
    const basic = Buffer.from(`${gitea.user}:${gitea.token}`).toString("base64");
    const auth = ["-c", `http.extraHeader=Authorization: Basic ${basic}`];
    await git(clone, [...auth, "clone", "--quiet", "--branch", branch, repo.cloneUrl, "."]);
    for (const [path, text] of Object.entries(files)) {
      await mkdir(dirname(join(clone, path)), { recursive: true });
      await writeFile(join(clone, path), text);
    }
    await git(clone, ["add", "--all"]);
    await git(clone, [
      "-c",
      "user.name=Ada Operator",
      "-c",
      "user.email=ada@example.com",
      "commit",
      "-qm",
      message,
    ]);
    await git(clone, [...auth, "push", "--quiet", "origin", `HEAD:refs/heads/${branch}`]);
    const commit = await git(clone, ["rev-parse", "HEAD"]);
    await rm(clone, { recursive: true, force: true });
    // Gitea updates the pull request from the push asynchronously, as the event a run starts from.
    await waitUntil(`the pull request's head at ${commit}`, async () =>
      (await pullRequest()).head.sha === commit ? true : undefined,
    );
    return commit;
  };
  /** Gitea takes in a push asynchronously: the branch, then the pull request's head, follow. */
  const branchAt = (branch: string, commit: string) =>
    waitUntil(`Gitea's ${branch} at ${commit}`, () =>
      gitea
        .api<{ commit: { id: string } }>("GET", `/repos/${fullName}/branches/${branch}`)
        .then((b) => (b.commit.id === commit ? true : undefined))
        .catch(() => undefined),
    );
  const pullRequest = () => gitea.api<PullRequest>("GET", `/repos/${fullName}/pulls/${pull}`);

  beforeAll(async () => {
    let started = Date.now();
    gitea = await startGitea();
    timings.giteaStartMs = Date.now() - started;
    repo = await gitea.createRepo("fleet");
    fullName = `${repo.owner}/${repo.name}`;
    work = await mkdtemp(join(tmpdir(), "knative-fleet-gitea-ci-"));
    bin = join(work, "bin");
    await mkdir(bin);
    await installCliShims(bin);

    // The bot whose token posts the plan may write the repository, and so could edit anyone's comment there:
    // only the script's own check keeps it off the reviewer's.
    bot = await createUser("plan-bot", ["write:issue", "read:user"]);
    reviewer = await createUser("reviewer", ["write:issue"]);
    await gitea.api("PUT", `/repos/${fullName}/collaborators/${bot.login}`, { permission: "write" });

    started = Date.now();
    const base = await push({ [FILE]: SERVING("spoke-1", "1.21") }, "main", "Serving 1.21 on spoke-1");
    await branchAt("main", base);
    const head = await push({ [FILE]: SERVING("spoke-1", "1.22") }, "upgrade", "Serving 1.22 on spoke-1");
    await branchAt("upgrade", head);
    pull = (
      await gitea.api<PullRequest>("POST", `/repos/${fullName}/pulls`, {
        head: "upgrade",
        base: "main",
        title: "Serving 1.22 on spoke-1",
      })
    ).number;
    expect(await pullRequest()).toMatchObject({ base: { sha: base }, head: { sha: head } });
    // Someone quotes an old plan, marker first; then more comments than one page of Gitea's API (50).
    quoted = await commentAs(reviewer, `${PLAN_MARKER}\n> quoting the last plan: why spoke-1?\n`);
    for (let i = 1; i <= 55; i++) await commentAs(reviewer, `review note ${i}`);
    timings.setupMs = Date.now() - started;
  }, 600_000);

  afterAll(async () => {
    await gitea?.stop();
    if (work) await rm(work, { recursive: true, force: true });
    console.log("gitea plan comment timings:", JSON.stringify(timings));
  });

  const workflow = async () => parse(await readFile(join(repoRoot, WORKFLOW), "utf8")) as Workflow;

  /** The `${{ }}` of the workflow as Gitea fills them in for this pull request (api_url, server_url as Gitea's). */
  const values = async (overrides: Record<string, string> = {}): Promise<Record<string, string>> => {
    const pr = await pullRequest();
    return {
      "github.event.pull_request.number": String(pull),
      "github.event.pull_request.base.sha": pr.base.sha,
      "github.event.pull_request.head.sha": pr.head.sha,
      "vars.KNATIVE_FLEET_CONFIG": "",
      "secrets.KNATIVE_FLEET_PLAN_TOKEN || secrets.GITHUB_TOKEN": bot.token,
      "github.api_url": `${gitea.url}/api/v1`,
      "github.server_url": `${gitea.url}/`,
      "github.repository": fullName,
      "github.run_number": "1",
      ...overrides,
    };
  };

  /** actions/checkout as the example's `with` asks: the pull request's ref from Gitea, the whole history. */
  const checkout = async (fill: Record<string, string>): Promise<string> => {
    const { jobs } = await workflow();
    const step = jobs.plan.steps.find((s) => s.uses?.startsWith("actions/checkout@"));
    expect(step?.with).toMatchObject({ "fetch-depth": 0, "persist-credentials": false });
    const ref = substitute(String(step!.with!.ref), fill);
    const workspace = await mkdtemp(join(work, "workspace-"));
    await git(workspace, ["init", "--quiet"]);
    await git(workspace, [
      "fetch",
      "--quiet",
      repo.cloneUrl,
      "+refs/heads/*:refs/remotes/origin/*",
      `+${ref}:refs/remotes/pull/head`,
    ]);
    await git(workspace, ["checkout", "--quiet", "--detach", "refs/remotes/pull/head"]);
    expect(await git(workspace, ["rev-parse", "HEAD"])).toBe(fill["github.event.pull_request.head.sha"]);
    return workspace;
  };

  /** The named steps of the job, one after the other, as act_runner runs a `run` step (bash -e -o pipefail). */
  async function runSteps(names: string[], fill: Record<string, string>, workspace: string) {
    const { env: workflowEnv, jobs } = await workflow();
    const runnerTemp = await mkdtemp(join(work, "runner-"));
    const output = join(runnerTemp, "output");
    await writeFile(output, "");
    const ran = new Map<string, Ran>();
    for (const name of names) {
      const step = jobs.plan.steps.find((candidate) => candidate.name === name);
      expect(step?.run, name).toBeDefined();
      const outputs = await readOutputs(output);
      const env = {
        PATH: `${bin}:${dirname(process.execPath)}:${process.env.PATH}`,
        HOME: work,
        TMPDIR: runnerTemp,
        // The image's bundled releases (the docker shim hands them to the CLI, as the image does).
        KO_DATA_PATH: knativeReleasesDir(),
        ...workflowEnv,
        ...Object.fromEntries(
          Object.entries(step!.env ?? {}).map(([key, value]) => [
            key,
            substitute(value, { "steps.plan.outputs.dir": outputs.dir ?? "", ...fill }),
          ]),
        ),
        GITHUB_WORKSPACE: workspace,
        RUNNER_TEMP: runnerTemp,
        GITHUB_OUTPUT: output,
      };
      const started = Date.now();
      ran.set(
        name,
        await runScript(
          ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c"],
          substitute(step!.run!, fill),
          env,
          workspace,
        ),
      );
      timings[`${name} (last)`] = Date.now() - started;
    }
    return { ran, outputs: await readOutputs(output) };
  }
  const readOutputs = async (file: string): Promise<Record<string, string>> =>
    Object.fromEntries(
      (await readFile(file, "utf8"))
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split("=", 2) as [string, string]),
    );

  /** Checkout, plan and comment, as one run of the workflow for the pull request's current head. */
  async function runWorkflow() {
    const fill = await values();
    const workspace = await checkout(fill);
    const result = await runSteps(["knative-fleet plan", "Comment on the pull request"], fill, workspace);
    const plan = await readFile(join(result.outputs.dir!, "plan.md"), "utf8");
    return { ...result, plan };
  }

  it("the first run posts the plan as one comment of the token's user, not over the reviewer's quote", async () => {
    const { ran, outputs, plan } = await runWorkflow();
    const planned = ran.get("knative-fleet plan")!;
    expect(planned, planned.stderr).toMatchObject({ code: 0 });
    expect(outputs["exit-code"]).toBe("0");
    // The whole plan in the job log too.
    expect(planned.stdout).toContain(plan);
    expect(plan.startsWith(PLAN_MARKER)).toBe(true);
    expect(plan).toContain("spoke-1-serving");
    expect(plan).toContain(FILE);
    const commented = ran.get("Comment on the pull request")!;
    expect(commented, commented.stderr).toMatchObject({ code: 0 });

    const mine = await markerComments(bot.login);
    expect(mine).toHaveLength(1);
    posted = mine[0]!;
    expect(posted.body).toBe(plan);
    expect(commented.stdout).toBe(
      `knative-fleet plan: posted ${gitea.url}/${fullName}/pulls/${pull}#issuecomment-${posted.id}\n`,
    );
    // The reviewer's quote, which starts with the marker too and came first, is as it was.
    const all = await comments();
    expect(all.find((c) => c.id === quoted.id)?.body).toBe(quoted.body);
    expect(all).toHaveLength(57);
    // Why the script ends its paging on a page with nothing new: Gitea answers this list whole, whatever the
    // page, so "until an empty page" would never end.
    expect(
      await gitea.api<Comment[]>("GET", `/repos/${fullName}/issues/${pull}/comments?limit=50&page=2`),
    ).toHaveLength(57);
  });

  it("a push to the pull request: the next run edits that comment with the new plan, no new comment", async () => {
    const before = (await comments()).length;
    await pushOnto("upgrade", { [SECOND]: SERVING("spoke-2", "1.22") }, "Serving 1.22 on spoke-2");
    const { ran, plan } = await runWorkflow();
    expect(ran.get("knative-fleet plan")).toMatchObject({ code: 0 });
    const commented = ran.get("Comment on the pull request")!;
    expect(commented, commented.stderr).toMatchObject({ code: 0 });
    expect(commented.stdout).toMatch(/^knative-fleet plan: updated /);
    expect(plan).toContain("spoke-2-serving");
    expect(plan).toContain(SECOND);

    const mine = await markerComments(bot.login);
    expect(mine.map((c) => c.id)).toEqual([posted.id]);
    expect(mine[0]!.body).toBe(plan);
    expect(mine[0]!.body).not.toBe(posted.body);
    const all = await comments();
    expect(all).toHaveLength(before);
    expect(all.find((c) => c.id === quoted.id)?.body).toBe(quoted.body);
  });

  it("a broken file: the plan's exit code 1 for the failing step, and the comment is the plan with the finding", async () => {
    await pushOnto(
      "upgrade",
      { [FILE]: `${SERVING("spoke-1", "1.22")}  registry:\n    overide: {}\n` },
      "a typo in spoke-1's registry",
    );
    const { ran, outputs, plan } = await runWorkflow();
    expect(ran.get("knative-fleet plan")).toMatchObject({ code: 0 });
    expect(outputs["exit-code"]).toBe("1");
    expect(plan.startsWith(PLAN_MARKER)).toBe(true);
    expect(plan).toContain("overide");
    expect(ran.get("Comment on the pull request")).toMatchObject({ code: 0 });
    const mine = await markerComments(bot.login);
    expect(mine.map((c) => c.id)).toEqual([posted.id]);
    expect(mine[0]!.body).toBe(plan);
  });

  it("an API error fails the step with the status: a bad token, a token that may not write comments", async () => {
    const fill = await values();
    const workspace = await checkout(fill);
    const { outputs } = await runSteps(["knative-fleet plan"], fill, workspace);
    const comment = async (token: string) =>
      (
        await runSteps(
          ["Comment on the pull request"],
          {
            ...fill,
            "secrets.KNATIVE_FLEET_PLAN_TOKEN || secrets.GITHUB_TOKEN": token,
            // The plan of the run above.
            "steps.plan.outputs.dir": outputs.dir!,
          },
          workspace,
        )
      ).ran.get("Comment on the pull request")!;
    const before = await comments();

    const unknown = await comment("0".repeat(40));
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(
      new RegExp(
        `^knative-fleet plan: commenting on pull request ${pull} failed: GET \\S+/api/v1/user answered 401 `,
      ),
    );

    // The bot's own token, read-only: it finds its comment, and Gitea refuses the edit.
    const readOnly = await comment(await createToken(bot.login, bot.password, ["read:issue", "read:user"]));
    expect(readOnly.code).not.toBe(0);
    expect(readOnly.stderr).toMatch(
      new RegExp(
        `^knative-fleet plan: commenting on pull request ${pull} failed: PATCH \\S+/issues/comments/${posted.id} answered 403 `,
      ),
    );
    expect(readOnly.stderr).toContain("token does not have at least one of required scope(s)");
    expect(await comments()).toEqual(before);
  });

  it("a plan too long for one request: the comment keeps the summary and points at the run's log", async () => {
    const summary = `${PLAN_MARKER}\n## knative-fleet plan\n\n| CR | change |\n| --- | --- |\n| spoke-1-serving | 1.21 -> 1.22 |\n`;
    const dir = await mkdtemp(join(work, "long-plan-"));
    await writeFile(
      join(dir, "plan.md"),
      `${summary}\n<details><summary>spoke-1</summary>\n\n${"a very long diff line\n".repeat(60_000)}</details>\n`,
    );
    const fill = await values({ "steps.plan.outputs.dir": dir });
    const { ran } = await runSteps(["Comment on the pull request"], fill, work);
    expect(ran.get("Comment on the pull request")).toMatchObject({ code: 0 });
    const mine = await markerComments(bot.login);
    expect(mine.map((c) => c.id)).toEqual([posted.id]);
    expect(mine[0]!.body).toBe(
      `${summary}\n\nThe per-cluster details are too long for a comment: see the log of [this run](${gitea.url}/${fullName}/actions/runs/1?by_index=1).\n`,
    );
  });
});
