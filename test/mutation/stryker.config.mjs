import { SAFETY_CORE } from "./core.ts";

// StrykerJS over the safety core (docs/testing.md, "Mutation testing"). Run it through scripts/mutation.ts,
// which picks the files (whole core, --files, or --since REV), lowers the model tests' run counts and prints
// the score per module and the surviving mutants.

const here = "test/mutation";

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  mutate: SAFETY_CORE,
  testRunner: "vitest",
  vitest: { configFile: `${here}/vitest.config.ts`, related: true },
  checkers: ["typescript"],
  tsconfigFile: "tsconfig.json",
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: "perTest",
  // Two cores shared with everything else on a CI runner.
  concurrency: 2,
  timeoutMS: 20_000,
  // The first, unmutated run of the related unit tests (the model tests among them) took over Stryker's
  // default 5 minutes on a loaded machine, which failed the whole run.
  dryRunTimeoutMinutes: 15,
  // Used with --incremental (scripts/mutation.ts): kept beside the reports, never committed.
  incrementalFile: `${here}/reports/incremental.json`,
  tempDirName: `${here}/.stryker-tmp`,
  cleanTempDir: "always",
  reporters: ["json", "clear-text", "progress-append-only"],
  jsonReporter: { fileName: `${here}/reports/mutation.json` },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  ignorePatterns: ["dist", "coverage", ".sandbox", `${here}/reports`],
  thresholds: { high: 90, low: 80, break: null },
};
