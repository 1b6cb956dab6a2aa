import { defineConfig } from "vitest/config";

// The unit project alone, for mutation runs: no server, no sandbox. Stryker's vitest runner runs only the
// test files that import a mutated file (`related`), and per test only those that reached the mutant.
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts"],
    environment: "node",
    root: new URL("../..", import.meta.url).pathname,
  },
});
