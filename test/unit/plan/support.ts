import { rm } from "node:fs/promises";
import { onTestFinished } from "vitest";
import { compareStrings } from "../../../src/fleet/diagnostic.ts";
import type { Inventory } from "../../../src/placement/inventory.ts";
import type { PlanInventory } from "../../../src/plan/inventory.ts";
import { buildPlan, type PlanOptions } from "../../../src/plan/plan.ts";
import type { FleetPlan } from "../../../src/plan/report.ts";
import type { Revision } from "../../../src/plan/revisions.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { DEFAULT_FLEET_SETTINGS } from "../../../src/sync/settings.ts";
import { createFleetRepo, type FleetRepo } from "../../support/fleet-repo.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

export { planJson, resourceOf, runPlan } from "../../support/plan-cli.ts";

/** A fleet repository for one test, removed when the test ends. */
export async function fleetRepo(): Promise<FleetRepo> {
  const repo = await createFleetRepo();
  onTestFinished(() => rm(repo.dir, { recursive: true, force: true }));
  return repo;
}

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));

/** A revision of files held in memory: what readRevisions gives, without a Git repository. */
export const revisionOf = (ref: string, files: Record<string, string>): Revision => ({
  ref,
  commit: ref.padEnd(40, "0"),
  files: Object.entries(files)
    .map(([path, text]) => ({ path, text }))
    .sort((a, b) => compareStrings(a.path, b.path)),
});

/** The plan of merging `head` into `base` (path -> text), offline, against the real releases. */
export function planOfFiles(
  base: Record<string, string>,
  head: Record<string, string>,
  options: Partial<Omit<PlanOptions, "releases">> = {},
): Promise<FleetPlan> {
  return buildPlan(
    { repository: "fleet", base: revisionOf("base", base), head: revisionOf("head", head) },
    { releases, kodataDir: knativeReleasesDir(), settings: DEFAULT_FLEET_SETTINGS, ...options },
  );
}

/** A snapshot inventory for a plan: what placements select from. */
export const snapshotInventory = (inventory: Inventory): PlanInventory => ({
  source: "snapshot",
  inventory,
  kubernetesVersions: new Map(),
});

/** Every code fence and `<details>` the text opens is closed again. */
export function balancedMarkdown(text: string): boolean {
  let fence: string | undefined;
  let details = 0;
  for (const line of text.split("\n")) {
    const run = /^(`{3,})/.exec(line)?.[1];
    if (run && (fence === undefined || run === fence)) fence = fence ? undefined : run;
    if (fence === undefined)
      details += (line.match(/<details>/g) ?? []).length - (line.match(/<\/details>/g) ?? []).length;
  }
  return fence === undefined && details === 0;
}
