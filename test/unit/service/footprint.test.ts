import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../support/shared.ts";

// Issue #44's memory target: what `run` loads and never uses is resident memory all the same. An ES import
// of node:http reads every export, and Node 24's lazy `http.WebSocket` then loads Node's own bundled undici
// beside the undici package the service does use: 11 MiB resident for node:http alone, 2 MiB for the
// service's whole graph (79.0 against 77.0 MiB, the image's V8 flags). Run in a fresh Node, as `run` loads it.

const modules = ["src/service/service.ts", "src/commands/main.ts"].map(
  (file) => pathToFileURL(join(repoRoot, file)).href,
);

describe("the service's module graph", () => {
  it("leaves Node's bundled undici unloaded", () => {
    const script = `
      for (const url of ${JSON.stringify(modules)}) await import(url);
      process.stdout.write(JSON.stringify(process.moduleLoadList.filter((m) => m.includes("deps/undici"))));
    `;
    const loaded = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      cwd: repoRoot,
      encoding: "utf8",
    });
    expect(JSON.parse(loaded)).toEqual([]);
  }, 60_000);
});
