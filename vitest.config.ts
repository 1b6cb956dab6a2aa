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
          // Every core: vitest's default leaves one to itself, which on CI's two cores is one file at a time.
          maxWorkers: "100%",
        },
      },
      {
        test: {
          name: "git",
          include: ["test/integration/git/**/*.test.ts"],
          environment: "node",
          // One file at a time like the integration project, whose group it joins (projects that run
          // together must have one worker count).
          maxWorkers: 1,
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
