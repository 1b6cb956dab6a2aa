import { parseArgs } from "node:util";
import { approveCommand } from "./approve.ts";
import { clustersCommand } from "./clusters.ts";
import { type Command, type CommandContext, EXIT_ERROR, UsageError } from "./command.ts";
import { compileKodataCommand } from "./compile-kodata.ts";
import { completionCommand } from "./completion.ts";
import { planCommand } from "./plan.ts";
import { runCommand } from "./run.ts";
import { statusCommand } from "./status.ts";
import { validateCommand } from "./validate.ts";
import { printBriefVersion, versionCommand } from "./version.ts";

export const commands: readonly Command[] = [
  runCommand,
  validateCommand,
  planCommand,
  clustersCommand,
  statusCommand,
  approveCommand,
  versionCommand,
  compileKodataCommand,
  completionCommand(() => commands),
];

function mainHelp(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  const lines = commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  return [
    "knative-fleet: keeps Knative Serving and Eventing on a fleet of clusters in step with one Git repository",
    "",
    "Usage: knative-fleet <command> [flags]",
    "",
    "Commands:",
    ...lines,
    "",
    "Run 'knative-fleet <command> --help' for a command's flags; 'knative-fleet -v' for the version.",
    "",
  ].join("\n");
}

/** Runs the CLI with argv (without node and script) and returns the exit code. */
export async function main(argv: string[], ctx: CommandContext): Promise<number> {
  // `help <command>` is `<command> --help`.
  const [given, ...rest] = argv[0] === "help" && argv.length > 1 ? [argv[1]!, "--help"] : argv;
  const versionFlag = given === "--version" || given === "-v";
  const name = versionFlag ? versionCommand.name : given;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    ctx.stdout.write(mainHelp());
    return name === undefined ? EXIT_ERROR : 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    ctx.stderr.write(`knative-fleet: unknown command "${name}"\n\n${mainHelp()}`);
    return EXIT_ERROR;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    ctx.stdout.write(`${command.usage.trimEnd()}\n`);
    return 0;
  }
  try {
    const parsed = parseArgs({
      args: rest,
      options: command.options,
      allowPositionals: command.allowPositionals,
      strict: true,
    });
    // `-v` alone: the version, quietly; with flags (`-v -o json`) it is `version`.
    if (versionFlag && rest.length === 0) return await printBriefVersion(ctx);
    return await command.run(parsed, ctx);
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    if (err instanceof UsageError || code.startsWith("ERR_PARSE_ARGS")) {
      ctx.stderr.write(
        `knative-fleet ${name}: ${(err as Error).message}\nRun 'knative-fleet ${name} --help'.\n`,
      );
      return EXIT_ERROR;
    }
    // Not a finding (exit 1) but a failure to do the job: exit 2, with the stack that says where.
    ctx.stderr.write(
      `knative-fleet ${name}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return EXIT_ERROR;
  }
}

/** `knative-fleet` as the process runs it (src/cli.ts loads this after its Node.js version check). */
export async function runFromProcess(): Promise<void> {
  process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr });
}
