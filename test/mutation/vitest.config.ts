import { defineConfig } from "vitest/config";

// The unit project alone, for mutation runs: no server, no sandbox. Stryker's vitest runner runs only the
// test files that import a mutated file (`related`), and per test only those that reached the mutant.
export default defineConfig({
  test: {
    // scripts/mutation.ts --tests narrows the files for a quicker run (its score then a lower bound).
    include: process.env.KNATIVE_FLEET_MUTATION_TESTS?.split(",") ?? ["test/unit/**/*.test.ts"],
    environment: "node",
    // Instrumented for coverage, the heavier property tests take over vitest's 5 s default on a loaded
    // machine; a mutant that hangs is cut by Stryker's own timeout (timeoutMS), not by this one.
    testTimeout: 60_000,
    root: new URL("../..", import.meta.url).pathname,
  },
});
