import { execFile } from "node:child_process";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { crText } from "../../support/fleet-files.ts";
import { fleetRepo, planJson, runPlan } from "./support.ts";

// `plan` reads commits (--base, --head), never the working tree: a checkout's uncommitted edits to fleet
// files are named in one line, so nobody takes the plan for one of them.

const SLOW = { timeout: 60_000 };
const SERVING = "clusters/spoke-1/knative-serving.yaml";
const EVENTING = "clusters/spoke-2/knative-eventing.yaml";
const serving = (version: string) =>
  crText({
    name: "spoke-1-serving",
    cluster: "spoke-1",
    version,
    spec: { ingress: { kourier: { enabled: true } } },
  });
const eventing = crText({ kind: "KnativeEventing", name: "spoke-2-eventing", cluster: "spoke-2", spec: {} });

describe("a checkout with uncommitted edits", SLOW, () => {
  it("names the fleet files that differ from the commit, staged or not, new or deleted; the plan is of commits", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", { [SERVING]: serving("1.21"), [EVENTING]: eventing });
    await repo.commit("change", { [SERVING]: serving("1.22") });
    const args = ["--repo", repo.dir, "--base", "main", "--head", "change"];
    const clean = await runPlan(...args);
    expect(clean.stdout).not.toContain("Uncommitted");

    await writeFile(join(repo.dir, SERVING), serving("1.23")); // edited, not staged
    await writeFile(join(repo.dir, "clusters/new.yaml"), serving("1.23")); // new, staged
    await promisify(execFile)("git", ["add", "clusters/new.yaml"], { cwd: repo.dir });
    await rm(join(repo.dir, EVENTING)); // deleted
    await writeFile(join(repo.dir, "notes.md"), "not a fleet file\n");
    const dirty = await runPlan(...args);
    expect(dirty.code).toBe(clean.code);
    const lines = dirty.stdout.split("\n").filter((line) => line.includes("Uncommitted"));
    expect(lines).toEqual([
      "⚠️ Uncommitted edits to fleet files are not in this plan (it reads commits): added `clusters/new.yaml`, " +
        "modified `clusters/spoke-1/knative-serving.yaml`, removed `clusters/spoke-2/knative-eventing.yaml`.",
    ]);
    // Everything else is the plan of the commits, as before.
    expect(dirty.stdout.replace(`  \n${lines[0]}`, "")).toBe(clean.stdout);
    const { plan } = await planJson(...args);
    expect(plan.uncommitted).toEqual([
      { path: "clusters/new.yaml", change: "added" },
      { path: SERVING, change: "modified" },
      { path: EVENTING, change: "removed" },
    ]);
  });
});
