import { describe, expect, it } from "vitest";
import { isError } from "../../../src/fleet/diagnostic.ts";
import type { FleetPlan } from "../../../src/plan/report.ts";
import { crText } from "../../support/fleet-files.ts";
import { fleetRepo, runPlan } from "./support.ts";

// The plan's header (CR and cluster counts, the error/warning verdict), its JSON counts and its exit code
// are read by people and by CI before anything else: none of them may say other than the body below.

const SERVING = "clusters/spoke-1/knative-serving.yaml";
const EVENTING = "clusters/spoke-2/knative-eventing.yaml";
const serving = (extra: Partial<Parameters<typeof crText>[0]> = {}) =>
  crText({ name: "spoke-1-serving", cluster: "spoke-1", ...extra });
const eventing = crText({ kind: "KnativeEventing", name: "spoke-2-eventing", cluster: "spoke-2" });
const BASE = { [SERVING]: serving(), [EVENTING]: eventing };

const SCENARIOS: { name: string; head: Record<string, string | null>; exit: number; detailed: number }[] = [
  { name: "nothing changes", head: { "README.md": "docs only\n" }, exit: 0, detailed: 0 },
  { name: "a version bump", head: { [SERVING]: serving({ version: "1.22" }) }, exit: 0, detailed: 3 },
  { name: "a removal", head: { [EVENTING]: null }, exit: 0, detailed: 3 },
  { name: "a validation error", head: { [SERVING]: "kind: [\n" }, exit: 1, detailed: 1 },
  {
    name: "a CR the hub's admission refuses",
    head: { "clusters/spoke-3/s.yaml": crText({ name: "s3", cluster: "spoke-3", namespace: "team-b" }) },
    exit: 1,
    detailed: 1,
  },
  {
    name: "an upgrade two minors ahead: its chain's first step",
    head: { [SERVING]: serving({ version: "1.23" }) },
    exit: 0,
    detailed: 3,
  },
  {
    name: "a version jump the hub controller refuses (its own manifests: no chain)",
    head: {
      [SERVING]: serving({
        version: "1.23.0",
        spec: {
          manifests: [
            { URL: "https://github.com/knative/serving/releases/download/knative-v1.23.0/serving-core.yaml" },
          ],
        },
      }),
    },
    exit: 1,
    detailed: 1,
  },
  { name: "head without a fleet file", head: { [SERVING]: null, [EVENTING]: null }, exit: 1, detailed: 1 },
  {
    name: "a setting the release does not have",
    head: { [SERVING]: serving({ spec: { config: { autoscalr: { "enable-scale-to-zero": "false" } } } }) },
    exit: 1,
    detailed: 1,
  },
  {
    name: "a setting that applies with a warning",
    head: { [SERVING]: serving({ spec: { "high-availability": { replicas: 2 } } }) },
    exit: 0,
    detailed: 3,
  },
];

/** What the body shows: every CR's findings, the fleet's, and head's validation errors. */
function bodyCounts(plan: FleetPlan) {
  const resources = plan.clusters.flatMap((cluster) => cluster.resources);
  const findings = [...resources.flatMap((r) => r.findings), ...plan.findings];
  const bySeverity = (severity: string) => findings.filter((f) => f.severity === severity).length;
  return {
    resources: resources.length,
    clusters: plan.clusters.length,
    errors: plan.diagnostics.filter(isError).length + plan.omittedDiagnostics + bySeverity("error"),
    warnings: plan.diagnostics.filter((d) => !isError(d)).length + bySeverity("warning"),
    changes: resources.filter((r) => r.action !== "blocked" && r.action !== "refused").length,
  };
}

describe("the plan's header, JSON counts and exit code agree with its body", { timeout: 120_000 }, () => {
  it.each(SCENARIOS)("$name", async ({ head, exit, detailed }) => {
    const repo = await fleetRepo();
    await repo.commit("main", BASE);
    await repo.commit("change", head);
    const args = ["--repo", repo.dir, "--base", "main", "--head", "change"];
    const json = await runPlan(...args, "-o", "json");
    const plan = JSON.parse(json.stdout) as FleetPlan;
    const body = bodyCounts(plan);
    expect({ errors: plan.errors, warnings: plan.warnings, changes: plan.changes }).toEqual({
      errors: body.errors,
      warnings: body.warnings,
      changes: body.changes,
    });
    expect(json.code).toBe(exit);
    expect(plan.errors > 0).toBe(exit === 1);

    const markdown = await runPlan(...args, "--detailed-exitcode");
    expect(markdown.code).toBe(detailed);
    expect(detailed === 3).toBe(body.errors === 0 && body.changes > 0);
    const lines = markdown.stdout.split("\n");
    const plural = (n: number, noun: string) => `${n} ${noun}${n === 1 ? "" : "s"}`;
    expect(lines[2]).toBe(
      `## knative-fleet plan: ${plural(body.resources, "CR")} on ${plural(body.clusters, "cluster")}`,
    );
    const verdict = lines.find((line) => /^(✅|❌|⚠️)/.test(line));
    if (body.errors === 0 && body.warnings === 0) expect(verdict).toBe("✅ No errors, no warnings.");
    else {
      expect(verdict).toBe(
        [
          ...(body.errors > 0 ? [`❌ **${plural(body.errors, "error")}**`] : []),
          ...(body.warnings > 0 ? [`⚠️ ${plural(body.warnings, "warning")}`] : []),
        ].join(", "),
      );
    }
    // Every error the count includes is shown: a finding line each, and the validation errors' block.
    const shownErrors = lines.filter((line) => line.startsWith("- ❌")).length;
    const shownDiagnostics = plan.diagnostics.filter(isError).length + plan.omittedDiagnostics;
    expect(shownErrors + shownDiagnostics).toBe(body.errors);
    if (body.resources === 0) expect(markdown.stdout).toContain("Merging changes no CR.");
  });
});
