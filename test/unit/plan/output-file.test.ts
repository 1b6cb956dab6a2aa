import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GITHUB_COMMENT_LIMIT, PLAN_MARKER, renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText } from "../../support/fleet-files.ts";
import { balancedMarkdown, fleetRepo, planJson, runPlan } from "./support.ts";

// `knative-fleet plan --output-file FILE` is the artifact CI keeps beside the comment
// (fleet-example/.github/workflows/plan.yml uploads it as the full plan): every cluster's details, however
// long. Standard output is the comment, within GitHub's limit.

const CLUSTERS = 30;
const fleet = (version: string) =>
  Object.fromEntries(
    Array.from({ length: CLUSTERS }, (_, i) => {
      const name = `spoke-${String(i + 1).padStart(2, "0")}`;
      return [`clusters/${name}.yaml`, crText({ name: `${name}-serving`, cluster: name, version })];
    }),
  );

describe("plan --output-file, for a plan longer than a comment", { timeout: 120_000 }, () => {
  it("writes the whole plan, uncut, while standard output keeps within the comment's limit", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", fleet("1.21"));
    await repo.commit("change", fleet("1.22"));
    const refs = ["--repo", repo.dir, "--base", "main", "--head", "change"];
    const { code, plan } = await planJson(...refs);
    expect(code).toBe(0);

    const output = join(repo.dir, "plan.md");
    expect(await runPlan(...refs, "--output-file", output)).toEqual({ code: 0, stdout: "", stderr: "" });
    const file = await readFile(output, "utf8");
    expect(file.length, "the case must not fit a comment, or it tests nothing").toBeGreaterThan(
      GITHUB_COMMENT_LIMIT,
    );
    expect(file).toBe(renderMarkdown(plan, Number.POSITIVE_INFINITY));
    expect(file.startsWith(PLAN_MARKER)).toBe(true);
    expect(file.match(/<summary><b>[^<]*<\/b>/g)).toEqual(
      plan.clusters.map((c) => `<summary><b>${c.cluster}</b>`),
    );
    expect(file).not.toContain("are left out");
    expect(file).not.toContain("The plan is cut here");
    expect(balancedMarkdown(file)).toBe(true);

    const { code: printed, stdout: comment } = await runPlan(...refs);
    expect(printed).toBe(0);
    expect(comment).toBe(renderMarkdown(plan));
    expect(comment.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT);
    expect(comment).toMatch(/The details of \d+ of 30 clusters are left out/);
  });
});
