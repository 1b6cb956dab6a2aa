import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type Gitea, startGitea } from "../../sandbox/gitea.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import {
  giteaFleet,
  postedStatuses,
  rolloutCommit,
  type ServingSpec,
  servingFiles,
} from "../../support/gitea-fleet.ts";
import { forceDeleteCrs } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { waitUntil } from "../../support/wait.ts";

// Commit statuses on a real forge: the fleet repository lives on the sandbox's Gitea (built from its Go
// module), knative-fleet runs as a real process that reads it with a token and posts statuses through
// Gitea's API. Two spokes the other files leave alone (spoke-5 the canary, spoke-6 the remaining wave).
// What a person sees on the merged commit: pending per cluster, success once healthy and soaked, failure
// on the canary with the halt's reason, and the pending status of a halted commit superseded by the fix.
// Every sync after the first comes from Gitea's push webhook.

const sandbox = loadSandbox();
const NS = "commit-status";
const FLEET = "sandbox";
const SPOKES = ["spoke-5", "spoke-6"] as const;
const TIME_LIMIT_S = 30;
const BAD_WORKLOADS = [{ name: "activator", nodeSelector: { "commit-status-test/no-such-node": "true" } }];

const policy = stringify({
  apiVersion: "fleet.knative.dev/v1alpha1",
  kind: "KnativeRollout",
  metadata: { name: "knative" },
  spec: {
    waves: [{ name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: SPOKES[0] }] }],
    soak: "3s",
    timeLimit: `${TIME_LIMIT_S}s`,
  },
});

const crFiles = (spec: ServingSpec = {}) => servingFiles(SPOKES, NS, spec);

describe("commit statuses on a real Gitea", () => {
  let gitea: Gitea;
  let hub: KubeClient;
  let service: ServiceProcess;
  let fleet: Awaited<ReturnType<typeof giteaFleet>>;
  const figures: Record<string, unknown> = {};
  const context = (spoke?: string) => fleet.context(spoke && `${CLUSTER_PROFILE_NAMESPACE}/${spoke}`);
  const posted = () => postedStatuses(service);

  const removeHubCrs = async () =>
    forceDeleteCrs(hub, (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items);

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 6").toBeGreaterThanOrEqual(6);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    gitea = await startGitea();
    fleet = await giteaFleet({ sandbox, gitea, namespace: NS, fleet: FLEET, unhealthyAfter: "20s" });
    service = fleet.start("commit-status");
  }, 600_000);

  afterAll(async () => {
    await service?.stop();
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    await gitea?.stop();
    await fleet?.close();
    console.log("commit status figures:", JSON.stringify(figures));
  });

  it("a first rollout: success per cluster and for the fleet on the commit, once healthy and soaked", async () => {
    const first = await fleet.push(
      { "clusters/rollout.yaml": policy, ...crFiles() },
      "Serving 1.23 on two spokes",
    );
    const started = Date.now();
    const done = await fleet.waitStates(
      first,
      { [context()]: "success", [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "success" },
      "every status of the first commit success",
      420_000,
    );
    figures.firstRolloutMs = Date.now() - started;
    expect(done.get(context())?.description).toMatch(
      /^2\/2 clusters healthy; rollout of [0-9a-f]{12} has reached every wave/,
    );
    expect(done.get(context(SPOKES[0]))?.description).toBe("healthy: Serving 1.23.0");
    // The statuses name the commit the rollout started at, not the bot's status commits after it.
    expect(await rolloutCommit(hub, NS)).toBe(first);
    figures.firstRolloutPosts = await posted();
  }, 480_000);

  it("a change: the remaining wave pends with the gate's reason until the canary soaked, then success", async () => {
    const before = await posted();
    const change = await fleet.push(
      crFiles({ config: { autoscaler: { "stable-window": "70s" } } }),
      "stable window 70s",
    );
    // Only Gitea's webhook brings the sync (the poll is yearly): the rollout takes the change's name at once.
    const pushed = Date.now();
    await waitUntil(
      "the rollout named by the change",
      async () => ((await rolloutCommit(hub, NS)) === change ? true : undefined),
      30_000,
    );
    figures.webhookToRolloutMs = Date.now() - pushed;
    const done = await fleet.waitStates(
      change,
      { [context()]: "success", [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "success" },
      "every status of the change success",
    );
    const log = await fleet.history(change);
    const second = log.filter((s) => s.context === context(SPOKES[1]));
    // spoke-6 waited for the canary: pending with the gate's words (its wave, the rollout's name), success last.
    expect(second[0]).toMatchObject({ status: "pending" });
    expect(second.map((s) => `${s.status}: ${s.description}`)).toContainEqual(
      `pending: rollout of ${change.slice(0, 12)} waits for its wave, remaining`,
    );
    expect(second.at(-1)?.status).toBe("success");
    // The canary's success came before the remaining wave's.
    const canarySuccess = log.find((s) => s.context === context(SPOKES[0]) && s.status === "success")!;
    expect(canarySuccess.id).toBeLessThan(second.at(-1)!.id);
    expect(done.get(context())?.description).toMatch(/^2\/2 clusters healthy/);
    figures.changePosts = (await posted()) - before;
    // People were told each step of it once, signed.
    await waitUntil("the completion told", async () =>
      fleet.toldAbout(change).includes("RolloutCompleted") ? true : undefined,
    );
    expect(fleet.toldAbout(change)).toEqual([
      "RolloutStarted",
      "WaveOpened canary",
      "WaveOpened remaining",
      "RolloutCompleted",
    ]);
    expect(fleet.receiver.told.every((t) => t.signed)).toBe(true);
    // Idle: nothing changes, nothing is posted (three rounds of the 1 s interval and more).
    const idle = await posted();
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await posted()).toBe(idle);
    // A new leader reads what the last one posted: it posts nothing again, and tells nobody anything.
    const [statusesBefore, toldBefore] = [(await fleet.history(change)).length, fleet.receiver.told.length];
    await service.stop();
    service = fleet.start("commit-status-next");
    await waitUntil("the new process leading", async () => {
      const text = await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`).then(
        (r) => r.text(),
        () => "",
      );
      return /^knative_fleet_leader 1$/m.test(text) ? true : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await posted()).toBe(0);
    expect((await fleet.history(change)).length).toBe(statusesBefore);
    expect(fleet.receiver.told.length).toBe(toldBefore);
  }, 300_000);

  it("a bad change fails on the canary with the halt's reason; the fix supersedes what the halt held", async () => {
    const bad = await fleet.push(
      crFiles({ workloads: BAD_WORKLOADS }),
      "activator on a node that does not exist",
    );
    const started = Date.now();
    const halted = await fleet.waitStates(
      bad,
      { [context(SPOKES[0])]: "failure", [context()]: "failure" },
      "the canary's status a failure",
      (TIME_LIMIT_S + 120) * 1000,
    );
    figures.failureAfterMs = Date.now() - started;
    expect(halted.get(context(SPOKES[0]))?.description).toMatch(
      new RegExp(
        `^halted in wave canary: KnativeServing ${NS}/serving-${SPOKES[0]}: DeploymentsAvailable=False`,
      ),
    );
    expect(halted.get(context(SPOKES[1]))).toMatchObject({
      status: "pending",
      description: "held: the rollout halted in wave canary",
    });
    const fix = await fleet.push(crFiles({ config: { autoscaler: { "stable-window": "80s" } } }), "the fix");
    await fleet.waitStates(
      bad,
      { [context(SPOKES[1])]: "warning" },
      "the halted commit's pending status superseded",
      120_000,
    );
    const superseded = (await fleet.latest(bad)).get(context(SPOKES[1]));
    expect(superseded?.description).toBe(`superseded by ${fix.slice(0, 12)}`);
    // The failure stays: it is what happened to that commit.
    expect((await fleet.latest(bad)).get(context(SPOKES[0]))?.status).toBe("failure");
    await fleet.waitStates(
      fix,
      { [context()]: "success", [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "success" },
      "every status of the fix success",
    );
    figures.totalPosts = await posted();
    // The halt told once with its reason; the canary, unhealthy past 20 s, told once, and its recovery.
    expect(fleet.toldAbout(bad)).toEqual(["RolloutStarted", "WaveOpened canary", "RolloutHalted canary"]);
    expect(fleet.receiver.told.find((t) => t.event === "RolloutHalted")?.text).toMatch(
      /DeploymentsAvailable=False/,
    );
    await waitUntil("the fix's completion told", async () =>
      fleet.toldAbout(fix).includes("RolloutCompleted") ? true : undefined,
    );
    const about = (cluster: string) =>
      fleet.receiver.told
        .filter((t) => t.cluster === cluster && t.event.startsWith("Cluster"))
        .map((t) => t.event);
    expect(about(`${CLUSTER_PROFILE_NAMESPACE}/${SPOKES[0]}`)).toEqual([
      "ClusterUnhealthy",
      "ClusterRecovered",
    ]);
    expect(about(`${CLUSTER_PROFILE_NAMESPACE}/${SPOKES[1]}`)).toEqual([]);
    figures.notifications = fleet.receiver.told.length;
  }, 420_000);
});
