import { main } from "../../src/commands/main.ts";

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in-process, as `knative-fleet <argv>` would, collecting what it prints. */
export async function runCli(...argv: string[]): Promise<CliRun> {
  const printed = { stdout: [] as string[], stderr: [] as string[] };
  const sink = (lines: string[]) =>
    ({ write: (chunk: unknown) => lines.push(String(chunk)) > 0 }) as unknown as NodeJS.WritableStream;
  const code = await main(argv, { stdout: sink(printed.stdout), stderr: sink(printed.stderr) });
  return { code, stdout: printed.stdout.join(""), stderr: printed.stderr.join("") };
}
