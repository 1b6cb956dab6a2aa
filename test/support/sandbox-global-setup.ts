import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SANDBOX_ENV } from "../sandbox/index.ts";
import { down, isUp, up } from "../sandbox/sandbox.ts";

/**
 * Starts one sandbox for all integration test files, and stops it afterwards: hub + 6 spokes (placements
 * select among clusters of different labels; sharding splits six clusters over three replicas). With
 * KNATIVE_FLEET_SANDBOX pointing at a running sandbox (`npm run sandbox -- up`), that one is reused and
 * left running, which makes re-running a single test file fast.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const reuse = process.env[SANDBOX_ENV];
  if (reuse && isUp(reuse)) return async () => {};
  const stateDir = mkdtempSync(join(tmpdir(), "knative-fleet-test-"));
  await up({ stateDir, spokes: 6 });
  process.env[SANDBOX_ENV] = stateDir;
  return async () => {
    await down(stateDir);
  };
}
