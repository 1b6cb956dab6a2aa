import type { ParseArgsOptionsConfig } from "node:util";

/**
 * The exit codes every command follows (docs/cli.md#exit-codes, checked by test/unit/cli/exit-codes.test.ts):
 * 0 the command did its job and found nothing wrong; 1 it did its job and what it checked is wrong
 * (validation errors, a CR not Ready, a cluster that cannot be reached); 2 it could not do its job (a usage
 * error, or a file, the hub or a release it needs that cannot be read).
 */
export const EXIT_OK = 0;
export const EXIT_FINDINGS = 1;
export const EXIT_ERROR = 2;
/** Only with `plan --detailed-exitcode`: nothing wrong, and the merge changes something. */
export const EXIT_CHANGES = 3;

export interface CommandContext {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  /** Ends a command that runs until interrupted (`status -w`); without it, Ctrl-C or SIGTERM does. */
  signal?: AbortSignal;
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
  /** The values of -o/--output, for commands that have it (shell completion offers them). */
  outputFormats?: readonly string[];
  /** Whether positional arguments are accepted. */
  allowPositionals: boolean;
  /** The values the first positional argument takes, when it is one of a few (shell completion offers them). */
  positionals?: readonly string[];
  run(args: ParsedArgs, ctx: CommandContext): Promise<number>;
}

/** A usage error (or an input that cannot be used): printed with the command's help hint, exit code 2. */
export class UsageError extends Error {}
