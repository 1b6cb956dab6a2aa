import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./shared.ts";

// What of the runtime image's environment changes how Node and its allocator use memory; the image's
// paths (KO_DATA_PATH, HOME) are the benchmark's own.
const RUNTIME_KEYS = /^(NODE_ENV|NODE_OPTIONS|MALLOC_[A-Z_]+)$/;

/** How the image runs Node: its environment and the flags its entrypoint gives `node` before the script. */
export interface ImageRuntime {
  env: Record<string, string>;
  nodeArgs: string[];
}

/**
 * The Node runtime settings of the image, read from the Dockerfile's last stage: the `ENV` entries that
 * matter to Node (NODE_ENV, NODE_OPTIONS, MALLOC_*) and the node flags of the exec-form `ENTRYPOINT` (V8
 * flags such as --max-opt are not allowed in NODE_OPTIONS). A benchmark runs the process the way the image
 * does, and the Dockerfile stays their one home.
 */
export function imageRuntime(dockerfile = join(repoRoot, "Dockerfile")): ImageRuntime {
  const text = readFileSync(dockerfile, "utf8").replace(/\\\r?\n/g, " ");
  const lines = text.split(/\r?\n/).map((line) => line.trim());
  const lastStage = lines.findLastIndex((line) => /^FROM\s/i.test(line));
  const env: Record<string, string> = {};
  let entrypoint: string[] | undefined;
  for (const line of lines.slice(lastStage + 1)) {
    const [, instruction, rest = ""] = /^(ENV|ENTRYPOINT)\s+(.*)$/i.exec(line) ?? [];
    if (instruction?.toUpperCase() === "ENTRYPOINT") entrypoint = JSON.parse(rest) as string[];
    if (instruction?.toUpperCase() !== "ENV") continue;
    for (const [, key, quoted, bare] of rest.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(?:"([^"]*)"|(\S*))/g)) {
      if (RUNTIME_KEYS.test(key!)) env[key!] = quoted ?? bare ?? "";
    }
  }
  const node = entrypoint?.findIndex((arg) => arg === "node" || arg.endsWith("/node")) ?? -1;
  const script = entrypoint?.findIndex((arg) => arg.endsWith("cli.js")) ?? -1;
  if (entrypoint === undefined || node < 0 || script < node) {
    throw new Error(
      `${dockerfile}: the runtime stage has no exec-form ENTRYPOINT running node <flags> .../cli.js`,
    );
  }
  return { env, nodeArgs: entrypoint.slice(node + 1, script) };
}
