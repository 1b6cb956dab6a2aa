import type { FleetPlan } from "../../src/plan/report.ts";
import { type CliRun, runCli } from "./cli.ts";
import { knativeReleasesDir } from "./shared.ts";

// `knative-fleet plan` run in-process, for the plan's unit and integration tests.

/** Runs `knative-fleet plan` in-process against the real releases of ../shared. */
export const runPlan = (...argv: string[]): Promise<CliRun> =>
  runCli("plan", "--kodata", knativeReleasesDir(), ...argv);

/** `runPlan` with `-o json`, parsed. */
export async function planJson(
  ...argv: string[]
): Promise<{ code: number; plan: FleetPlan; stderr: string }> {
  const { code, stdout, stderr } = await runPlan("-o", "json", ...argv);
  return { code, plan: JSON.parse(stdout) as FleetPlan, stderr };
}

/** The plan of one CR, by name. */
export function resourceOf(plan: FleetPlan, name: string) {
  const found = plan.clusters.flatMap((cluster) => cluster.resources).find((r) => r.name === name);
  if (!found) throw new Error(`no CR ${name} in the plan`);
  return found;
}
