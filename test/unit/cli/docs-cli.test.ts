import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EXIT_CHANGES, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK } from "../../../src/commands/command.ts";
import { CONTEXT_DEFAULT, KUBECONFIG_DEFAULT } from "../../../src/commands/hub.ts";
import { KODATA_DEFAULT } from "../../../src/commands/kodata.ts";
import { commands } from "../../../src/commands/main.ts";
import { repoRoot } from "../../support/shared.ts";

// docs/cli.md checked against the CLI's own definitions, not a copy of them: which commands take each flag
// of "Flags every command spells the same" (the commands' options), the defaults it states (the constants
// the commands' --help prints), each command's -o formats and default, and the exit codes (command.ts, and
// the Node.js version guard of src/cli.ts).

const doc = () => readFile(join(repoRoot, "docs", "cli.md"), "utf8");
const plain = (text: string) => text.replaceAll("`", "");

/** The rows of the table under `heading`: cells, backticks kept. */
function tableRows(text: string, heading: string): string[][] {
  const section = text.slice(text.indexOf(heading));
  const table = section.slice(section.indexOf("\n|"), section.indexOf("\n\n", section.indexOf("\n|") + 1));
  return table
    .trim()
    .split("\n")
    .slice(2)
    .map((line) =>
      line
        .replaceAll("\\|", "\u0000")
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.replaceAll("\u0000", "|").trim()),
    );
}

/** `-o, --output FORMAT` -> ["o", "output"]: the short and long names of a flag cell. */
const flagNames = (cell: string) => [...plain(cell).matchAll(/--?([a-z][a-z-]*)/g)].map((m) => m[1]!);

const commandNames = new Set(commands.map((command) => command.name));
/** The commands a cell names in backticks (`status`, `clusters`, ...). */
const namedCommands = (cell: string) =>
  [...cell.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!).filter((name) => commandNames.has(name));

describe("docs/cli.md, against the CLI", () => {
  it("names, for each shared flag, exactly the commands that take it", async () => {
    const rows = tableRows(await doc(), "## Flags every command spells the same");
    expect(rows.length).toBeGreaterThan(5);
    for (const [flag, where] of rows) {
      const long = flagNames(flag!).find((name) => name.length > 1)!;
      const takers = commands.filter((command) => long in command.options).map((command) => command.name);
      expect(new Set(namedCommands(where!)), flag).toEqual(new Set(takers));
      const short = flagNames(flag!).find((name) => name.length === 1);
      for (const name of takers) {
        const option = commands.find((command) => command.name === name)!.options[long]!;
        expect(option.short, `${flag} of ${name}`).toBe(short);
      }
    }
  });

  it("states the defaults the commands' --help states: --kodata, --kubeconfig, --context", async () => {
    const rows = new Map(
      tableRows(await doc(), "## Flags every command spells the same").map((row) => [
        flagNames(row[0]!).find((name) => name.length > 1)!,
        plain(row[2]!),
      ]),
    );
    const defaults: Record<string, string> = {
      kodata: KODATA_DEFAULT,
      kubeconfig: KUBECONFIG_DEFAULT,
      context: CONTEXT_DEFAULT,
    };
    for (const [flag, text] of Object.entries(defaults)) {
      expect(rows.get(flag), flag).toContain(`(default: ${text})`);
      // One default for every command that takes the flag: its --help says the same (plan's --kubeconfig and
      // --context say that they make the plan live, in words of its own).
      const own = flag === "kodata" ? [] : ["plan"];
      for (const command of commands.filter((c) => flag in c.options && !own.includes(c.name)))
        expect(command.usage.replace(/\s+/g, " "), `${command.name} --${flag}`).toContain(
          `(default: ${text})`,
        );
    }
  });

  it("lists each command's -o formats, the first one marked the default", async () => {
    const [row] = tableRows(await doc(), "## Flags every command spells the same").filter((r) =>
      r[0]!.includes("--output FORMAT"),
    );
    // "`status`, `clusters`: `table` (default), `wide`, ...; `plan`: ..."
    const listed = new Map<string, string[]>();
    for (const part of row![1]!.split(";")) {
      const [names, formats] = part.split(/:(.*)/s);
      // The formats, not what a parenthesis says of one (`json` (`schemaVersion`, ...)).
      const values = [...(formats ?? "").replace(/\([^)]*\)/g, "").matchAll(/`([a-z]+)`/g)].map((m) => m[1]!);
      for (const name of namedCommands(names!)) listed.set(name, values);
      if (formats !== undefined && values.length > 1)
        expect(formats, names).toMatch(new RegExp(`^\\s*\`${values[0]}\` \\(default\\)`));
    }
    for (const command of commands.filter((c) => c.outputFormats !== undefined))
      expect(listed.get(command.name), command.name).toEqual([...command.outputFormats!]);
  });

  it("says what plan's -o json starts with, and that a hub it cannot read makes the plan offline, exit 2", async () => {
    const text = await doc();
    const [output] = tableRows(text, "## Flags every command spells the same").filter((r) =>
      r[0]!.includes("--output FORMAT"),
    );
    const planFormats = output![1]!.split(";").find((part) => part.trim().startsWith("`plan`"));
    expect(planFormats).toContain("`json` (`schemaVersion`");
    const [, , examples] = tableRows(text, "## Exit codes").find((row) => Number(row[0]) === EXIT_ERROR)!;
    expect(examples).toContain("`plan`: a hub that cannot be read (the plan falls back to offline");
  });

  it("gives the exit codes the commands use, the Node.js version guard's among them", async () => {
    const text = await doc();
    const rows = tableRows(text, "## Exit codes");
    expect(rows.map((row) => Number(row[0]))).toEqual([EXIT_OK, EXIT_FINDINGS, EXIT_ERROR, EXIT_CHANGES]);
    const entry = await readFile(join(repoRoot, "src", "cli.ts"), "utf8");
    const guard = Number(/const EXIT_ERROR = (\d+);/.exec(entry)?.[1]);
    expect(entry).toContain("process.exit(EXIT_ERROR);");
    expect(guard).toBe(EXIT_ERROR);
    const [, , examples] = rows.find((row) => Number(row[0]) === guard)!;
    expect(examples).toContain("Node.js");
  });
});
