import { describe, expect, it } from "vitest";
import { commands } from "../../../src/commands/main.ts";
import { runCli } from "../../support/cli.ts";

const run = runCli;

describe("knative-fleet CLI", () => {
  it("lists every command in its help", async () => {
    const { code, stdout } = await run("--help");
    expect(code).toBe(0);
    for (const name of ["run", "validate", "plan", "clusters", "status"])
      expect(stdout).toContain(`  ${name} `);
  });

  it("gives each command a --help of its own", async () => {
    for (const command of commands) {
      const { code, stdout } = await run(command.name, "--help");
      expect(code, command.name).toBe(0);
      expect(stdout, command.name).toContain(`Usage: knative-fleet ${command.name}`);
    }
  });

  it("refuses an unknown command and an unknown flag with exit 2 and says what was wrong", async () => {
    const unknown = await run("deploy");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "deploy"');
    const flag = await run("status", "--colour");
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("--colour");
    expect(flag.stderr).toContain("knative-fleet status --help");
  });

  it("prints a command's help for `help <command>`, the top-level help for `help` alone", async () => {
    for (const command of commands) {
      const help = await run("help", command.name);
      expect(help.code, command.name).toBe(0);
      expect(help.stdout, command.name).toBe((await run(command.name, "--help")).stdout);
    }
    const top = await run("help");
    expect(top.code).toBe(0);
    expect(top.stdout).toBe((await run("--help")).stdout);
  });

  it("refuses `help` of an unknown command with exit 2 and names it", async () => {
    const { code, stdout, stderr } = await run("help", "nosuch");
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toContain('unknown command "nosuch"');
  });

  it("exits 2 without a command", async () => {
    expect((await run()).code).toBe(2);
  });
});
