import type { Reporter, TestModule } from "vitest/node";

/**
 * Ends the test output with the plain closing line CI reads: `tests: N passed, N failed[, N skipped]`.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed++;
        else if (state === "failed") failed++;
        else skipped++;
      }
      // A file that failed to load has no tests but is a failure all the same.
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++;
    }
    failed += unhandledErrors.length;
    const tail = skipped > 0 ? `, ${skipped} skipped` : "";
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed${tail}\n`);
  }
}
