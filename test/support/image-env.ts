import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./shared.ts";

// What of the runtime image's environment changes how Node and its allocator use memory; the image's
// paths (KO_DATA_PATH, HOME) are the benchmark's own.
const RUNTIME_KEYS = /^(NODE_ENV|NODE_OPTIONS|MALLOC_[A-Z_]+)$/;

/**
 * The Node runtime settings of the image (NODE_ENV, NODE_OPTIONS, MALLOC_*), read from the `ENV`
 * instructions of the Dockerfile's last stage, so a benchmark runs the process the way the image does and
 * the Dockerfile stays their one home.
 */
export function imageRuntimeEnv(dockerfile = join(repoRoot, "Dockerfile")): Record<string, string> {
  const text = readFileSync(dockerfile, "utf8").replace(/\\\r?\n/g, " ");
  const lines = text.split(/\r?\n/).map((line) => line.trim());
  const lastStage = lines.findLastIndex((line) => /^FROM\s/i.test(line));
  const env: Record<string, string> = {};
  for (const line of lines.slice(lastStage + 1)) {
    const instruction = /^ENV\s+(.*)$/i.exec(line)?.[1];
    if (instruction === undefined) continue;
    for (const [, key, quoted, bare] of instruction.matchAll(
      /([A-Za-z_][A-Za-z0-9_]*)=(?:"([^"]*)"|(\S*))/g,
    )) {
      if (RUNTIME_KEYS.test(key!)) env[key!] = quoted ?? bare ?? "";
    }
  }
  if (env.NODE_OPTIONS === undefined)
    throw new Error(`${dockerfile}: the runtime stage sets no NODE_OPTIONS`);
  return env;
}
