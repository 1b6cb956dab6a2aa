// Mutation testing of the safety core with StrykerJS (docs/testing.md, "Mutation testing"): mutates the
// core's files one small change at a time, runs the unit tests that reach each mutant, and prints the score
// per module and every mutant that survived. The config is test/mutation/stryker.config.mjs.
// Usage: node scripts/mutation.ts                       the whole core
//        node scripts/mutation.ts --files a.ts,b.ts     these files (each must be in the core), or their
//                                                       lines: --files src/a.ts:10-20
//        node scripts/mutation.ts --since REV           the core's files changed since REV (CI: the base
//                                                       recorded in test/mutation/base)
//        --incremental      reuse the last run's results for unchanged files and tests (a local rerun)
//        --min-score N      exit 1 when a module's score is below N (CI)
//        --model-runs N     the rollout model's runs per mutant (default 300; CI runs 5,000)
//        --tests GLOBS      only these unit test files (comma-separated globs): a quicker run whose score is
//                           a lower bound (a test left out can only kill more), for a module every test reaches
//        --ignore-static    skip the static mutants (module-level code: each runs every test file the run
//                           loaded; Stryker reports them as Ignored, counted apart)
//        --list             print what would be mutated (files, or file:lines with --since) and stop
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join, matchesGlob, resolve } from "node:path";
import { parseArgs } from "node:util";
import { SAFETY_CORE } from "../test/mutation/core.ts";

const root = resolve(import.meta.dirname, "..");
const CONFIG = "test/mutation/stryker.config.mjs";
const REPORT = join(root, "test/mutation/reports/mutation.json");

const { values } = parseArgs({
  options: {
    files: { type: "string" },
    since: { type: "string" },
    incremental: { type: "boolean", default: false },
    "min-score": { type: "string" },
    "model-runs": { type: "string", default: "300" },
    tests: { type: "string" },
    "ignore-static": { type: "boolean", default: false },
    list: { type: "boolean", default: false },
  },
});

const inCore = (path: string) => SAFETY_CORE.some((glob) => matchesGlob(path, glob));
const git = (...args: string[]) => {
  const result = spawnSync("git", args, { cwd: root, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout;
};

function filesToMutate(): string[] {
  if (values.files !== undefined) {
    // A file, or a file's lines as Stryker takes them (`src/a.ts:10-20`).
    const files = values.files.split(",").filter(Boolean);
    const outside = files.filter((file) => !inCore(file.replace(/:[\d:-]+$/, "")));
    if (outside.length > 0)
      throw new Error(`not in the safety core (test/mutation/core.ts): ${outside.join(", ")}`);
    return files;
  }
  if (values.since !== undefined) {
    // Committed and uncommitted changes since REV, deleted files left out; only the changed lines, so a
    // small change costs a few mutants, not its whole file's.
    const changed = git("diff", "--name-only", "--diff-filter=d", values.since, "--").split("\n");
    return changed
      .filter((file) => file.endsWith(".ts") && inCore(file))
      .sort()
      .flatMap((file) => changedRanges(values.since!, file).map((range) => `${file}:${range}`));
  }
  return SAFETY_CORE;
}

/** The line ranges (`start-end`, in the file as it is now) a diff since REV adds or changes. */
function changedRanges(since: string, file: string): string[] {
  const hunks = git("diff", "-U0", "--diff-filter=d", since, "--", file).matchAll(
    /^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@/gm,
  );
  return [...hunks].flatMap((hunk) => {
    const start = Number(hunk[1]);
    const count = hunk[2] === undefined ? 1 : Number(hunk[2]);
    // A hunk that only removes lines changes no line left to mutate.
    return count === 0 ? [] : [`${start}-${start + count - 1}`];
  });
}

const mutate = filesToMutate();
if (mutate.length === 0) {
  console.log(`mutation: no safety-core file changed since ${values.since}; nothing to mutate`);
  process.exit(0);
}
console.log(`mutation: ${mutate.join(", ")}`);
if (values.list) process.exit(0);

const shared = resolve(root, "..", "shared");
const started = performance.now();
const run = spawnSync(
  "npx",
  [
    "stryker",
    "run",
    CONFIG,
    "--mutate",
    mutate.join(","),
    ...(values.incremental ? ["--incremental"] : []),
    ...(values["ignore-static"] ? ["--ignoreStatic"] : []),
  ],
  {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
    env: {
      ...process.env,
      // The model tests run once per mutant that reaches them: fewer runs, and a fixed seed so the first
      // (unmutated) run and every mutant's see the same interleavings.
      KNATIVE_FLEET_MODEL_RUNS: values["model-runs"],
      KNATIVE_FLEET_MODEL_SEED: process.env.KNATIVE_FLEET_MODEL_SEED ?? "20261128",
      // Read by test/mutation/vitest.config.ts.
      ...(values.tests === undefined ? {} : { KNATIVE_FLEET_MUTATION_TESTS: values.tests }),
      // The sandbox Stryker copies the project into is not beside ../shared.
      ...(process.env.KNATIVE_FLEET_SHARED === undefined && existsSync(shared)
        ? { KNATIVE_FLEET_SHARED: shared }
        : {}),
    },
  },
);
if (run.status !== 0) {
  console.error(`mutation: stryker exited with ${run.status}`);
  process.exit(run.status ?? 1);
}

interface Mutant {
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number; column: number }; end: { line: number; column: number } };
}
interface Report {
  files: Record<string, { source: string; mutants: Mutant[] }>;
}

/** Killed and timed-out mutants count as caught; compile errors (the type checker's) count for nothing. */
const CAUGHT = new Set(["Killed", "Timeout"]);
const MISSED = new Set(["Survived", "NoCoverage"]);

const report = JSON.parse(readFileSync(REPORT, "utf8")) as Report;
const rows: { file: string; caught: number; missed: number; score: number }[] = [];
const survivors: string[] = [];
for (const [file, { source, mutants }] of Object.entries(report.files).sort(([a], [b]) =>
  a.localeCompare(b),
)) {
  const caught = mutants.filter((m) => CAUGHT.has(m.status)).length;
  const missed = mutants.filter((m) => MISSED.has(m.status));
  rows.push({
    file,
    caught,
    missed: missed.length,
    score: (100 * caught) / Math.max(1, caught + missed.length),
  });
  const lines = source.split("\n");
  for (const m of missed) {
    const { start, end } = m.location;
    const original =
      start.line === end.line
        ? lines[start.line - 1]!.slice(start.column - 1, end.column - 1)
        : `${lines[start.line - 1]!.slice(start.column - 1)} …`;
    survivors.push(
      `${file}:${start.line}:${start.column} ${m.status} ${m.mutatorName}: ${oneLine(original)} → ${oneLine(m.replacement ?? "")}`,
    );
  }
}

const total = rows.reduce(
  (sum, row) => ({ caught: sum.caught + row.caught, missed: sum.missed + row.missed }),
  {
    caught: 0,
    missed: 0,
  },
);
console.log("\nmutation score per module (killed or timed out / killed, timed out, survived or not covered)");
for (const row of rows)
  console.log(
    `  ${row.caught + row.missed === 0 ? "    -" : `${row.score.toFixed(1).padStart(5)}%`}  ${row.caught}/${row.caught + row.missed}  ${row.file}`,
  );
console.log(
  `  ${((100 * total.caught) / Math.max(1, total.caught + total.missed)).toFixed(1).padStart(5)}%  ${total.caught}/${total.caught + total.missed}  all (${((performance.now() - started) / 60_000).toFixed(1)} min)`,
);
const ignored = Object.values(report.files)
  .flatMap((file) => file.mutants)
  .filter((m) => m.status === "Ignored");
if (ignored.length > 0) console.log(`  (${ignored.length} static mutants ignored, not counted)`);
if (values.tests !== undefined) console.log(`  (against ${values.tests} only: each score is a lower bound)`);
console.log(survivors.length === 0 ? "\nno surviving mutant" : `\nsurviving mutants (${survivors.length}):`);
for (const line of survivors) console.log(`  ${line}`);

const minimum = values["min-score"] === undefined ? undefined : Number(values["min-score"]);
// A module whose changed lines gave no mutant that counts (all rejected by the type checker, or none made)
// has nothing to score: 0 of 0 is not below the floor.
const below =
  minimum === undefined ? [] : rows.filter((row) => row.caught + row.missed > 0 && row.score < minimum);
if (below.length > 0) {
  console.error(
    `\nmutation: below ${minimum}%: ${below.map((row) => `${row.file} ${row.score.toFixed(1)}%`).join(", ")}`,
  );
  process.exit(1);
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 80 ? `${flat.slice(0, 77)}…` : flat;
}
