import { describe, expect, it } from "vitest";
import { UPGRADE_TARGET_ANNOTATION } from "../../../src/api/labels.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { chainUpgrades, stepOf, stepTo, upgradeMemory } from "../../../src/upgrade/chain.ts";
import { crFile, crObject } from "../../support/fleet-files.ts";

// The upgrade chain's pure decision: which version each CR is given this sync, from what its file wants,
// what its hub CR has, and what the rollout remembers.

const desired = (
  versions: Record<string, string>,
  kind: "KnativeServing" | "KnativeEventing" = "KnativeServing",
) =>
  buildFleetModel(
    Object.entries(versions).map(([cluster, version]) =>
      crFile({ kind, name: `${cluster}-x`, cluster, version }),
    ),
    { defaultNamespace: "knative-fleet" },
  ).resources;

/** A hub CR at `version`; `installed` is status.version, Ready when given. */
function hubCr(cluster: string, version: string, installed?: string, kind = "KnativeServing"): KubeObject {
  return {
    ...crObject({ kind: kind as never, name: `${cluster}-x`, cluster, version }),
    metadata: { name: `${cluster}-x`, namespace: "knative-fleet", generation: 1 },
    ...(installed && {
      status: {
        version: installed,
        observedGeneration: 1,
        conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
      },
    }),
  } as KubeObject;
}

const versionsOf = (chained: ReturnType<typeof chainUpgrades>) =>
  Object.fromEntries(
    chained.resources.map((r) => [r.resource.spec.clusterProfileRef?.name, r.resource.spec.version]),
  );

const GATED_AT_REST = upgradeMemory(true, undefined);

/** The rollout state's memory: its phase, the chain's step under way, and what each cluster's CR settled on. */
const stored = (phase: string, step: string | undefined, settled: Record<string, string>) =>
  upgradeMemory(true, {
    phase,
    ...(step && { upgrades: { "KnativeServing 1.23": step } }),
    crs: Object.fromEntries(
      Object.entries(settled).map(([cluster, version]) => [
        `KnativeServing knative-fleet/${cluster}-x`,
        { baseline: { version } },
      ]),
    ),
  });

describe("upgrade chains", () => {
  it("gives a CR three minors behind the next minor, and says which version its file wants", () => {
    const chained = chainUpgrades(desired({ c1: "1.23.0" }), [hubCr("c1", "1.20", "1.20.1")], GATED_AT_REST);
    expect(versionsOf(chained)).toEqual({ c1: "1.21" });
    expect(chained.resources[0]!.resource.metadata.annotations?.[UPGRADE_TARGET_ANNOTATION]).toBe("1.23.0");
    expect(chained.steps).toEqual({ "KnativeServing 1.23": "1.21" });
    expect(chained.crs).toEqual([
      expect.objectContaining({
        from: "1.20",
        step: "1.21",
        target: "1.23.0",
        minors: ["1.20", "1.21", "1.22", "1.23"],
      }),
    ]);
  });

  it("leaves one minor, a new CR, another major, a downgrade and `latest` as their files say", () => {
    const wants = { c1: "1.23", c2: "1.23", c3: "2.1", c4: "1.20", c5: "latest" };
    const live = [hubCr("c1", "1.22"), hubCr("c3", "1.20"), hubCr("c4", "1.23"), hubCr("c5", "1.20")];
    const chained = chainUpgrades(desired(wants), live, GATED_AT_REST);
    expect(versionsOf(chained)).toEqual(wants);
    expect(chained.crs).toEqual([]);
    expect(chained.steps).toEqual({});
  });

  it("holds the step under way while the rollout runs or is halted, and moves it on once it completed", () => {
    const want = desired({ c1: "1.23", c2: "1.23" });
    // c1 (the canary) took 1.21; c2 still runs 1.20; both settled on 1.20.
    const live = [hubCr("c1", "1.21", "1.21.0"), hubCr("c2", "1.20", "1.20.0")];
    for (const phase of ["Progressing", "Halted"]) {
      const memory = stored(phase, "1.21", { c1: "1.20", c2: "1.20" });
      expect(versionsOf(chainUpgrades(want, live, memory))).toEqual({ c1: "1.21", c2: "1.21" });
    }
    // Every CR on 1.21 but the rollout still soaking: no 1.22 anywhere.
    const onStep = [hubCr("c1", "1.21", "1.21.0"), hubCr("c2", "1.21", "1.21.0")];
    const soaking = stored("Progressing", "1.21", { c1: "1.20", c2: "1.20" });
    expect(versionsOf(chainUpgrades(want, onStep, soaking))).toEqual({ c1: "1.21", c2: "1.21" });
    const complete = stored("Complete", "1.21", { c1: "1.21", c2: "1.21" });
    const next = chainUpgrades(want, onStep, complete);
    expect(versionsOf(next)).toEqual({ c1: "1.22", c2: "1.22" });
    expect(next.steps).toEqual({ "KnativeServing 1.23": "1.22" });
  });

  it("a CR that took a minor in the rollout under way takes no other before it completes, whatever Git says", () => {
    // 1.22 pushed as one minor (no chain) and let through to c1; 1.23 pushed while it soaks.
    const live = [hubCr("c1", "1.22", "1.22.0"), hubCr("c2", "1.21", "1.21.0")];
    const soaking = stored("Progressing", undefined, { c1: "1.21", c2: "1.21" });
    const chained = chainUpgrades(desired({ c1: "1.23", c2: "1.23" }), live, soaking);
    expect(versionsOf(chained)).toEqual({ c1: "1.22", c2: "1.22" });
    expect(chained.steps).toEqual({ "KnativeServing 1.23": "1.22" });
    // A CR no rollout completed with (no baseline) moves only between rollouts.
    const unknown = stored("Progressing", "1.21", {});
    expect(versionsOf(chainUpgrades(desired({ c1: "1.23" }), [hubCr("c1", "1.21")], unknown))).toEqual({
      c1: "1.21",
    });
    expect(
      versionsOf(
        chainUpgrades(desired({ c1: "1.23" }), [hubCr("c1", "1.21")], stored("Complete", "1.21", {})),
      ),
    ).toEqual({
      c1: "1.22",
    });
  });

  it("a CR moved below the minor it settled on is never taken two minors up at once", () => {
    // c1 settled on 1.22, then was taken back to 1.21; its file now wants 1.23.
    const live = [hubCr("c1", "1.21", "1.21.0"), hubCr("c2", "1.22", "1.22.0")];
    const memory = stored("Progressing", undefined, { c1: "1.22", c2: "1.22" });
    expect(versionsOf(chainUpgrades(desired({ c1: "1.23", c2: "1.23" }), live, memory))).toEqual({
      c1: "1.21",
      c2: "1.23",
    });
  });

  it("the last step gives the file's own version, without the annotation; a chain done is forgotten", () => {
    const want = desired({ c1: "1.23.0" });
    const memory = stored("Complete", "1.22", { c1: "1.22" });
    const last = chainUpgrades(want, [hubCr("c1", "1.22", "1.22.0")], memory);
    expect(last.resources[0]).toBe(want[0]);
    expect(last.steps).toEqual({ "KnativeServing 1.23": "1.23" });
    const done = chainUpgrades(
      want,
      [hubCr("c1", "1.23.0", "1.23.0")],
      stored("Complete", "1.22", { c1: "1.23.0" }),
    );
    expect(done.steps).toEqual({});
    expect(done.crs).toEqual([]);
  });

  it("a cluster further along waits on its version (as written); one further behind is never given more than one minor", () => {
    const want = desired({ c1: "1.23", c2: "1.23", c3: "1.23" });
    const live = [
      hubCr("c1", "1.20", "1.20.0"),
      hubCr("c2", "1.22.1", "1.22.1"),
      hubCr("c3", "1.21", "1.21.0"),
    ];
    const memory = stored("Complete", "1.21", { c1: "1.20", c2: "1.22.1", c3: "1.21" });
    // c1 did not take 1.21 (its cluster waited): the others go to 1.22 and on, c1 one minor at a time.
    expect(versionsOf(chainUpgrades(want, live, memory))).toEqual({ c1: "1.21", c2: "1.22.1", c3: "1.22" });
  });

  it("without a policy, moves on once every CR of the chain is Ready on the version it has", () => {
    const want = desired({ c1: "1.23", c2: "1.23" });
    const memory = upgradeMemory(false, undefined);
    const installing = [hubCr("c1", "1.21", "1.20.0"), hubCr("c2", "1.21", "1.21.0")];
    expect(versionsOf(chainUpgrades(want, installing, memory))).toEqual({ c1: "1.21", c2: "1.21" });
    const notReady = [hubCr("c1", "1.21"), hubCr("c2", "1.21", "1.21.0")];
    expect(versionsOf(chainUpgrades(want, notReady, memory))).toEqual({ c1: "1.21", c2: "1.21" });
    const ready = [hubCr("c1", "1.21", "1.21.3"), hubCr("c2", "1.21", "1.21.0")];
    expect(versionsOf(chainUpgrades(want, ready, memory))).toEqual({ c1: "1.22", c2: "1.22" });
    expect(chainUpgrades(want, ready, memory).steps).toEqual({});
  });

  it("Serving and Eventing, and different targets, are chains of their own", () => {
    const want = [...desired({ c1: "1.23" }), ...desired({ c1: "1.22" }, "KnativeEventing")];
    const live = [hubCr("c1", "1.20", "1.20.0"), hubCr("c1", "1.20", "1.20.0", "KnativeEventing")];
    const chained = chainUpgrades(want, live, GATED_AT_REST);
    expect(chained.steps).toEqual({ "KnativeEventing 1.22": "1.21", "KnativeServing 1.23": "1.21" });
  });

  it("a stepped CR reads back the step it was given; rewriting it again gives the same object", () => {
    const [file] = desired({ c1: "1.23" });
    const stepped = stepTo(file!, "1.21");
    expect(stepOf(stepped.resource as KubeObject)).toBe("1.21");
    expect(stepOf(file!.resource as KubeObject)).toBeUndefined();
    expect(stepTo(file!, "1.21")).toEqual(stepped);
  });
});
