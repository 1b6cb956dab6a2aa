import { describe, expect, it } from "vitest";
import { GITHUB_COMMENT_LIMIT, PLAN_MARKER, renderMarkdown } from "../../../src/plan/markdown.ts";
import type { FleetPlan } from "../../../src/plan/report.ts";
import { crText } from "../../support/fleet-files.ts";
import { balancedMarkdown, planOfFiles } from "./support.ts";

// GitHub refuses a comment longer than 65,536 characters whole, so a plan that upgrades a big fleet would
// post nothing. The comment keeps what a reviewer decides on and drops the per-cluster details first.

const CLUSTERS = 30;
const fleet = (version: string) =>
  Object.fromEntries(
    Array.from({ length: CLUSTERS }, (_, i) => {
      const name = `spoke-${String(i + 1).padStart(2, "0")}`;
      return [`clusters/${name}.yaml`, crText({ name: `${name}-serving`, cluster: name, version })];
    }),
  );

describe("a plan comment too long for GitHub", { timeout: 120_000 }, () => {
  let plan: FleetPlan;
  const upgrade = async () => {
    plan ??= await planOfFiles(fleet("1.21"), fleet("1.22"));
    return plan;
  };

  it("keeps the verdict, every CR's summary row and the findings, and drops cluster details from the end", async () => {
    const plan = await upgrade();
    const whole = renderMarkdown(plan, Number.POSITIVE_INFINITY);
    expect(whole.length, "the case must not fit, or it tests nothing").toBeGreaterThan(GITHUB_COMMENT_LIMIT);
    expect(whole).not.toContain("are left out");

    const comment = renderMarkdown(plan);
    expect(comment.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT);
    expect(comment.startsWith(PLAN_MARKER)).toBe(true);
    expect(comment).toContain(`## knative-fleet plan: ${CLUSTERS} CRs on ${CLUSTERS} clusters`);
    for (const resource of plan.clusters.flatMap((c) => c.resources))
      expect(comment, resource.name).toContain(`${resource.namespace}/${resource.name}`);
    const kept = comment.match(/<summary><b>/g)?.length ?? 0;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(CLUSTERS);
    expect(comment).toContain(`The details of ${CLUSTERS - kept} of ${CLUSTERS} clusters are left out`);
    // The clusters kept are the first ones, each section as the whole plan has it.
    expect(comment.match(/<summary><b>[^<]*<\/b>/g)).toEqual(
      plan.clusters.slice(0, kept).map((c) => `<summary><b>${c.cluster}</b>`),
    );
    const details = comment.slice(comment.indexOf("<details>"), comment.indexOf("⚠️ The details")).trimEnd();
    expect(whole).toContain(details);
    expect(balancedMarkdown(comment)).toBe(true);
  });

  it("summarizes when the table alone would take half the comment, and cuts at a line when even that does not fit", async () => {
    const plan = await upgrade();
    const summarized = renderMarkdown(plan, 2_500);
    expect(summarized).toContain("A plan too big to show whole (30 clusters)");
    expect(summarized).toContain("| update | KnativeServing | 1.21.3 → 1.22.1 | 30 | 30 |");
    expect(summarized).not.toContain("The plan is cut here");
    expect(balancedMarkdown(summarized)).toBe(true);
    for (const limit of [1_200, 1_600]) {
      const comment = renderMarkdown(plan, limit);
      expect(comment.length, `limit ${limit}`).toBeLessThanOrEqual(limit);
      expect(comment.startsWith(PLAN_MARKER)).toBe(true);
      expect(comment).toContain("The plan is cut here to fit one comment");
      expect(balancedMarkdown(comment), `limit ${limit}`).toBe(true);
    }
  });
});
