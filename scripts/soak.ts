// Hours of faults, nothing lost: knative-fleet under random pushes, ClusterProfile churn and faults, with its
// invariants checked all along (test/soak/: the driver, the checks, the report). Two fleets run side by side,
// one per configuration: two replicas with leader election, three with sharding.
// Usage: [KNATIVE_FLEET_SANDBOX=<state dir>] node scripts/soak.ts [--pace long|short] [--duration 60m]
//        [--seed N] [--spokes-per-fleet 3] [--fleets leader,sharding] [--faults KIND,...] [--entry dist|src]
//        [--report FILE]
// --faults limits the faults to those kinds (test/soak/faults.ts FAULT_KINDS): without the ones that end
// replica processes (hub-freeze, hub-restart, replica-partition, replica-kill) every process lives the whole
// run, which is what an hourly resource slope needs.
// --pace long (the default) is the hour of docs/reliability.md; short is what CI runs
// (test/integration/soak/soak.test.ts). --duration overrides the pace's (Go duration: 90s, 20m, 1h).
// --entry dist (the default) runs the built CLI as the image does (npm run build first): the Dockerfile's node
// flags and environment, releases compiled by compile-kodata; src runs src/cli.ts with the same flags.
// Without KNATIVE_FLEET_SANDBOX a sandbox of 2 x spokes-per-fleet light spokes is started in a temp dir and
// stopped at the end. Prints the seed first and the Markdown report last; exits 1 when a counter is not 0.
// An interrupt (Ctrl-C, SIGTERM) ends the run after the round in progress, cleanly and with its report; a
// second one stops at once.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { down, readSandbox, up } from "../test/sandbox/sandbox.ts";
import { runSoak, SOAK_PACES } from "../test/soak/driver.ts";
import { FAULT_KINDS, type FaultKind } from "../test/soak/faults.ts";
import { passed, renderReport } from "../test/soak/report.ts";
import { builtCli, imageRuntime } from "../test/support/dockerfile.ts";
import { repoRoot } from "../test/support/shared.ts";

const { values } = parseArgs({
  options: {
    pace: { type: "string", default: "long" },
    duration: { type: "string" },
    seed: { type: "string" },
    "spokes-per-fleet": { type: "string" },
    entry: { type: "string", default: "dist" },
    report: { type: "string" },
    fleets: { type: "string", default: "leader,sharding" },
    faults: { type: "string" },
  },
});
const fail = (message: string): never => {
  console.error(`soak: ${message}`);
  process.exit(2);
};
const pace =
  SOAK_PACES[values.pace as keyof typeof SOAK_PACES] ??
  fail(`--pace takes long or short, not ${values.pace}`);
const UNITS = { s: 1_000, m: 60_000, h: 3_600_000 } as const;
const durationMatch = /^(\d+)([smh])$/.exec(values.duration ?? "");
const duration =
  values.duration === undefined
    ? pace.durationMs
    : durationMatch
      ? Number(durationMatch[1]) * UNITS[durationMatch[2] as keyof typeof UNITS]
      : fail(`--duration takes 90s, 20m or 1h, not ${values.duration}`);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const spokesPerFleet = Number(values["spokes-per-fleet"] ?? pace.spokesPerFleet);
const modes = values.fleets
  .split(",")
  .map((mode) =>
    mode === "leader" || mode === "sharding"
      ? mode
      : fail(`--fleets takes leader and/or sharding, not ${mode}`),
  );
const faultKinds = values.faults
  ?.split(",")
  .map((kind) =>
    (FAULT_KINDS as readonly string[]).includes(kind)
      ? (kind as FaultKind)
      : fail(`--faults takes some of ${FAULT_KINDS.join(", ")}, not ${kind}`),
  );
const workDir = mkdtempSync(join(tmpdir(), "knative-fleet-soak-"));
const cli =
  values.entry === "src"
    ? join(repoRoot, "src", "cli.ts")
    : values.entry === "dist"
      ? (() => {
          try {
            return builtCli();
          } catch (err) {
            return fail((err as Error).message);
          }
        })()
      : fail(`--entry takes dist or src, not ${values.entry}`);
const image = imageRuntime(workDir, cli);
console.log(`soak: seed ${seed}, ${duration / 60_000} min, work dir ${workDir}`);

const stateDir = process.env[SANDBOX_ENV];
const sandbox = stateDir
  ? (readSandbox(stateDir) ?? fail(`no sandbox in ${stateDir}`))
  : await up({
      stateDir: mkdtempSync(join(tmpdir(), "soak-sandbox-")),
      spokes: modes.length * spokesPerFleet,
      spokeKind: "light",
    });
// An interrupt winds the run down as its end would (faults stopped, replicas stopped, spokes cleaned, the
// sandbox down), with the report; a second one stops waiting for that and takes the sandbox down at once.
const interrupt = new AbortController();
const onSignal = (signal: NodeJS.Signals) => {
  if (!interrupt.signal.aborted) {
    console.log(`soak: ${signal}: ending after this round (again to stop at once)`);
    interrupt.abort();
    return;
  }
  console.log(`soak: ${signal} again: stopping at once`);
  for (const pid of childPids()) process.kill(pid, "SIGKILL"); // the replicas
  const stopping = stateDir ? Promise.resolve() : down(sandbox.stateDir);
  void stopping.finally(() => process.exit(130));
};
/** This process's children, from /proc (the soak runs on Linux). */
function childPids(): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] === String(process.pid);
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
try {
  const result = await runSoak({
    stop: interrupt.signal,
    ...pace,
    modes,
    ...(faultKinds && { faultKinds }),
    sandbox,
    durationMs: duration,
    seed,
    spokesPerFleet,
    runtime: { entry: cli, nodeArgs: image.nodeArgs, env: image.env },
    workDir,
    log: (line) => console.log(`${new Date().toISOString().slice(11, 19)} ${line}`),
  });
  const report = renderReport(result);
  writeFileSync(values.report ?? join(workDir, "report.md"), report);
  console.log(`\n${report}`);
  process.exitCode = passed(result) ? 0 : 1;
} finally {
  if (!stateDir) await down(sandbox.stateDir);
}
