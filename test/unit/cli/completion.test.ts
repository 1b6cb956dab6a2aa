import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { completionScript } from "../../../src/commands/completion.ts";
import { commands } from "../../../src/commands/main.ts";
import { runCli } from "../../support/cli.ts";

// Each script is run by its real shell (bash, zsh and fish from Debian; scripts/install-prerequisites.sh),
// asked what completes a partly typed command line.

const dir = mkdtempSync(join(tmpdir(), "knative-fleet-completion-"));
function scriptFile(shell: "bash" | "zsh" | "fish"): string {
  const file = join(dir, `completion.${shell}`);
  writeFileSync(file, completionScript(shell, commands));
  return file;
}
const run = (shell: string, code: string) => execFileSync(shell, ["-c", code], { encoding: "utf8" });

// Each case starts a real shell a dozen times; on a loaded machine that passes the default five seconds.
describe("knative-fleet completion", { timeout: 30_000 }, () => {
  it("prints each shell's script, and refuses another shell", async () => {
    for (const shell of ["bash", "zsh", "fish"]) {
      const printed = await runCli("completion", shell);
      expect(printed.code).toBe(0);
      expect(printed.stdout).toBe(completionScript(shell as "bash", commands));
    }
    const other = await runCli("completion", "powershell");
    expect(other.code).toBe(2);
    expect(other.stderr).toContain("name one shell: bash, zsh, fish");
  });

  it("bash completes commands, a command's flags and the -o formats; files for other values", () => {
    const file = scriptFile("bash");
    const complete = (...words: string[]) =>
      run(
        "bash",
        `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _knative_fleet; echo "\${COMPREPLY[@]}"`,
      ).trim();
    expect(complete("knative-fleet", "st")).toBe("status");
    expect(complete("knative-fleet", "status", "-o", "")).toBe("table wide json yaml");
    expect(complete("knative-fleet", "clusters", "--output", "w")).toBe("wide");
    expect(complete("knative-fleet", "plan", "-o", "")).toBe("markdown json");
    expect(complete("knative-fleet", "status", "--w")).toBe("--watch");
    expect(complete("knative-fleet", "plan", "--output")).toBe("--output --output-file");
    expect(complete("knative-fleet", "completion", "")).toBe("bash zsh fish");
    expect(complete("knative-fleet", "status", "--kubeconfig", "")).toBe("");
  });

  it("fish completes the same, with each flag's description from --help", () => {
    const file = scriptFile("fish");
    const complete = (line: string) =>
      run("fish", `source ${file}; complete -C '${line}'`).trim().split("\n");
    expect(complete("knative-fleet st")).toEqual([
      "status\tShow the fleet's KnativeServing/KnativeEventing CRs and their conditions from the hub",
    ]);
    expect(
      complete("knative-fleet status -o ")
        .map((line) => line.split("\t")[0])
        .sort(),
    ).toEqual(["json", "table", "wide", "yaml"]);
    expect(complete("knative-fleet status --wa")).toEqual([
      "--watch\tprint the listing again on every change",
    ]);
    expect(
      complete("knative-fleet plan -o ")
        .map((line) => line.split("\t")[0])
        .sort(),
    ).toEqual(["json", "markdown"]);
  });

  it("zsh hands _arguments each flag of the command typed, with its formats", () => {
    const file = scriptFile("zsh");
    // compdef and _arguments are the completion system's; stand-ins print what the script gives them.
    const specs = run(
      "zsh",
      `compdef() {}; source ${file}; _arguments() { print -rl -- "$@" }; words=(knative-fleet status -o ''); CURRENT=4; _knative_fleet`,
    ).split("\n");
    expect(specs).toContain("(-o --output)-o[output format (default table)]:output:(table wide json yaml)");
    expect(specs).toContain("(-w --watch)--watch[print the listing again on every change]");
    expect(specs).toContain(
      "--kubeconfig[hub kubeconfig (default\\: $KUBECONFIG, ~/.kube/config, in-cluster)]:kubeconfig:_files",
    );
    const described = run(
      "zsh",
      `compdef() {}; source ${file}; _describe() { print -rl -- "\${(@P)4}" }; words=(knative-fleet ''); CURRENT=2; _knative_fleet`,
    );
    for (const command of commands) expect(described).toContain(`${command.name}:`);
  });
});
