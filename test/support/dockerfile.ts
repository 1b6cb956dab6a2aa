import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { knativeReleasesDir, repoRoot } from "./shared.ts";

// The repository's Dockerfile read as text (no Docker engine runs here): its instructions per stage, and
// the environment its runtime stage sets (what the image's node process starts with).

export interface Instruction {
  keyword: string;
  args: string;
  heredoc?: string;
}
export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

export function parseDockerfile(text: string): { globalArgs: Instruction[]; stages: Stage[] } {
  const lines = text.split("\n");
  const globalArgs: Instruction[] = [];
  const stages: Stage[] = [];
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!;
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.endsWith("\\")) line = `${line.slice(0, -1)} ${lines[++i]!.trim()}`;
    const [, keyword = "", args = ""] = /^\s*(\S+)\s*(.*)$/.exec(line)!;
    const instruction: Instruction = { keyword: keyword.toUpperCase(), args };
    const heredoc = /<<-?'?(\w+)'?\s*$/.exec(args);
    if (heredoc) {
      const body: string[] = [];
      while (lines[++i] !== heredoc[1]) {
        if (i >= lines.length) throw new Error(`unterminated heredoc ${heredoc[1]}`);
        body.push(lines[i]!);
      }
      instruction.heredoc = body.join("\n");
    }
    if (instruction.keyword === "FROM") {
      const [, from = "", name] = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      stages.push({ from, name, instructions: [] });
    } else if (stages.length === 0) {
      if (instruction.keyword !== "ARG") throw new Error(`${instruction.keyword} before the first FROM`);
      globalArgs.push(instruction);
    } else {
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return { globalArgs, stages };
}

/** The Dockerfile at the repository's root, parsed. */
export const readDockerfile = (path = join(repoRoot, "Dockerfile")) =>
  parseDockerfile(readFileSync(path, "utf8"));

/**
 * The variables a stage's ENV instructions set, in order (a later one wins): `ENV K=v K2="v 2"` and the
 * legacy `ENV K v` form, with quotes and backslash escapes as Docker reads them. Variables are not expanded.
 */
export function stageEnv(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { args } of stage.instructions.filter((i) => i.keyword === "ENV")) {
    const legacy = /^([^\s=]+)\s+(.*)$/.exec(args);
    if (legacy && !/^[^\s=]+=/.test(args)) {
      env[legacy[1]!] = legacy[2]!.trim();
      continue;
    }
    for (const word of shellWords(args)) {
      const eq = word.indexOf("=");
      if (eq <= 0) throw new Error(`ENV ${args}: "${word}" is not KEY=value`);
      env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  return env;
}

/** Words split at unquoted whitespace, quotes removed, backslash escapes resolved (outside single quotes). */
function shellWords(text: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < text.length) word += text[++i];
      else word += c;
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === '"' || c === "'") {
      quote = c;
      word ??= "";
    } else if (c === "\\" && i + 1 < text.length) word = (word ?? "") + text[++i];
    else word = (word ?? "") + c;
  }
  if (quote) throw new Error(`unterminated ${quote} in: ${text}`);
  if (word !== undefined) words.push(word);
  return words;
}

/** What of the runtime stage's environment changes how Node and its allocator run. */
const RUNTIME_ENV = /^(NODE_ENV|NODE_OPTIONS|MALLOC_[A-Z_]+)$/;

/**
 * How the image runs the CLI, read from the Dockerfile (their one home): Node's flags from the runtime
 * stage's exec-form ENTRYPOINT (`node <flags> .../cli.js`; V8 refuses some of them in NODE_OPTIONS), the
 * environment that tunes the runtime (NODE_ENV, NODE_OPTIONS, MALLOC_*), and the releases compiled at build
 * time: `scratch` gets a kodata directory linking the shared releases, compiled by the built CLI as the
 * image's build does (KO_DATA_PATH). Benchmarks run `dist/cli.js` with these so their figures are the image's.
 */
export function imageRuntime(
  scratch: string,
  /** The CLI that compiles the releases: the built one (what the image runs), or src/cli.ts. */
  cli = join(repoRoot, "dist", "cli.js"),
): { nodeArgs: string[]; env: Record<string, string> } {
  const runtime = readDockerfile().stages.at(-1)!;
  const entrypoint = runtime.instructions.findLast((i) => i.keyword === "ENTRYPOINT");
  const command = entrypoint === undefined ? [] : (JSON.parse(entrypoint.args) as string[]);
  const node = command.findIndex((arg) => arg === "node" || arg.endsWith("/node"));
  const script = command.findIndex((arg) => arg.endsWith("cli.js"));
  if (node < 0 || script < node)
    throw new Error(
      "the Dockerfile's runtime stage has no exec-form ENTRYPOINT running node <flags> .../cli.js",
    );
  const env = Object.fromEntries(
    Object.entries(stageEnv(runtime)).filter(([name]) => RUNTIME_ENV.test(name)),
  );
  const kodata = join(scratch, "kodata");
  mkdirSync(kodata, { recursive: true });
  for (const entry of readdirSync(knativeReleasesDir(), { withFileTypes: true }))
    if (entry.isDirectory()) symlinkSync(join(knativeReleasesDir(), entry.name), join(kodata, entry.name));
  execFileSync(process.execPath, [cli, "compile-kodata", "--kodata", kodata]);
  return { nodeArgs: command.slice(node + 1, script), env: { ...env, KO_DATA_PATH: kodata } };
}

/** dist/cli.js, when it is at least as new as every source file (else a benchmark would measure old code). */
export function builtCli(): string {
  const cli = join(repoRoot, "dist", "cli.js");
  let built: number;
  try {
    built = statSync(cli).mtimeMs;
  } catch {
    throw new Error(`${cli} is missing: run npm run build`);
  }
  const newer = (readdirSync(join(repoRoot, "src"), { recursive: true }) as string[]).filter(
    (f) => f.endsWith(".ts") && statSync(join(repoRoot, "src", f)).mtimeMs > built,
  );
  if (newer.length > 0) throw new Error(`src/${newer[0]} is newer than ${cli}: run npm run build`);
  return cli;
}
