import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { PLAN_MARKER } from "../../../src/plan/index.ts";
import { installCliShims, type Ran, runScript, type Step, substitute } from "../../support/ci-steps.ts";
import { createFleetRepo, type FleetRepo } from "../../support/fleet-repo.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

// The CI examples users copy (fleet-example/.github/workflows/plan.yml, fleet-example/.gitlab-ci.yml), run
// as the CI would run them: their knative-fleet steps' scripts, taken from the YAML with the CI's variables
// set to a fixture pull request, against a real repository with a base and a head commit. `docker run
// IMAGE` is the CLI on this machine with the volumes mapped, as the image's entrypoint is the CLI.

const SERVING = (version: string, extra = "") => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: spoke-1-serving
spec:
  clusterProfileRef: {name: spoke-1, namespace: fleet-system}
  version: "${version}"
${extra}`;
const FILE = "clusters/spoke-1/knative-serving.yaml";

describe("the CI examples, run against a fixture repository", { timeout: 120_000 }, () => {
  let work = "";
  let bin = "";
  let repo: FleetRepo;
  let base = "";
  let valid = "";
  let invalid = "";
  const notes: { token: string | undefined; body: string }[] = [];
  let api: Server;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), "knative-fleet-ci-"));
    bin = join(work, "bin");
    await mkdir(bin);
    await installCliShims(bin);

    repo = await createFleetRepo();
    base = await repo.commit("main", { [FILE]: SERVING("1.21") });
    invalid = await repo.commit("broken", { [FILE]: SERVING("1.22", "  registry:\n    overide: {}\n") });
    valid = await repo.commit("upgrade", { [FILE]: SERVING("1.22") });

    api = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", () => {
        response.setHeader("content-type", "application/json");
        if (request.method === "GET") return response.end("[]");
        notes.push({
          token: request.headers["private-token"] as string | undefined,
          body: (JSON.parse(body) as { body: string }).body,
        });
        response.statusCode = 201;
        response.end('{"id": 1}');
      });
    });
    await new Promise<void>((listening) => api.listen(0, "127.0.0.1", listening));
  });

  afterAll(async () => {
    api?.close();
    await rm(work, { recursive: true, force: true });
    if (repo) await rm(repo.dir, { recursive: true, force: true });
    await rm("/tmp/plan.md", { force: true });
    await rm("/tmp/plan-stderr.txt", { force: true });
  });

  const baseEnv = () => ({
    PATH: `${bin}:${dirname(process.execPath)}:${process.env.PATH}`,
    HOME: work,
    // The image's bundled releases.
    KO_DATA_PATH: knativeReleasesDir(),
  });

  const checkout = async (commit: string) => {
    await new Promise<void>((done, fail) =>
      execFile("git", ["checkout", "--quiet", "--detach", commit], { cwd: repo.dir }, (error) =>
        error ? fail(error) : done(),
      ),
    );
  };

  describe("GitHub Actions: fleet-example/.github/workflows/plan.yml", () => {
    interface Job {
      environment?: string;
      needs?: string;
      if?: string;
      steps: Step[];
    }
    const workflow = async () =>
      parse(await readFile(join(repoRoot, "fleet-example/.github/workflows/plan.yml"), "utf8")) as {
        on: unknown;
        env: Record<string, string>;
        jobs: Record<"plan" | "live-plan", Job>;
      };

    async function runWorkflow(
      head: string,
      job: "plan" | "live-plan" = "plan",
      names = ["Fetch the base commit", "knative-fleet validate", "knative-fleet plan"],
      secrets: Record<string, string> = {},
    ) {
      await checkout(head);
      const { env: workflowEnv, jobs } = await workflow();
      const runnerTemp = await mkdtemp(join(work, "runner-"));
      const output = join(runnerTemp, "output");
      await writeFile(output, "");
      const values: Record<string, string> = {
        "github.event.pull_request.base.sha": base,
        "github.event.pull_request.head.sha": head,
        "github.server_url": dirname(repo.dir),
        "github.repository": basename(repo.dir),
        "secrets.KNATIVE_FLEET_HUB_KUBECONFIG": "",
        "secrets.KNATIVE_FLEET_PROVIDER_FILE": "",
        "vars.KNATIVE_FLEET_CONFIG": "",
        ...secrets,
      };
      const ran = new Map<string, Ran>();
      for (const name of names) {
        const step = jobs[job].steps.find((candidate) => candidate.name === name);
        expect(step?.run, name).toBeDefined();
        const env = {
          ...baseEnv(),
          ...workflowEnv,
          ...Object.fromEntries(
            Object.entries(step!.env ?? {}).map(([key, value]) => [key, substitute(value, values)]),
          ),
          GITHUB_WORKSPACE: repo.dir,
          RUNNER_TEMP: runnerTemp,
          GITHUB_OUTPUT: output,
        };
        // GitHub's `run` shell: bash --noprofile --norc -eo pipefail {0}.
        ran.set(
          name,
          await runScript(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"],
            substitute(step!.run!, values),
            env,
            repo.dir,
          ),
        );
      }
      const outputs = Object.fromEntries(
        (await readFile(output, "utf8"))
          .split("\n")
          .filter(Boolean)
          .map((line) => line.split("=", 2) as [string, string]),
      );
      return { ran, outputs };
    }

    it("a valid change: validate and plan exit 0, and the plan the comment posts is written", async () => {
      const { ran, outputs } = await runWorkflow(valid);
      for (const [name, result] of ran) expect(result, name).toMatchObject({ code: 0 });
      expect(ran.get("knative-fleet validate")!.stdout).toBe("1 file, 1 resource, 0 errors\n");
      expect(outputs["exit-code"]).toBe("0");
      const plan = await readFile(join(outputs.dir!, "plan.md"), "utf8");
      expect(plan.startsWith(PLAN_MARKER)).toBe(true);
      expect(plan).toContain("spoke-1-serving");
    });

    it("a broken file: an annotation on its line, the plan's exit code 1 for the failing step, the plan still written", async () => {
      const { ran, outputs } = await runWorkflow(invalid);
      const validate = ran.get("knative-fleet validate")!;
      expect(validate.code).toBe(1);
      expect(validate.stdout).toContain(
        `::error file=${FILE},line=9,col=5,title=knative-fleet%3A spec.registry.overide::unrecognized key; did you mean override?\n`,
      );
      expect(ran.get("knative-fleet plan")!.code).toBe(0);
      expect(outputs["exit-code"]).toBe("1");
      expect((await readFile(join(outputs.dir!, "plan.md"), "utf8")).startsWith(PLAN_MARKER)).toBe(true);
    });

    it("the offline plan waits for nobody: the plan job has no environment and reads no secret", async () => {
      const { jobs } = await workflow();
      const text = await readFile(join(repoRoot, "fleet-example/.github/workflows/plan.yml"), "utf8");
      expect(jobs.plan.environment).toBeUndefined();
      expect(JSON.stringify(jobs.plan)).not.toMatch(/secrets\./);
      // The live plan alone is in the protected environment, and runs only when asked for.
      expect(jobs["live-plan"]).toMatchObject({ environment: "knative-fleet-plan", needs: "plan" });
      expect(jobs["live-plan"].if).toContain("vars.KNATIVE_FLEET_LIVE_PLAN == 'true'");
      expect(new Set(text.match(/secrets\.\w+/g))).toEqual(
        new Set(["secrets.KNATIVE_FLEET_HUB_KUBECONFIG", "secrets.KNATIVE_FLEET_PROVIDER_FILE"]),
      );
      expect(jobs.plan.steps.map((step) => step.name ?? step.uses)).toContain("knative-fleet validate");
      expect(jobs.plan.steps.find((step) => step.name === "knative-fleet validate")!.run).toContain(
        "validate -o github",
      );
    });

    it("runs on a change to any fleet path, not only clusters/", async () => {
      expect((await workflow()).on).toEqual({ pull_request_target: { "paths-ignore": ["status/**"] } });
    });

    it("the live plan without the environment's secret fails, saying which secret is missing", async () => {
      const { ran } = await runWorkflow(valid, "live-plan", [
        "Fetch the base commit",
        "knative-fleet live plan",
      ]);
      const live = ran.get("knative-fleet live plan")!;
      expect(live.code).toBe(1);
      expect(live.stdout).toContain("::error title=knative-fleet live plan::");
      expect(live.stdout).toContain("KNATIVE_FLEET_HUB_KUBECONFIG");
    });
  });

  describe("the image every CI example runs is the chart's", () => {
    it("image.repository of values.yaml, tagged with the chart's appVersion", async () => {
      const values = parse(await readFile(join(repoRoot, "charts/knative-fleet/values.yaml"), "utf8")) as {
        image: { repository: string };
      };
      const chart = parse(await readFile(join(repoRoot, "charts/knative-fleet/Chart.yaml"), "utf8")) as {
        appVersion: string;
      };
      const image = `${values.image.repository}:${chart.appVersion}`;
      for (const file of [
        "fleet-example/.github/workflows/plan.yml",
        "fleet-example/.gitea/workflows/plan.yml",
        "fleet-example/.gitlab-ci.yml",
      ]) {
        const text = await readFile(join(repoRoot, file), "utf8");
        const references = [...text.matchAll(/\b[\w.-]+\.[a-z]+\/[\w./-]*knative-fleet:[\w.-]+/g)].map(
          (m) => m[0],
        );
        expect(references.length, file).toBeGreaterThan(0);
        expect(new Set(references), file).toEqual(new Set([image]));
      }
    });
  });

  describe("GitLab CI: fleet-example/.gitlab-ci.yml", () => {
    const pipeline = async () =>
      parse(await readFile(join(repoRoot, "fleet-example/.gitlab-ci.yml"), "utf8")) as Record<
        string,
        { script?: string[]; extends?: string }
      >;

    async function runJob(job: string, head: string): Promise<Ran> {
      await checkout(head);
      const jobs = await pipeline();
      const script = (jobs[job]?.script ?? jobs[jobs[job]?.extends ?? ""]?.script)?.join("\n");
      expect(script, job).toBeDefined();
      const { port } = api.address() as AddressInfo;
      const env = {
        ...baseEnv(),
        CI_PROJECT_DIR: repo.dir,
        CI_MERGE_REQUEST_DIFF_BASE_SHA: base,
        CI_COMMIT_SHA: head,
        CI_API_V4_URL: `http://127.0.0.1:${port}/api/v4`,
        CI_PROJECT_ID: "7",
        CI_MERGE_REQUEST_IID: "3",
        CI_JOB_URL: "https://gitlab.example/jobs/1",
        GITLAB_PLAN_TOKEN: "glpat-fixture",
      };
      // The runner's shell stops at the first failing command, as `sh -e` does.
      return runScript(["sh", "-e", "-c"], script!, env, repo.dir);
    }

    it("validate writes the Code Quality report it declares: empty for a valid change, the finding for a broken file", async () => {
      const report = join(repo.dir, "gl-code-quality-report.json");
      expect(await runJob("knative-fleet-validate", valid)).toMatchObject({ code: 0 });
      expect(JSON.parse(await readFile(report, "utf8"))).toEqual([]);
      expect(await runJob("knative-fleet-validate", invalid)).toMatchObject({ code: 1 });
      expect(JSON.parse(await readFile(report, "utf8"))).toMatchObject([
        { severity: "major", location: { path: FILE, lines: { begin: 9 } } },
      ]);
      await rm(report);
    });

    it("plan posts the note with the plan, and the job's exit code is the plan's", async () => {
      notes.length = 0;
      const passed = await runJob("knative-fleet-plan", valid);
      expect(passed.code, passed.stderr).toBe(0);
      expect(notes).toHaveLength(1);
      expect(notes[0]!.token).toBe("glpat-fixture");
      expect(notes[0]!.body.startsWith(PLAN_MARKER)).toBe(true);
      expect(notes[0]!.body).toContain("spoke-1-serving");
      const failed = await runJob("knative-fleet-plan", invalid);
      expect(failed.code).toBe(1);
      expect(notes).toHaveLength(2);
      expect(notes[1]!.body).toContain("overide");
    });
  });

  // Its steps run against a real Gitea in test/integration/ci/gitea-plan-comment.test.ts; here, its shape.
  describe("Gitea Actions: fleet-example/.gitea/workflows/plan.yml", () => {
    it("parses: pull_request_target, the pull request's ref checked out as data, no secret but the comment's token", async () => {
      const ci = (expression: string) => `\${{ ${expression} }}`;
      const text = await readFile(join(repoRoot, "fleet-example/.gitea/workflows/plan.yml"), "utf8");
      const workflow = parse(text) as { on: unknown; jobs: { plan: { steps: Step[] } } };
      expect(workflow.on).toEqual({ pull_request_target: { "paths-ignore": ["status/**"] } });
      const steps = workflow.jobs.plan.steps;
      expect(steps.map((step) => step.name ?? step.uses)).toEqual([
        "actions/checkout@v4",
        "knative-fleet plan",
        "Comment on the pull request",
        "Fail on errors",
      ]);
      expect(steps[0]!.with).toEqual({
        ref: `refs/pull/${ci("github.event.pull_request.number")}/head`,
        "fetch-depth": 0,
        "persist-credentials": false,
      });
      // Gitea has no environments with required reviewers: no cluster credentials, the plan is offline.
      expect(new Set(text.match(/secrets\.\w+/g))).toEqual(
        new Set(["secrets.KNATIVE_FLEET_PLAN_TOKEN", "secrets.GITHUB_TOKEN"]),
      );
      expect(steps[2]!.env?.TOKEN).toBe(ci("secrets.KNATIVE_FLEET_PLAN_TOKEN || secrets.GITHUB_TOKEN"));
      expect(steps[2]!.run).toContain(`const marker = "${PLAN_MARKER}";`);
    });
  });
});
