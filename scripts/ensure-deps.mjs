#!/usr/bin/env node
// Installs the npm dependencies when they are missing or older than package-lock.json, so the README's
// commands work on a fresh clone. It runs before `npm run demo|test|sandbox`, possibly on the machine's
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
  const args = want ? ["ci", "--no-audit", "--no-fund"] : ["install", "--no-audit", "--no-fund"];
  console.error(`knative-fleet: installing npm dependencies (npm ${args[0]})`);
  execFileSync("npm", args, { cwd: root, stdio: "inherit" });
  const hash = createHash("sha256").update(readFileSync(lock)).digest("hex");
  writeFileSync(stamp, `${hash}\n`);
}
