import { beforeAll, describe, expect, it } from "vitest";
import {
  GITHUB_COMMENT_LIMIT,
  PLAN_MARKER,
  renderMarkdown,
  SUMMARY_ABOVE_CLUSTERS,
} from "../../../src/plan/markdown.ts";
import type { FleetPlan } from "../../../src/plan/report.ts";
import { bigFleetPlan } from "../../support/big-fleet.ts";
import { balancedMarkdown } from "./support.ts";

// The plan comment of a merge that upgrades every CR of 1,000 clusters (2,000 CRs) in a rollout, with joins,
// departures, warnings and errors (scripts/bench-reports.ts prints its size and render time). Whole, it
// runs to megabytes; the last-resort cut used to keep the first couple hundred rows of the summary table
// and drop the findings, the placements and the rollout. Summarized, all of those stay.

const cells = (line: string) =>
  line
    .slice(1, -1)
    .split("|")
    .map((cell) => cell.trim());
/** The rows of the Markdown table that starts with `header`. */
const rowsOf = (text: string, header: string) =>
  text.slice(text.indexOf(header)).split("\n\n")[0]!.split("\n").slice(2).map(cells);

describe("the plan comment of 1,000 clusters", { timeout: 120_000 }, () => {
  let plan: FleetPlan;
  let comment: string;
  beforeAll(async () => {
    plan = await bigFleetPlan(1_000);
    comment = renderMarkdown(plan);
  });

  it("fits one comment with room, without the last-resort cut, every section closed", () => {
    expect(plan.changes).toBe(2_000);
    expect(comment.length).toBeLessThan(GITHUB_COMMENT_LIMIT * 0.8);
    expect(comment.startsWith(PLAN_MARKER)).toBe(true);
    expect(comment).not.toContain("The plan is cut here");
    expect(balancedMarkdown(comment)).toBe(true);
    expect(comment.split("\n").filter((line) => line.startsWith("### "))).toEqual([
      "### CRs that need a look (46)",
      "### Findings",
      "### Placements",
      "### Rollout",
    ]);
  });

  it("counts every CR by action, kind and version, and lists the ones that need a look, errors first", () => {
    expect(comment).toContain("❌ **16 errors**, ⚠️ 20 warnings");
    const counts = rowsOf(comment, "| Action | Kind | Version | CRs | Clusters |");
    expect(counts.reduce((sum, row) => sum + Number(row[3]), 0)).toBe(2_000);
    expect(counts.map((row) => row.slice(0, 2).join(" "))).toEqual([
      "create KnativeEventing",
      "create KnativeServing",
      "update KnativeEventing",
      "update KnativeServing",
      "delete KnativeEventing",
      "delete KnativeServing",
    ]);
    const resources = plan.clusters.flatMap((c) => c.resources);
    const looks = resources.filter((r) => r.action !== "update" || r.findings.length > 0);
    const listed = rowsOf(comment, "| Cluster | CR | Action | Objects +/~/- |");
    expect(listed.map((row) => row[1])).toEqual(
      expect.arrayContaining(looks.map((r) => `${r.kind} ${r.namespace}/${r.name}`)),
    );
    expect(listed).toHaveLength(looks.length);
    const errors = listed.findIndex((row) => !row[2]!.endsWith("❌"));
    expect(listed.slice(errors).some((row) => row[2]!.endsWith("❌"))).toBe(false);
    for (const r of resources)
      for (const finding of r.findings)
        expect(comment).toContain(`${r.cluster}, ${r.kind} ${r.namespace}/${r.name}: \`${finding.code}\``);
  });

  it("counts the placements' selections, shows each distinct merged spec once, and counts each wave", () => {
    expect(comment).toContain("- selects now: 997 clusters\n- selects after the merge: 998 clusters");
    expect(comment.match(/<details><summary>600 clusters \(/g)).toHaveLength(2);
    expect(comment.match(/<details><summary>398 clusters \(/g)).toHaveLength(2);
    const waves = rowsOf(comment, "| wave | CRs | clusters | change |");
    expect(waves.map((row) => row[0])).toEqual(["canary", "prod-eu", "prod-us", "remaining"]);
    expect(waves.reduce((sum, row) => sum + Number(row[1]), 0)).toBe(1_996);
  });

  it("keeps the details of the clusters with an error first, as far as they fit, and says how many are left out", () => {
    const kept = [...comment.matchAll(/<summary><b>([^<]*)<\/b>/g)].map((m) => m[1]);
    const withErrors = plan.clusters
      .filter((c) => c.resources.some((r) => r.findings.some((f) => f.severity === "error")))
      .map((c) => c.cluster);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept).toEqual(withErrors.slice(0, kept.length));
    expect(comment).toContain(`The details of ${1_000 - kept.length} of 1000 clusters are left out`);
  });

  it("stays the same size for twice the fleet", async () => {
    const twice = renderMarkdown(await bigFleetPlan(2_000));
    expect(twice.length).toBeLessThan(GITHUB_COMMENT_LIMIT * 0.8);
    expect(twice).not.toContain("The plan is cut here");
  });

  it(`summarizes above ${SUMMARY_ABOVE_CLUSTERS} clusters even when the whole table would fit`, async () => {
    const small = await bigFleetPlan(SUMMARY_ABOVE_CLUSTERS + 1);
    const bare = { ...small, placements: { inventory: "none" as const, placements: [] } };
    delete bare.rollout;
    expect(renderMarkdown(bare)).toContain(
      `A plan too big to show whole (${SUMMARY_ABOVE_CLUSTERS + 1} clusters)`,
    );
    const within = { ...bare, clusters: bare.clusters.slice(0, SUMMARY_ABOVE_CLUSTERS) };
    const whole = renderMarkdown(within);
    expect(whole).not.toContain("A plan too big");
    expect(whole).toContain("| Cluster | CR | Action | Objects +/~/- |");
  });
});
