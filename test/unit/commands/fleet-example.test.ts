import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installCliShims, runScript } from "../../support/ci-steps.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";

// fleet-example/README.md, followed as written: its "Trying it offline" commands run in bash, in a git
// clone of fleet-example with the README's ClusterProfile snapshot saved beside them and this checkout's CLI
// on the PATH. They must pass (moving the placement alone gave spoke-1 two KnativeServings); and the
// README's word that a CR without clusterProfileRef is refused holds for validate.

const README = join(repoRoot, "fleet-example", "README.md");

/** The first fenced block of `language` after `heading` in the README. */
function block(text: string, heading: string, language: string): string {
  const section = text.slice(text.indexOf(heading));
  expect(section.length, heading).toBeLessThan(text.length);
  const start = section.indexOf(`\`\`\`${language}\n`) + language.length + 4;
  return section.slice(start, section.indexOf("```\n", start));
}

let work = "";
let bin = "";
let clone = "";
const env = () => ({
  PATH: `${bin}:${dirname(process.execPath)}:${process.env.PATH}`,
  HOME: work,
  KO_DATA_PATH: knativeReleasesDir(),
  GIT_AUTHOR_NAME: "Platform",
  GIT_AUTHOR_EMAIL: "platform@example.com",
  GIT_COMMITTER_NAME: "Platform",
  GIT_COMMITTER_EMAIL: "platform@example.com",
});
const sh = (script: string) => runScript(["bash", "-e", "-c"], script, env(), clone);

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "knative-fleet-example-"));
  bin = join(work, "bin");
  await mkdir(bin);
  await installCliShims(bin);
  clone = join(work, "fleet");
  await cp(join(repoRoot, "fleet-example"), clone, { recursive: true });
  const init = await sh("git init -q -b main && git add -A && git commit -qm 'the example fleet'");
  expect(init.code, init.stderr).toBe(0);
});

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe("fleet-example/README.md, as written", { timeout: 120_000 }, () => {
  it("moving the placement in place of spoke-1's file: validate and the offline plan pass", async () => {
    const text = await readFile(README, "utf8");
    await writeFile(join(clone, "cluster-profiles.yaml"), block(text, "### Trying it offline", "yaml"));
    const commands = block(text, "### Trying it offline", "sh");
    expect(commands).toContain("git mv placements/knative-serving.yaml");
    const ran = await sh(commands);
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    // validate's summary, then the plan: one CR removed, the placement's two created.
    expect(ran.stdout).toContain("2 files, 3 resources, 1 placement, 0 errors\n");
    expect(ran.stdout).not.toMatch(/conflict/i);
    for (const name of ["spoke-1-serving", "serving-spoke-1", "serving-spoke-3"])
      expect(ran.stdout).toContain(name);
  });

  it("moving the placement alone is the conflict the README warns of", async () => {
    const text = await readFile(README, "utf8");
    const commands = block(text, "### Trying it offline", "sh");
    const moveOnly = commands
      .split("\n")
      .filter(
        (line) =>
          !line.startsWith("git rm ") &&
          !line.startsWith("git commit") &&
          !line.startsWith("knative-fleet plan"),
      )
      .join("\n");
    await sh("git reset -q --hard HEAD~1");
    const ran = await sh(moveOnly);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toContain("spoke-1");
  });

  it("a CR without clusterProfileRef is refused, as the conventions say", async () => {
    await sh("git reset -q --hard && git clean -qfd clusters");
    const file = join(clone, "clusters", "spoke-1", "knative-serving.yaml");
    const text = await readFile(file, "utf8");
    await writeFile(file, text.replace(/ {2}clusterProfileRef:\n( {4}.*\n)+/, ""));
    const ran = await sh("knative-fleet validate .");
    expect(ran.code).toBe(1);
    expect(ran.stdout).toMatch(/clusters\/spoke-1\/knative-serving\.yaml:\d+:\d+ .*hub/);
    expect(text).toContain("clusterProfileRef:");
    // And the README says so (it once said such a CR installs on the hub).
    const target = (await readFile(README, "utf8")).replace(/\s+/g, " ");
    expect(target).toContain(
      "A CR without it targets the hub itself, which the service refuses unless hub installs are enabled",
    );
  });
});
