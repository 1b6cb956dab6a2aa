import type { ParseArgsOptionsConfig } from "node:util";

/** Exit codes shared by every command: 0 ok, 1 the checked thing is wrong (validation, health), 2 usage. */
export const EXIT_OK = 0;
export const EXIT_FINDINGS = 1;
export const EXIT_USAGE = 2;

export interface CommandContext {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
}

export interface Command {
  name: string;
  summary: string;
  /** The usage line and option list shown by `--help`. */
  usage: string;
  options: ParseArgsOptionsConfig;
  /** Whether positional arguments are accepted. */
  allowPositionals: boolean;
  run(args: ParsedArgs, ctx: CommandContext): Promise<number>;
}

/** A usage error: printed with the command's help hint, exit code 2. */
export class UsageError extends Error {}
