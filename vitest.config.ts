import { defineConfig } from "vitest/config";

// Three projects: `unit` needs no server; `git` runs against a real `git http-backend` server;
// `integration` runs against the real sandbox (hub + spokes) that the global setup starts once and shares.
// `npm test` runs them all.
export default defineConfig({
  test: {
    reporters: ["default", "./test/support/summary-reporter.ts"],
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          environment: "node",
        },
      },
      {
        test: {
          name: "git",
          include: ["test/integration/git/**/*.test.ts"],
          environment: "node",
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          exclude: ["test/integration/git/**"],
          environment: "node",
          globalSetup: ["./test/support/sandbox-global-setup.ts"],
          testTimeout: 300_000,
          hookTimeout: 600_000,
          // One shared sandbox: files run one at a time so they do not fight over the same spokes.
          fileParallelism: false,
        },
      },
    ],
  },
});
