#!/usr/bin/env node
// Installs the npm dependencies when they are missing or older than the lock file, so the README's
// commands work on a fresh clone. It runs before `npm run cli|demo|sandbox|pack`, possibly on the machine's
// older Node, hence plain JavaScript. The Node 24 binary itself arrives as the `node` devDependency.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const lock = join(root, "package-lock.json");
const stamp = join(root, "node_modules", ".knative-fleet-lock-hash");

const want = existsSync(lock) ? createHash("sha256").update(readFileSync(lock)).digest("hex") : "";
const have = existsSync(stamp) ? readFileSync(stamp, "utf8").trim() : "";
const nodeBinary = join(root, "node_modules", ".bin", "node");

if (!want || want !== have || !existsSync(nodeBinary)) {
  // `npm install`, not `npm ci`: it installs exactly the locked versions too, but does not insist on lock
  // entries for other platforms' optional packages (biome's per-OS binaries), which a registry mirror may
  // not serve and a lock written behind one therefore lacks.
  const args = ["install", "--no-audit", "--no-fund"];
  console.error("knative-fleet: installing npm dependencies (npm install from package-lock.json)");
  // Its output goes to stderr: stdout is the caller's (`npm run -s cli -- status -o json`, `npm pack --json`).
  execFileSync("npm", args, { cwd: root, stdio: ["ignore", 2, 2] });
  const hash = createHash("sha256").update(readFileSync(lock)).digest("hex");
  writeFileSync(stamp, `${hash}\n`);
}
