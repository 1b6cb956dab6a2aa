import { afterEach, describe, expect, it } from "vitest";
import { rolloutOnHub } from "../../../src/commands/status.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { GatedSteps } from "../../../src/rollout/edge.ts";
import { RolloutStage } from "../../../src/rollout/stage.ts";
import { describeRollout, ROLLOUT_STATE_CONFIGMAP, rolloutVerdict } from "../../../src/rollout/state.ts";
import { commitStatuses } from "../../../src/status/commit-status.ts";
import { renderStatusSummary } from "../../../src/status/summary.ts";
import type { SyncResult, SyncRollout } from "../../../src/sync/sync.ts";
import { markdownText } from "../../../src/text/markdown.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { syncInto } from "../../support/sync.ts";
import { cluster, fleetFiles, REPOSITORY } from "./support.ts";

// The same rollout read by the three readers people meet: the status file committed back to Git (from the
// sync's report), `knative-fleet status` (from the state ConfigMap on the hub, without the key) and the gate
// (a held CR's waiting reason, or its Event when the rollout moves). Each shows the one sentence of
// rolloutVerdict, so a person who reads two of them never reads two stories.

const NAMESPACE = "knative-fleet";
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const NEXT = "fedcba9876543210fedcba9876543210fedcba98";
/** A Monday, 10:00 UTC. */
const START = Date.parse("2026-01-05T10:00:00Z");
/** canary (c1), then the remaining wave (c2). */
const POLICY = {
  waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
  soak: "0s",
  timeLimit: "1m",
};

/** A hub with the Knative kinds, a rollout stage on it and a clock the test moves; each sync's gate kept. */
function rolloutHub(inventoryRead = true) {
  const inventory = inventoryRead ? [cluster("c1"), cluster("c2")] : undefined;
  const kube = new FakeKube().serveKindsOf([
    crObject({ name: "x", cluster: "c1" }),
    crObject({ kind: "KnativeEventing", name: "y", cluster: "c1" }),
    { apiVersion: "v1", kind: "Event", metadata: {} },
  ]);
  let now = START;
  const stage = new RolloutStage({
    hub: kube.client,
    namespace: NAMESPACE,
    source: { repository: REPOSITORY, branch: "main" },
    inventory: () => inventory,
    modelAt: () => Promise.reject(new Error("no revert in these tests")),
    events: new EventRecorder({ client: kube.client, component: "test", log: silentLogger }),
    log: silentLogger,
    checkIntervalMs: 60_000,
    onDue: () => {},
    now: () => new Date(now),
  });
  stages.push(stage);
  let gated: GatedSteps | undefined;
  const rollout: SyncRollout = {
    open: (...args) => stage.open(...args),
    gate: async (...args) => {
      gated = await stage.gate(...args);
      return gated;
    },
    orderPrunes: (...args) => stage.orderPrunes(...args),
    finish: (...args) => stage.finish(...args),
  };
  const sync = async (files: FleetFile[], commit = COMMIT) => {
    const result = await syncInto(kube.client, {
      files,
      namespace: NAMESPACE,
      commit,
      repository: REPOSITORY,
      rollout,
    });
    return { result, gated: gated! };
  };
  const health = (name: string, healthy: boolean) => {
    const cr = kube.find("KnativeServing", name)!;
    cr.status = {
      observedGeneration: cr.metadata.generation ?? 1,
      conditions: [
        healthy
          ? { type: "DeploymentsAvailable", status: "True" }
          : {
              type: "DeploymentsAvailable",
              status: "False",
              reason: "NotReady",
              message: "Waiting on deployments: activator",
            },
        { type: "Ready", status: healthy ? "True" : "False" },
      ],
    };
  };
  return {
    kube,
    sync,
    health,
    later: (ms: number) => {
      now += ms;
    },
  };
}
const stages: RolloutStage[] = [];
const STATUS_OPTIONS = { fleet: "test", maxClusters: 10 };
afterEach(() => {
  for (const stage of stages.splice(0)) stage.stop();
});

const files = (version: string, policy: Record<string, unknown> = POLICY) =>
  fleetFiles(["c1", "c2"], policy, () => version);
const waitingReason = (result: SyncResult, name: string) =>
  result.resources.find((r) => r.name === name && r.action === "waiting")?.reason;
const event = (gated: GatedSteps, reason: string) =>
  gated.outcome?.events.find((e) => e.reason === reason)?.message;

/** 1.21 installed on both clusters, the canary first, each made healthy: the sync that completes the rollout. */
async function complete(hub: ReturnType<typeof rolloutHub>) {
  await hub.sync(files("1.21"));
  hub.health("c1-serving", true);
  await hub.sync(files("1.21"));
  hub.health("c2-serving", true);
  return hub.sync(files("1.21"));
}

interface Read {
  hub: ReturnType<typeof rolloutHub>;
  result: SyncResult;
  /** What the gate says of the rollout in this state: a held CR's reason, or the Event of its move. */
  gate: string | undefined;
}

interface Case {
  name: string;
  phase: string;
  /** How the sentence starts: the readers must agree on it, and it must be the right one. */
  starts: RegExp;
  /** `knative-fleet status` shows nothing: the hub holds no state to read. */
  noState?: true;
  read(): Promise<Read>;
}

const CASES: Case[] = [
  {
    name: "progressing",
    phase: "Progressing",
    starts: /^rollout of 0123456789ab in progress: wave canary is open$/,
    async read() {
      const hub = rolloutHub();
      const { result, gated } = await hub.sync(files("1.21"));
      return { hub, result, gate: event(gated, "RolloutWaveOpened") };
    },
  },
  {
    name: "waiting to open",
    phase: "Progressing",
    starts: /^rollout of 0123456789ab in progress: wave canary waits to open$/,
    async read() {
      const hub = rolloutHub();
      const closed = {
        ...POLICY,
        windows: [{ days: ["Sat"], start: "00:00", end: "23:59", timeZone: "UTC" }],
      };
      const { result } = await hub.sync(files("1.21", closed));
      return { hub, result, gate: waitingReason(result, "c1-serving") };
    },
  },
  {
    name: "waiting for approval",
    phase: "Progressing",
    starts: new RegExp(
      `^rollout of fedcba987654 waits for approval of wave canary: a KnativeRolloutApproval of commit ${NEXT} and wave canary on the tracked branch opens it \\(knative-fleet approve --wave canary --commit ${NEXT}\\)$`,
    ),
    async read() {
      const hub = rolloutHub();
      await complete(hub);
      // The CRs exist: the one the approval holds is marked with why on the hub.
      const approved = { ...POLICY, waves: [{ ...POLICY.waves[0], approval: "Required" }] };
      const { result } = await hub.sync(files("1.22", approved), NEXT);
      return { hub, result, gate: waitingReason(result, "c1-serving") };
    },
  },
  {
    name: "halted",
    phase: "Halted",
    starts:
      /^rollout of 0123456789ab halted in wave canary: KnativeServing knative-fleet\/c1-serving on fleet-system\/c1: DeploymentsAvailable=False/,
    async read() {
      const hub = rolloutHub();
      await hub.sync(files("1.21"));
      hub.health("c1-serving", false);
      hub.later(120_000);
      const { result } = await hub.sync(files("1.21"));
      return { hub, result, gate: waitingReason(result, "c2-serving") };
    },
  },
  {
    name: "complete",
    phase: "Complete",
    starts: /^rollout of 0123456789ab has reached every wave$/,
    async read() {
      const hub = rolloutHub();
      const { result, gated } = await complete(hub);
      return { hub, result, gate: event(gated, "RolloutCompleted") };
    },
  },
  {
    name: "refused",
    phase: "Refused",
    starts:
      /^the rollout state ConfigMap knative-fleet\/knative-fleet-rollout is refused: its HMAC does not match/,
    async read() {
      const hub = rolloutHub();
      await hub.sync(files("1.21"));
      const data = hub.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP)!.data as Record<string, string>;
      data.state = JSON.stringify({ ...JSON.parse(data.state!), phase: "Complete" });
      const { result } = await hub.sync(files("1.22"), NEXT);
      return { hub, result, gate: waitingReason(result, "c1-serving") };
    },
  },
  {
    name: "waiting",
    phase: "Waiting",
    starts: /^the ClusterProfile inventory is not read yet; changes wait for it$/,
    noState: true,
    async read() {
      const hub = rolloutHub(false);
      const { result } = await hub.sync(files("1.22"));
      return { hub, result, gate: waitingReason(result, "c1-serving") };
    },
  },
];

describe("the rollout's verdict, read by the status file, `knative-fleet status` and the gate", () => {
  it.each(CASES)("$name: $phase everywhere, in one sentence", async (c) => {
    const { hub, result, gate } = await c.read();
    const report = result.rollout!;
    const verdict = rolloutVerdict(report);
    expect(verdict.phase).toBe(c.phase);
    expect(verdict.message).toMatch(c.starts);
    // The status file.
    const [readme] = renderStatusSummary({ resources: hub.kube.objects(), sync: result });
    expect(readme!.content).toContain(`## Rollout\n\n${markdownText(verdict.message)}.`);
    // `knative-fleet status`, from the state ConfigMap on the hub.
    const onHub = rolloutOnHub(
      hub.kube.find("ConfigMap", ROLLOUT_STATE_CONFIGMAP),
      NAMESPACE,
      hub.kube.objects(),
    );
    if (c.noState) expect(onHub).toBeUndefined();
    else {
      expect(onHub?.phase).toBe(c.phase);
      expect(describeRollout(onHub!)).toBe(`Rollout: ${verdict.message}`);
    }
    // The gate.
    expect(gate).toBeDefined();
    expect(gate!.startsWith(verdict.message)).toBe(true);
    // The fleet's commit status on the Git host: the tally, then the same sentence (cut at the host's limit).
    const fleet = commitStatuses({ resources: hub.kube.objects(), sync: result }, STATUS_OPTIONS).at(-1);
    const sentence = fleet!.description.replace(/^\d+\/\d+ clusters healthy(; \d+ new CRs wait)?; /, "");
    expect(verdict.message.startsWith(sentence.replace(/…$/, ""))).toBe(true);
    expect(sentence.length).toBeGreaterThan(20);
  });

  it("the commit statuses name each cluster's wave: the canary's success while the remaining wave soaks", async () => {
    const hub = rolloutHub();
    await hub.sync(files("1.21"));
    hub.health("c1-serving", true);
    await hub.sync(files("1.21"));
    const { result } = await hub.sync(files("1.21"));
    expect(result.rollout?.clusterWaves).toEqual({
      "fleet-system/c1": "canary",
      "fleet-system/c2": "remaining",
    });
    const states = (r: SyncResult) =>
      commitStatuses({ resources: hub.kube.objects(), sync: r }, STATUS_OPTIONS).map(
        (s) => `${s.context} ${s.state}: ${s.description}`,
      );
    expect(states(result).slice(0, -1)).toEqual([
      "knative-fleet/test/fleet-system/c1 success: healthy: Serving",
      "knative-fleet/test/fleet-system/c2 pending: KnativeServing not ready: the hub controller has not reported on the current spec yet",
    ]);
    hub.health("c2-serving", true);
    const done = await hub.sync(files("1.21"));
    expect(states(done.result)).toEqual([
      "knative-fleet/test/fleet-system/c1 success: healthy: Serving",
      "knative-fleet/test/fleet-system/c2 success: healthy: Serving",
      expect.stringMatching(
        /^knative-fleet\/test success: 2\/2 clusters healthy; rollout of 0123456789ab has reached/,
      ),
    ]);
  });

  it("says so when the rollout is paused", () => {
    expect(rolloutVerdict({ phase: "Complete", commit: COMMIT, paused: true }).message).toBe(
      "rollout of 0123456789ab has reached every wave; the rollout is paused",
    );
  });
});
