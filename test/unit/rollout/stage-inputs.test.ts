import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { GATE_SECRET_LABEL } from "../../../src/api/labels.ts";
import { buildFleetModel, type FleetFile } from "../../../src/fleet/model.ts";
import type { RolloutStage } from "../../../src/rollout/stage.ts";
import {
  peekRolloutState,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_STATE_CONFIGMAP,
  type RolloutState,
} from "../../../src/rollout/state.ts";
import { capturingLogger } from "../../support/capturing-logger.ts";
import type { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { fleetFiles, hubWithKnativeKinds, stageOn, syncThrough } from "./support.ts";

// What the rollout stage hands the gate and the prune: the service's Prometheus and the gate's token, the
// CRs of files that fail validation, a first rollout's (absent) baselines, and deletions while every
// change is held.

const POLICY = { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }] };
const SERVING = (cluster: string) => `KnativeServing knative-fleet/${cluster}-serving`;

type StageOptions = ConstructorParameters<typeof RolloutStage>[0];

function setup(extra: Partial<StageOptions> = {}, kube: FakeKube = hubWithKnativeKinds()) {
  const models = new Map<string, ReturnType<typeof buildFleetModel>>();
  const stage = stageOn(kube, {
    modelAt: async (commit) => models.get(commit) ?? Promise.reject(new Error(`no commit ${commit}`)),
    ...extra,
  });
  const syncStage = syncThrough(kube, () => stage);
  const sync = (files: FleetFile[], commit: string) => {
    models.set(commit, buildFleetModel(files, { defaultNamespace: "knative-fleet" }));
    return syncStage(files, commit);
  };
  return { kube, stage, sync };
}

const healthy = (kube: FakeKube, name: string) => {
  const cr = kube.find("KnativeServing", name)!;
  cr.status = {
    observedGeneration: cr.metadata.generation ?? 1,
    conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({ type, status: "True" })),
  };
};

const version = (kube: FakeKube, name: string) =>
  (kube.find("KnativeServing", name)?.spec as { version?: string } | undefined)?.version;

const stored = (kube: FakeKube): RolloutState | undefined =>
  peekRolloutState(kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)?.data as Record<string, unknown>);

/** Syncs `files` at `commit`, every CR there made healthy before each sync, until the rollout is complete. */
async function complete(hub: ReturnType<typeof setup>, files: FleetFile[], commit: string) {
  for (let attempt = 0; attempt < 5; attempt++) {
    const { report } = await hub.sync(files, commit);
    if (report?.phase === "Complete") return;
    for (const cr of hub.kube.objects().filter((o) => o.kind === "KnativeServing")) {
      healthy(hub.kube, cr.metadata.name!);
    }
  }
  throw new Error("the rollout did not complete");
}

describe("the verification gates the stage runs", () => {
  it("a prometheus gate without a url queries the service's Prometheus with the token of its labelled Secret", async () => {
    const asked: { query: string | null; authorization: string | undefined }[] = [];
    const prometheus = createServer((req: IncomingMessage, res) => {
      const url = new URL(req.url ?? "/", "http://localhost");
      asked.push({ query: url.searchParams.get("query"), authorization: req.headers.authorization });
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          status: "success",
          data: { resultType: "vector", result: [{ metric: {}, value: [1_700_000_000, "0.01"] }] },
        }),
      );
    });
    await new Promise<void>((resolve) => prometheus.listen(0, "127.0.0.1", resolve));
    const { port } = prometheus.address() as AddressInfo;
    const { logger: log, lines } = capturingLogger();
    const hub = setup({ log, prometheusUrl: `http://127.0.0.1:${port}` });
    hub.kube.put({
      apiVersion: "v1",
      kind: "Secret",
      metadata: {
        name: "prometheus-token",
        namespace: "knative-fleet",
        labels: { [GATE_SECRET_LABEL]: "true" },
      },
      data: { token: Buffer.from("s3cret\n").toString("base64") },
    });
    const gates = [
      {
        name: "errors",
        waves: ["canary"],
        prometheus: {
          query: 'sum(rate(errors{cluster="{{ .cluster.name }}"}[5m]))',
          threshold: { op: "<", value: 0.05 },
          bearerTokenSecretRef: { name: "prometheus-token", key: "token" },
        },
      },
    ];
    const files = fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s", gates }, () => "1.21");
    try {
      await hub.sync(files, "a");
      healthy(hub.kube, "c1-serving");
      await hub.sync(files, "a");
      await hub.sync(files, "a");
      // The canary passes its gate: the next wave gets the change.
      expect(asked[0]).toEqual({
        query: 'sum(rate(errors{cluster="c1"}[5m]))',
        authorization: "Bearer s3cret",
      });
      expect(lines().find((line) => line.msg === "verification gates evaluated")).toMatchObject({
        crs: 1,
        requests: 1,
        failing: {},
      });
      expect(hub.kube.find("KnativeServing", "c2-serving")).toBeDefined();
      expect(stored(hub.kube)?.halt).toBeUndefined();
    } finally {
      hub.stage.stop();
      prometheus.closeAllConnections();
      await new Promise((resolve) => prometheus.close(resolve));
    }
  });
});

describe("the rollout's inputs from the commit", () => {
  it("a canary in flight whose file breaks still holds the next wave: its change is not done", async () => {
    const hub = setup();
    const policy = { ...POLICY, soak: "0s" };
    await complete(
      hub,
      fleetFiles(["c1", "c2"], policy, () => "1.21"),
      "a",
    );
    await hub.sync(
      fleetFiles(["c1", "c2"], policy, () => "1.22"),
      "b",
    );
    expect([version(hub.kube, "c1-serving"), version(hub.kube, "c2-serving")]).toEqual(["1.22", "1.21"]);
    // c1's file fails validation while the canary is not healthy on 1.22: c2 keeps waiting for the canary.
    const broken = fleetFiles(["c1", "c2"], policy, (c) => (c === "c1" ? null : "1.22"));
    for (let attempt = 0; attempt < 3; attempt++) {
      const { result, report } = await hub.sync(broken, "c");
      expect(result.resources.map((r) => [r.name, r.action])).toEqual([["c2-serving", "waiting"]]);
      expect(report).toMatchObject({ phase: "Progressing", wave: "canary" });
    }
    expect([version(hub.kube, "c1-serving"), version(hub.kube, "c2-serving")]).toEqual(["1.22", "1.21"]);
    hub.stage.stop();
  });

  it("a CR of the same name made by hand is left alone, and is no member of the rollout", async () => {
    const kube = hubWithKnativeKinds();
    // c2-serving was made by hand (no managed-by label) and is not Ready.
    kube.put(crObject({ name: "c2-serving", cluster: "c2", version: "1.20" }));
    const hub = setup({}, kube);
    const files = fleetFiles(["c1", "c2"], { ...POLICY, soak: "0s" }, () => "1.21");
    await hub.sync(files, "a");
    healthy(kube, "c1-serving");
    const { result, report } = await hub.sync(files, "a");
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "unchanged"],
      ["c2-serving", "conflict"],
    ]);
    expect(report?.phase).toBe("Complete");
    expect(Object.keys(stored(kube)?.crs ?? {})).toEqual([SERVING("c1")]);
    expect(version(kube, "c2-serving")).toBe("1.20");
    hub.stage.stop();
  });

  it("a policy added to a running fleet has no baseline before its first rollout completes: a halt reverts nothing", async () => {
    let clock = Date.parse("2026-11-30T10:00:00Z");
    const hub = setup({ now: () => new Date(clock) });
    const at121 = fleetFiles(["c1", "c2"], undefined, () => "1.21");
    await hub.sync(at121, "a");
    healthy(hub.kube, "c1-serving");
    healthy(hub.kube, "c2-serving");
    const policy = { ...POLICY, soak: "0s", timeLimit: "0s", onFailure: "HaltAndRevert" };
    const at122 = fleetFiles(["c1", "c2"], policy, () => "1.22");
    const first = await hub.sync(at122, "b");
    expect(first.result.resources.map((r) => [r.name, r.action])).toEqual([
      ["c1-serving", "update"],
      ["c2-serving", "waiting"],
    ]);
    expect(stored(hub.kube)?.crs[SERVING("c1")]?.baseline).toBeUndefined();
    expect(stored(hub.kube)?.crs[SERVING("c2")]?.baseline).toBeUndefined();
    // The canary never becomes healthy on 1.22: halted, and with no baseline nothing goes back.
    clock += 60_000;
    const halted = await hub.sync(at122, "b");
    expect(halted.report?.phase).toBe("Halted");
    expect(halted.report).not.toHaveProperty("reverted");
    expect([version(hub.kube, "c1-serving"), version(hub.kube, "c2-serving")]).toEqual(["1.22", "1.21"]);
    hub.stage.stop();
  });
});

describe("deletions and the rollout stage", () => {
  it("without a policy, a CR gone from Git is deleted at once", async () => {
    const hub = setup();
    await hub.sync(
      fleetFiles(["c1", "c2", "c3"], undefined, () => "1.21"),
      "a",
    );
    const { result, report } = await hub.sync(
      fleetFiles(["c1", "c2"], undefined, () => "1.21"),
      "b",
    );
    expect(report).toBeUndefined();
    expect(result.prune.state).toBe("pruned");
    expect(result.prune.candidates.map((c) => [c.name, c.waiting ?? "deleted"])).toEqual([
      ["c3-serving", "deleted"],
    ]);
    expect(hub.kube.find("KnativeServing", "c3-serving")).toBeUndefined();
    hub.stage.stop();
  });

  it("a refused state holds deletions too, each saying why", async () => {
    const hub = setup();
    const policy = { ...POLICY, soak: "0s", maxUnavailable: "100%" };
    await complete(
      hub,
      fleetFiles(["c1", "c2", "c3"], policy, () => "1.21"),
      "a",
    );
    // Someone who may write ConfigMaps edits the state: its HMAC no longer matches.
    const data = hub.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data as Record<string, string>;
    data.state = JSON.stringify({ ...JSON.parse(data.state!), phase: "Halted" });
    const { result, report } = await hub.sync(
      fleetFiles(["c1", "c2"], policy, () => "1.21"),
      "b",
    );
    expect(report?.phase).toBe("Refused");
    expect(report?.message).toMatch(/HMAC does not match/);
    expect(result.prune.candidates.map((c) => [c.name, c.waiting])).toEqual([
      ["c3-serving", report?.message],
    ]);
    expect(hub.kube.find("KnativeServing", "c3-serving")).toBeDefined();
    hub.stage.stop();
  });

  it("while the inventory is not read, every change and deletion waits, no key is read or made, and it looks again", async () => {
    let due = 0;
    const hub = setup({ inventory: () => undefined, onDue: () => due++ });
    await hub.sync(
      fleetFiles(["c1", "c2", "c3"], undefined, () => "1.21"),
      "a",
    );
    hub.kube.resetCounts();
    const { result, report } = await hub.sync(
      fleetFiles(["c1", "c2"], POLICY, () => "1.22"),
      "b",
    );
    const message = "the ClusterProfile inventory is not read yet; changes wait for it";
    expect(report).toEqual({ phase: "Waiting", paused: false, waiting: 2, history: [], message });
    expect(result.resources.map((r) => [r.name, r.action, r.reason])).toEqual([
      ["c1-serving", "waiting", message],
      ["c2-serving", "waiting", message],
    ]);
    expect(result.prune.candidates.map((c) => [c.name, c.waiting])).toEqual([["c3-serving", message]]);
    expect(hub.kube.find("KnativeServing", "c3-serving")).toBeDefined();
    expect(version(hub.kube, "c1-serving")).toBe("1.21");
    // Only the state ConfigMap is read (for the hub pause): the key Secret is neither read nor made.
    expect(hub.kube.find("Secret", ROLLOUT_KEY_SECRET)).toBeUndefined();
    expect(hub.kube.requests().reads).toBe(4); // the mirror's 3 and the state ConfigMap
    // Nothing else would bring a sync once the inventory is listed: it looks again.
    due = 0;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(due).toBeGreaterThan(0);
    hub.stage.stop();
  });
});
