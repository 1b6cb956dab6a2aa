import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { PRUNE_CONFIRMATION_CONFIGMAP } from "../../../src/api/labels.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import type { PruneCandidate } from "../../../src/mirror/decide.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import type { OpenedRollout, RolloutReport } from "../../../src/rollout/edge.ts";
import type { SyncRollout } from "../../../src/sync/sync.ts";
import type { UpgradeChains } from "../../../src/upgrade/chain.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { ANY_NAMESPACE_SETTINGS, crFile as knativeFile } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { syncInto } from "../../support/sync.ts";
import { crFile } from "../mirror/support.ts";
import { cluster, inventory, PROFILES, placementFile } from "../placement/support.ts";

// The steps of one sync (src/sync/sync.ts) that other tests leave open, asserted on what reaches the hub and
// what the sync reports: the placements' namespaces, the upgrade chains' memory with and without a rollout
// policy, the rollout's order of the prune (and only of a prune that goes ahead), the rollout's report, and
// the settings check's errors, warnings and bounded diagnostics.

const NS = "fleet";
const commit = (n: number) => String(n).repeat(40);
const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));

function hub() {
  return new FakeKube().serveKindsOf(
    KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
  );
}

/** A rollout edge that lets every change through, with the parts a test replaces. */
function rolloutEdge(parts: Partial<SyncRollout> = {}): SyncRollout {
  return {
    open: async () => undefined,
    gate: async (_opened, steps) => ({ steps: [...steps], revertEvents: [] }),
    orderPrunes: (_opened, candidates) => [...candidates],
    finish: async () => undefined,
    ...parts,
  };
}

/** A rollout opened by a policy whose first rollout this is: no state stored yet. */
const firstRollout = (at: string): OpenedRollout => ({
  commit: at,
  now: new Date("2026-03-02T15:00:00Z"),
  hubPaused: false,
  paused: false,
  refused: false,
  startedOver: false,
  frozen: [],
  approvals: new Set(),
});

describe("sync: placements select only in the namespaces knative-fleet may read", () => {
  const selectingProd: FleetFile = {
    path: "clusters/placements/serving.yaml",
    text: placementFile(
      "serving",
      "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
    ),
  };
  const clusters = inventory([
    cluster("spoke-1", { env: "prod" }),
    cluster("spoke-2", { env: "prod" }, {}, "tenant-b"),
  ]);

  it("a cluster whose ClusterProfile is in another namespace gets no CR, and nothing is written for it", async () => {
    const kube = hub();
    const result = await syncInto(kube.client, {
      files: [selectingProd],
      namespace: NS,
      commit: commit(1),
      inventory: clusters,
      settings: { access: { ...ANY_NAMESPACE_SETTINGS.access, namespaces: [PROFILES] } },
    });
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([["serving-spoke-1", "create"]]);
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeDefined();
    expect(kube.find("KnativeServing", "serving-spoke-2")).toBeUndefined();
    expect(result.diagnostics).toEqual([]);
  });

  it("with every namespace readable, the same placement selects both clusters", async () => {
    const kube = hub();
    const result = await syncInto(kube.client, {
      files: [selectingProd],
      namespace: NS,
      commit: commit(1),
      inventory: clusters,
    });
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([
      ["serving-spoke-1", "create"],
      ["serving-spoke-2", "create"],
    ]);
  });
});

describe("sync: an upgrade chain's memory comes from the rollout edge", () => {
  const serving = (version: string) => [crFile("alpha", { namespace: NS, version })];
  const versionOf = (kube: FakeKube) =>
    (kube.find("KnativeServing", "alpha")!.spec as { version?: string }).version;
  /** The hub CR Ready on `installed`, as the hub controller reports it once the install is done. */
  const readyOn = (kube: FakeKube, installed: string) => {
    const live = kube.find("KnativeServing", "alpha")!;
    kube.put({
      ...live,
      status: {
        version: installed,
        observedGeneration: live.metadata.generation,
        conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
      },
    });
  };

  it("without a rollout policy, a chain moves on only once its hub CR is Ready on the version it has", async () => {
    const kube = hub();
    const rollout = rolloutEdge();
    await syncInto(kube.client, { files: serving("1.21"), namespace: NS, commit: commit(1), rollout });
    expect(versionOf(kube)).toBe("1.21");

    // The file wants 1.23 while 1.21 is not installed yet: the hub CR stays on 1.21.
    const waiting = await syncInto(kube.client, {
      files: serving("1.23"),
      namespace: NS,
      commit: commit(2),
      rollout,
    });
    expect(versionOf(kube)).toBe("1.21");
    expect(waiting.upgrades).toEqual([
      expect.objectContaining({
        key: `KnativeServing ${NS}/alpha`,
        from: "1.21",
        step: "1.21",
        target: "1.23",
      }),
    ]);

    // Ready on 1.21: the next sync takes it one minor up, not two.
    readyOn(kube, "1.21.0");
    const moved = await syncInto(kube.client, {
      files: serving("1.23"),
      namespace: NS,
      commit: commit(2),
      rollout,
    });
    expect(versionOf(kube)).toBe("1.22");
    expect(moved.upgrades).toEqual([expect.objectContaining({ from: "1.21", step: "1.22", target: "1.23" })]);
  });

  it("with a rollout policy and no stored state, the chain's first step is taken and handed to the gate to store", async () => {
    const kube = hub();
    const handed: UpgradeChains[] = [];
    const rollout = rolloutEdge({
      open: async (_model, at) => firstRollout(at),
      gate: async (_opened, steps, _live, _held, upgrades) => {
        if (upgrades) handed.push(upgrades);
        return { steps: [...steps], revertEvents: [] };
      },
    });
    await syncInto(kube.client, { files: serving("1.21"), namespace: NS, commit: commit(1), rollout });
    expect(handed.at(-1)?.steps).toEqual({});

    // Not Ready on 1.21: the policy's rollout carries the step through its waves, the hub CR's state aside.
    const result = await syncInto(kube.client, {
      files: serving("1.23"),
      namespace: NS,
      commit: commit(2),
      rollout,
    });
    expect(versionOf(kube)).toBe("1.22");
    expect(result.upgrades).toEqual([
      expect.objectContaining({ from: "1.21", step: "1.22", target: "1.23" }),
    ]);
    expect(handed.at(-1)?.steps).toEqual({ "KnativeServing 1.23": "1.22" });
  });
});

describe("sync: the rollout orders a prune that goes ahead, and only that one", () => {
  const names = ["alpha", "beta", "gamma", "delta"];
  const all = names.map((name) => crFile(name, { namespace: NS }));
  const deltaOnly = [crFile("delta", { namespace: NS })];
  /** The hub, the four CRs on it, and the names it is asked to delete, in order. */
  async function seeded() {
    const kube = hub();
    const deleted: string[] = [];
    const remove = kube.client.delete.bind(kube.client);
    kube.client.delete = async (apiVersion, kind, namespace, name, ...rest) => {
      deleted.push(name);
      return remove(apiVersion, kind, namespace, name, ...rest);
    };
    await syncInto(kube.client, { files: all, namespace: NS, commit: commit(1) });
    expect(names.every((name) => kube.find("KnativeServing", name))).toBe(true);
    return { kube, deleted };
  }
  /** Reverse wave order, beta's wave not open yet. */
  const waves = rolloutEdge({
    orderPrunes: (_opened, candidates) =>
      [...candidates]
        .reverse()
        .map((c): PruneCandidate => (c.name === "beta" ? { ...c, waiting: "wave prod is not open" } : c)),
  });

  it("deletes in the rollout's order, and not a CR whose wave waits", async () => {
    const { kube, deleted } = await seeded();
    const result = await syncInto(kube.client, {
      files: deltaOnly,
      namespace: NS,
      commit: commit(2),
      prune: { maxPruneFraction: 1 },
      rollout: waves,
    });
    expect(result.prune.state).toBe("pruned");
    expect(result.prune.candidates.map((c) => [c.name, c.waiting, c.error])).toEqual([
      ["gamma", undefined, undefined],
      ["beta", "wave prod is not open", undefined],
      ["alpha", undefined, undefined],
    ]);
    expect(deleted).toEqual(["gamma", "alpha"]);
    expect(kube.find("KnativeServing", "beta")).toBeDefined();
    expect(kube.find("KnativeServing", "alpha")).toBeUndefined();
    expect(kube.find("KnativeServing", "gamma")).toBeUndefined();
  });

  it("a held prune is reported and recorded as decided: no wave order, no wave marks, nothing deleted", async () => {
    const { kube, deleted } = await seeded();
    const result = await syncInto(kube.client, {
      files: deltaOnly,
      namespace: NS,
      commit: commit(2),
      rollout: waves,
    });
    expect(result.prune).toMatchObject({ state: "held", reason: "over-max-fraction" });
    expect(result.prune.candidates).toEqual(
      ["alpha", "beta", "gamma"].map((name) => ({
        kind: "KnativeServing",
        namespace: NS,
        name,
        path: `clusters/${name}.yaml`,
      })),
    );
    expect(deleted).toEqual([]);
    const data = kube.find("ConfigMap", PRUNE_CONFIRMATION_CONFIGMAP)?.data as Record<string, string>;
    const record = JSON.parse(data.held ?? "null") as unknown;
    expect(record).toMatchObject({
      count: 3,
      candidates: ["alpha", "beta", "gamma"].map((name) => `KnativeServing ${NS}/${name}`),
    });
  });
});

describe("sync: the rollout's report", () => {
  it("is the sync's `rollout` as the rollout edge gave it", async () => {
    const kube = hub();
    const report: RolloutReport = {
      phase: "Progressing",
      commit: commit(1),
      wave: "canary",
      paused: false,
      waiting: 0,
      history: [],
    };
    const result = await syncInto(kube.client, {
      files: [crFile("alpha", { namespace: NS })],
      namespace: NS,
      commit: commit(1),
      rollout: rolloutEdge({ finish: async () => report }),
    });
    expect(result.rollout).toEqual(report);
    expect(result).not.toHaveProperty("phase");
  });

  it("is absent when the fleet has no rollout policy", async () => {
    const kube = hub();
    const result = await syncInto(kube.client, {
      files: [crFile("alpha", { namespace: NS })],
      namespace: NS,
      commit: commit(1),
      rollout: rolloutEdge(),
    });
    expect(result).not.toHaveProperty("rollout");
  });
});

describe("sync: the settings check's errors and warnings", () => {
  const alpha = (spec: Record<string, unknown>) =>
    knativeFile({ name: "alpha", namespace: NS, cluster: "spoke-1", spec });
  const gamma = (spec: Record<string, unknown>) =>
    knativeFile({ name: "gamma", namespace: NS, cluster: "spoke-3", spec });
  const typo = { config: { autoscalr: { "enable-scale-to-zero": "false" } } };
  const ha = { "high-availability": { replicas: 2 } };
  const syncFiles = (kube: FakeKube, files: FleetFile[], n: number) =>
    syncInto(kube.client, { files, namespace: NS, commit: commit(n), releases });

  it("the warnings are the warnings alone, the error of another file of the same push among the diagnostics", async () => {
    const kube = hub();
    const result = await syncFiles(kube, [alpha(typo), gamma(ha)], 1);
    expect(result.diagnostics).toEqual([
      expect.objectContaining({ path: "clusters/alpha.yaml", field: "spec.config.autoscalr" }),
    ]);
    expect(result.warnings).toHaveLength(2);
    expect(result.warnings).toEqual([
      expect.objectContaining({ path: "clusters/gamma.yaml", severity: "warning" }),
      expect.objectContaining({ path: "clusters/gamma.yaml", severity: "warning" }),
    ]);
    expect(kube.find("KnativeServing", "gamma")?.spec).toMatchObject(ha);
    expect(kube.find("KnativeServing", "alpha")).toBeUndefined();
  });

  it("no diagnostic is counted as omitted when every one is shown, the model's own and the check's", async () => {
    const kube = hub();
    const broken: FleetFile = { path: "clusters/broken.yaml", text: "kind: KnativeServing\nmetadata: {}\n" };
    const result = await syncFiles(kube, [alpha(typo), broken], 1);
    expect(result.diagnostics.map((d) => d.path)).toEqual(
      expect.arrayContaining(["clusters/alpha.yaml", "clusters/broken.yaml"]),
    );
    expect(result.model.omittedDiagnostics).toBe(0);
    expect(result.failedFiles.map((file) => file.path).sort()).toEqual([
      "clusters/alpha.yaml",
      "clusters/broken.yaml",
    ]);
  });

  it("a file's errors past the per-file bound are counted as omitted", async () => {
    const kube = hub();
    const typos = Object.fromEntries(
      Array.from({ length: 25 }, (_, i) => [`nosuchmap${String(i).padStart(2, "0")}`, { key: "value" }]),
    );
    const result = await syncFiles(kube, [alpha({ config: typos })], 1);
    expect(result.diagnostics).toHaveLength(20);
    expect(result.diagnostics.every((d) => d.path === "clusters/alpha.yaml")).toBe(true);
    expect(result.model.omittedDiagnostics).toBe(5);
  });

  it("a hub CR whose status.version is empty runs no known release: a key its file's minor lacks stays an error", async () => {
    const kube = hub();
    // klog-verbosity is documented in Eventing 1.23's config-logging and not in 1.22's.
    const at = (version: string) =>
      knativeFile({
        kind: "KnativeEventing",
        name: "beta",
        namespace: NS,
        cluster: "spoke-2",
        version,
        spec: { config: { logging: { "klog-verbosity": "2" } } },
      });
    await syncFiles(kube, [at("1.23")], 1);
    const applied = kube.find("KnativeEventing", "beta")!;
    kube.put({ ...applied, status: { version: "" } });
    const result = await syncFiles(kube, [at("1.22")], 2);
    expect(result.diagnostics).toEqual([
      expect.objectContaining({ path: "clusters/beta.yaml", field: "spec.config.logging.klog-verbosity" }),
    ]);
    expect(result.warnings).toEqual([]);
    expect(kube.find("KnativeEventing", "beta")?.spec).toMatchObject({ version: "1.23" });
  });
});
