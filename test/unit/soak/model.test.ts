import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  changedTexts,
  type FleetFiles,
  type FleetLayout,
  KNATIVE_MINORS,
  nextPush,
  PLACEMENT_PATH,
  protectedCrs,
  ROLLOUT_PATH,
  renderFiles,
  ringOf,
  type SpokeProfile,
  servingPath,
  warmUpPushes,
} from "../../soak/model.ts";
import { runCli } from "../../support/cli.ts";
import { seededRandom } from "../../support/seeded-random.ts";

// The soak's model of a fleet repository: the changes it makes are ones people make (a minor at a time,
// never an empty fleet, a broken file fixed by the next push), and what it renders is what knative-fleet
// accepts, or, for a broken file, refuses with that file's name.

const layout: FleetLayout = {
  namespace: "soak-x",
  profileNamespace: "soak-x-clusters",
  spokes: ["spoke-1", "spoke-2", "spoke-3"],
};
const first = (): FleetFiles => ({
  serving: new Map(layout.spokes.map((s, i) => [s, { version: "1.22", marker: i + 1 }])),
  placement: { version: "1.22", marker: 9, rings: ["r1", "r2", "r3"] },
  rollout: undefined,
  broken: new Map(),
});
const inventory = new Map<string, SpokeProfile>(
  layout.spokes.map((s) => [s, { exists: true, eventing: true, ring: ringOf(layout, s), healthy: true }]),
);

function walk(seed: number, steps: number): FleetFiles[] {
  const rng = seededRandom(seed);
  let marker = 100;
  const revisions = [first()];
  for (let i = 0; i < steps; i++)
    revisions.push(
      nextPush(layout, revisions.at(-1)!, {
        rng,
        marker: () => ++marker,
        versionSettled: () => rng() < 0.7,
        mayBreak: true,
      }).files,
    );
  return revisions;
}

describe("the soak's pushes", () => {
  it("change something every time, a version one minor at a time, never empty the fleet, and fix a broken file next", () => {
    const revisions = walk(7, 400);
    const kinds = new Set<string>();
    for (let i = 1; i < revisions.length; i++) {
      const [before, after] = [revisions[i - 1]!, revisions[i]!];
      expect(
        Object.keys(changedTexts(renderFiles(layout, before), renderFiles(layout, after))).length,
        `push ${i}`,
      ).toBeGreaterThan(0);
      expect(after.serving.size).toBeGreaterThanOrEqual(layout.spokes.length - 1);
      if (before.broken.size > 0) expect(after.broken.size, `push ${i} fixes`).toBe(0);
      const versions = [...after.serving.values()].map((c) => c.version);
      expect(new Set(versions).size).toBeLessThanOrEqual(1);
      for (const [from, to] of [
        [[...before.serving.values()][0]?.version, versions[0]],
        [before.placement?.version, after.placement?.version],
      ]) {
        if (!from || !to) continue;
        expect(
          Math.abs(KNATIVE_MINORS.indexOf(to as never) - KNATIVE_MINORS.indexOf(from as never)),
        ).toBeLessThanOrEqual(1);
      }
      if (after.broken.size > 0) kinds.add("broken");
      if (after.rollout) kinds.add("rollout");
      if ((after.placement?.rings.length ?? 0) < 3) kinds.add("narrowed");
      if (after.serving.size < layout.spokes.length) kinds.add("removed");
    }
    expect([...kinds].sort()).toEqual(["broken", "narrowed", "removed", "rollout"]);
  });

  it("a broken placement or policy keeps what it declared from being pruned", () => {
    const files = first();
    const declared = protectedCrs(layout, files, inventory, new Set());
    expect(declared.size).toBe(6);
    const relabelled = new Map(inventory);
    relabelled.set("spoke-2", { ...inventory.get("spoke-2")!, eventing: false });
    expect(
      protectedCrs(layout, files, relabelled, declared).has("KnativeEventing soak-x/eventing-spoke-2"),
    ).toBe(false);
    const brokenPlacement = { ...files, broken: new Map([[PLACEMENT_PATH, "yaml-syntax" as const]]) };
    expect(
      protectedCrs(layout, brokenPlacement, relabelled, declared).has(
        "KnativeEventing soak-x/eventing-spoke-2",
      ),
    ).toBe(true);
    const withoutSpoke3 = {
      ...files,
      serving: new Map([...files.serving].slice(0, 2)),
      rollout: { canary: "spoke-1", maxUnavailable: 1, soak: "5s" },
    };
    const brokenPolicy = { ...withoutSpoke3, broken: new Map([[ROLLOUT_PATH, "kind-typo" as const]]) };
    expect(
      protectedCrs(layout, withoutSpoke3, inventory, declared).has("KnativeServing soak-x/serving-spoke-3"),
    ).toBe(false);
    expect(
      protectedCrs(layout, brokenPolicy, inventory, declared).has("KnativeServing soak-x/serving-spoke-3"),
    ).toBe(true);
  });
});

describe("the warm-up of a long run", () => {
  it("widens the placement to every ring and takes both components through every minor, one at a time", () => {
    let marker = 100;
    const start = { ...first(), placement: { version: "1.21", marker: 9, rings: ["r2"] } };
    const pushes = warmUpPushes(layout, start, () => ++marker);
    expect(pushes[0]!.files.placement!.rings).toEqual(["r1", "r2", "r3"]);
    const serving = pushes.map((p) => [...p.files.serving.values()][0]!.version);
    const eventing = pushes.map((p) => p.files.placement!.version);
    for (const versions of [serving, eventing]) {
      expect(new Set(versions)).toEqual(new Set(KNATIVE_MINORS));
      for (let i = 1; i < versions.length; i++)
        expect(
          Math.abs(
            KNATIVE_MINORS.indexOf(versions[i]! as never) - KNATIVE_MINORS.indexOf(versions[i - 1]! as never),
          ),
        ).toBeLessThanOrEqual(1);
    }
    // Each version push is new content (a marker of its own), so the fleet converges on something new.
    const markers = pushes.flatMap((p) => [...p.files.serving.values()].map((c) => c.marker));
    expect(new Set(markers).size).toBeGreaterThan(layout.spokes.length);
  });
});

describe("the files it renders", () => {
  it("are valid fleet files for knative-fleet validate, and a broken one is reported by its path", async () => {
    const dir = await mkdtemp(join(tmpdir(), "knative-fleet-soak-model-"));
    try {
      const config = join(dir, "config.yaml");
      await writeFile(
        config,
        stringify({
          repository: { url: "https://git.example.com/fleet.git" },
          defaultNamespace: layout.namespace,
          allowedClusterProfileNamespaces: [layout.profileNamespace],
        }),
      );
      const revisions = walk(11, 60);
      let checkedBroken = 0;
      for (const [i, files] of revisions.entries()) {
        if (i % 6 !== 0 && files.broken.size === 0) continue;
        const repo = join(dir, `r${i}`);
        for (const [path, text] of renderFiles(layout, files)) {
          await mkdir(dirname(join(repo, path)), { recursive: true });
          await writeFile(join(repo, path), text);
        }
        const { code, stdout } = await runCli("validate", "--config", config, repo);
        if (files.broken.size === 0) expect(code, `revision ${i}: ${stdout}`).toBe(0);
        else {
          checkedBroken++;
          expect(code, `revision ${i}`).toBe(1);
          for (const path of files.broken.keys()) expect(stdout).toContain(path);
        }
      }
      expect(checkedBroken).toBeGreaterThan(0);
      expect(servingPath("spoke-1")).toBe("clusters/serving-spoke-1.yaml");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
