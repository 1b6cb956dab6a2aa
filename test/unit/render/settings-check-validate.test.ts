import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ValidateReport } from "../../../src/commands/validate.ts";
import { runCli } from "../../support/cli.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// validate without an inventory expands no placement that selects by labels: the settings check then takes
// its template and each override as they are (checkPlacementSettings), so a typo there fails validate too.

const PLACEMENT = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata:
  name: prod
spec:
  clusterSelectorTerms:
    - labelSelector: {matchLabels: {env: prod}}
  template:
    spec:
      version: "1.21"
      config:
        autoscalr: {enable-scale-to-zero: "false"}
  overrides:
    - clusterSelector: {labelSelector: {matchLabels: {ring: canary}}}
      patch:
        workloads: [{name: activatr, replicas: 2}]
`;

describe("validate checks an unexpanded placement's settings", () => {
  let dir = "";
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "knative-fleet-settings-"));
    vi.stubEnv("KO_DATA_PATH", "");
    vi.stubEnv("XDG_CACHE_HOME", join(dir, "cache"));
  });
  afterEach(async () => {
    vi.unstubAllEnvs();
    await rm(dir, { recursive: true, force: true });
  });

  it("the template's and the override's typos, at their fields, with did-you-mean", async () => {
    const repo = join(dir, "repo");
    await mkdir(dirname(join(repo, "clusters/placements/prod.yaml")), { recursive: true });
    await writeFile(join(repo, "clusters/placements/prod.yaml"), PLACEMENT);
    const { code, stdout } = await runCli("validate", "-o", "json", "--kodata", knativeReleasesDir(), repo);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as ValidateReport;
    expect(
      report.diagnostics.map((d) => [d.line, d.column, d.field, /did you mean (\S+)\?/.exec(d.message)?.[1]]),
    ).toEqual([
      [12, 9, "spec.template.spec.config.autoscalr", "autoscaler"],
      [16, 28, "spec.overrides[0].patch.workloads[0].name", "activator"],
    ]);
    expect(report.skipped).toContainEqual(expect.objectContaining({ check: "placement" }));
  });
});
