import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { repoRoot } from "../../support/shared.ts";

// The alert rules as users get them (docs/monitoring/knative-fleet.rules.yaml, which a chart test keeps equal
// to what the chart renders), checked and unit-tested by Prometheus' own promtool (Debian's `prometheus`
// package; scripts/install-prerequisites.sh installs it): every alert fires on the series that mean trouble,
// with its labels and expanded annotations, and stays quiet on the healthy look-alike.

const RULES = join(repoRoot, "docs/monitoring/knative-fleet.rules.yaml");
const TESTS = join(repoRoot, "test/unit/observability/alert-rules.promtool.yaml");

function promtool(args: string[]): { status: number; output: string } {
  const result = spawnSync("promtool", args, { encoding: "utf8", timeout: 60_000 });
  if ((result.error as NodeJS.ErrnoException | undefined)?.code === "ENOENT")
    throw new Error("promtool is not installed: run scripts/install-prerequisites.sh (Debian's prometheus)");
  if (result.error) throw result.error;
  return { status: result.status ?? -1, output: `${result.stdout}${result.stderr}` };
}

interface PromtoolTests {
  tests: { name: string; alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
}

const alertNames = (): string[] =>
  (parse(readFileSync(RULES, "utf8")) as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) =>
    g.rules.map((r) => r.alert),
  );

describe("alert rules under promtool", () => {
  it("promtool check rules: the rules file is valid", () => {
    const { status, output } = promtool(["check", "rules", RULES]);
    expect(output).toContain(`SUCCESS: ${alertNames().length} rules found`);
    expect(status, output).toBe(0);
  });

  it("promtool test rules: every case passes", () => {
    const { status, output } = promtool(["test", "rules", TESTS]);
    expect(status, output).toBe(0);
    expect(output).toContain("SUCCESS");
  });

  it("every alert has a case where it fires and one where it stays quiet", () => {
    const { tests } = parse(readFileSync(TESTS, "utf8")) as PromtoolTests;
    const checks = tests.flatMap((t) => t.alert_rule_test);
    for (const alert of alertNames()) {
      const of = checks.filter((c) => c.alertname === alert);
      expect(
        of.some((c) => c.exp_alerts.length > 0),
        `${alert} has no firing case`,
      ).toBe(true);
      expect(
        of.some((c) => c.exp_alerts.length === 0),
        `${alert} has no quiet case`,
      ).toBe(true);
    }
    expect(alertNames()).toHaveLength(11);
  });
});
