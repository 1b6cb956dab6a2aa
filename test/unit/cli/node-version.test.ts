import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../support/shared.ts";

// The entry's version check and package.json `engines` say the same lowest Node.js; the packed CLI is run
// on each supported line, and its message on an older one checked, in test/integration/release/npm-package.test.ts.
describe("the Node.js version knative-fleet needs", () => {
  it("is the same in the entry's check and in package.json engines", async () => {
    const entry = await readFile(join(repoRoot, "src", "cli.ts"), "utf8");
    const minimum = /const MINIMUM_NODE = "(\d+\.\d+\.\d+)";/.exec(entry)?.[1];
    const { engines } = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      engines: { node: string };
    };
    const lowest = engines.node
      .split("||")[0]!
      .trim()
      .replace(/^[\^>=~]+/, "");
    expect(minimum).toBeDefined();
    expect(lowest).toBe(minimum);
  });

  it("is checked before any other module loads", async () => {
    const entry = await readFile(join(repoRoot, "src", "cli.ts"), "utf8");
    // No static import: each would load (and a dependency could fail) before the check runs.
    expect(entry).not.toMatch(/^import\s/m);
    expect(entry).toMatch(/\bimport\("\.\/commands\/main\.ts"\)/);
  });
});
