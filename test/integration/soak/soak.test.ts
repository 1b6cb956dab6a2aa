import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { loadSandbox } from "../../sandbox/index.ts";
import { INVARIANTS } from "../../soak/checks.ts";
import { runSoak, SOAK_PACES } from "../../soak/driver.ts";
import { renderReport } from "../../soak/report.ts";
import { imageRuntime } from "../../support/dockerfile.ts";
import { repoRoot } from "../../support/shared.ts";

// The soak's short pace (scripts/soak.ts --pace short): a fleet with leader election and a sharded one side
// by side under a round of random pushes, ClusterProfile churn and faults, then the faults stop; every
// invariant counter must be 0. The same driver runs the hour of docs/reliability.md. The seed is fixed so a
// CI run is repeatable in what it does (KNATIVE_FLEET_SOAK_SEED tries another); the report names it.

const sandbox = loadSandbox();

it("a short soak of a leader-election fleet and a sharded one under pushes, churn and faults: every invariant counter stays 0", async () => {
  const workDir = mkdtempSync(join(tmpdir(), "knative-fleet-soak-"));
  const cli = join(repoRoot, "src", "cli.ts");
  const image = imageRuntime(workDir, cli);
  const result = await runSoak({
    ...SOAK_PACES.short,
    modes: ["leader", "sharding"],
    sandbox,
    seed: Number(process.env.KNATIVE_FLEET_SOAK_SEED ?? 31),
    runtime: { entry: cli, nodeArgs: image.nodeArgs, env: image.env },
    workDir,
    log: (line) => console.log(`soak ${new Date().toISOString().slice(11, 19)} ${line}`),
  });
  console.log(renderReport(result));
  // It did what a soak is for: pushes of several kinds, faults, churn, deletions at the end.
  expect(result.pushes.length).toBeGreaterThanOrEqual(6); // each fleet: a push every 10-18 s for a minute
  expect(result.faults.length).toBeGreaterThanOrEqual(4);
  expect(result.finalized.length).toBeGreaterThan(0);
  expect(result.convergence.length).toBeGreaterThan(0);
  expect(result.violations.map((v) => `${v.invariant}: ${v.step}: ${v.evidence}`)).toEqual([]);
  expect(result.counters).toEqual(Object.fromEntries(Object.keys(INVARIANTS).map((k) => [k, 0])));
}, 1_800_000);
