import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type Gitea, startGitea } from "../../sandbox/gitea.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { approvalText } from "../../support/fleet-files.ts";
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
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";

// The change lifecycle in Git, end to end on the sandbox with a real Gitea as the fleet's Git host: four
// spokes, a canary wave and a `production` wave that needs an approval. On the merged commit a person sees
// a pending status per cluster, success on the canary, "waits for approval" on the production clusters
// until an approval, merged as a pull request, lands; then a cluster outside its own maintenance window
// waits while another in its window proceeds, and goes once its window opens. A bad change fails on the
// canary with the halt's reason, told once to a loopback webhook receiver. Every sync comes from Gitea's
// push webhook; what the spokes run is read from the spokes.

const sandbox = loadSandbox();
const NS = "approvals";
const FLEET = "sandbox";
const SPOKES = ["spoke-1", "spoke-2", "spoke-3", "spoke-4"] as const;
const WINDOW_LABEL = "approval-test/window";
const TIME_LIMIT_S = 30;
const BAD_WORKLOADS = [{ name: "activator", nodeSelector: { "approval-test/no-such-node": "true" } }];

/** `HH:MM` in UTC, `hours` from now. */
const utcIn = (hours: number): string => {
  const at = new Date(Date.now() + hours * 3_600_000);
  return `${String(at.getUTCHours()).padStart(2, "0")}:${String(at.getUTCMinutes()).padStart(2, "0")}`;
};
/** A window open from an hour ago for three hours, or one that opens in three hours. */
const windowNow = (open: boolean) =>
  open ? { start: utcIn(-1), end: utcIn(3) } : { start: utcIn(3), end: utcIn(4) };

/** The policy: the canary, then production; with `lifecycle`, production needs an approval and windows apply. */
const policy = (lifecycle?: { spoke4Open: boolean }) =>
  stringify({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeRollout",
    metadata: { name: "knative" },
    spec: {
      waves: [
        { name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: SPOKES[0] }] },
        {
          name: "production",
          clusterProfiles: SPOKES.slice(1).map((name) => ({ namespace: CLUSTER_PROFILE_NAMESPACE, name })),
          maxUnavailable: 3,
          ...(lifecycle && { approval: "Required" }),
        },
      ],
      soak: "3s",
      timeLimit: `${TIME_LIMIT_S}s`,
      ...(lifecycle && {
        clusterWindows: [
          {
            name: "early",
            clusterSelectorTerms: [{ labelSelector: { matchLabels: { [WINDOW_LABEL]: "early" } } }],
            windows: [windowNow(true)],
          },
          {
            name: "late",
            clusterSelectorTerms: [{ labelSelector: { matchLabels: { [WINDOW_LABEL]: "late" } } }],
            windows: [windowNow(lifecycle.spoke4Open)],
          },
        ],
      }),
    },
  });

const crFiles = (spec: ServingSpec = {}) => servingFiles(SPOKES, NS, spec);

describe("approvals held in Git and per-cluster windows, on a real Gitea", () => {
  let gitea: Gitea;
  let hub: KubeClient;
  let service: ServiceProcess;
  let fleet: Awaited<ReturnType<typeof giteaFleet>>;
  const figures: Record<string, unknown> = {};
  const context = (spoke?: string) => fleet.context(spoke && `${CLUSTER_PROFILE_NAMESPACE}/${spoke}`);
  const every = (state: string) =>
    Object.fromEntries([context(), ...SPOKES.map((s) => context(s))].map((c) => [c, state]));
  const stableWindow = async (spoke: string) => {
    const client = adminClient(sandbox.spokes.find((s) => s.name === spoke)!);
    const cm = await client.get("v1", "ConfigMap", "knative-serving", "config-autoscaler");
    return (cm?.data as Record<string, string> | undefined)?.["stable-window"];
  };
  const label = (spoke: string, value: string | null) =>
    hub.mergePatch("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", CLUSTER_PROFILE_NAMESPACE, spoke, {
      metadata: { labels: { [WINDOW_LABEL]: value } },
    });
  const removeHubCrs = async () =>
    forceDeleteCrs(hub, (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items);

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 4").toBeGreaterThanOrEqual(4);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    await cleanSpokes(sandbox, SPOKES);
    await label(SPOKES[2], "early");
    await label(SPOKES[3], "late");
    gitea = await startGitea();
    fleet = await giteaFleet({ sandbox, gitea, namespace: NS, fleet: FLEET, unhealthyAfter: "20s" });
    service = fleet.start("approvals");
  }, 600_000);

  afterAll(async () => {
    await service?.stop();
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    for (const spoke of SPOKES) await label(spoke, null).catch(() => {});
    await gitea?.stop();
    await fleet?.close();
    console.log("approval figures:", JSON.stringify(figures));
  });

  it("installs Serving on the four spokes, canary first", async () => {
    const first = await fleet.push(
      { "clusters/rollout.yaml": policy(), ...crFiles() },
      "Serving on four spokes",
    );
    const started = Date.now();
    await fleet.waitStates(first, every("success"), "every status of the install success", 480_000);
    figures.installMs = Date.now() - started;
    figures.installPosts = await postedStatuses(service);
  }, 540_000);

  it("the production wave waits for an approval of the change's commit, merged as a pull request", async () => {
    // The policy now asks for an approval and has windows: no CR changes, so no rollout starts.
    await fleet.push({ "clusters/rollout.yaml": policy({ spoke4Open: false }) }, "production needs approval");
    const before = await postedStatuses(service);
    const change = await fleet.push(
      crFiles({ config: { autoscaler: { "stable-window": "70s" } } }),
      "stable window 70s",
    );
    const pushed = Date.now();
    const waiting = await fleet.waitStates(
      change,
      { [context(SPOKES[0])]: "success", [context(SPOKES[1])]: "pending" },
      "the canary success, production pending",
    );
    figures.canaryMs = Date.now() - pushed;
    const approvalWait = `rollout of ${change.slice(0, 12)} waits for approval of wave production`;
    // The fleet's status is posted after its clusters': waiting for it waits for the whole snapshot.
    await waitUntil("production's and the fleet's statuses say they wait for an approval", async () => {
      const latest = await fleet.latest(change);
      const production = SPOKES.slice(1).every((s) =>
        latest.get(context(s))?.description.startsWith(approvalWait),
      );
      return production && latest.get(context())?.description.includes(approvalWait) ? true : undefined;
    });
    expect(waiting.get(context(SPOKES[0]))?.description).toBe("healthy: Serving 1.23.0");
    // Every cluster's status was pending first.
    const log = await fleet.history(change);
    for (const spoke of SPOKES) {
      expect(log.find((s) => s.context === context(spoke))?.status, spoke).toBe("pending");
    }
    // Nothing past the canary changed, on the spokes themselves; the wait told once.
    expect(await stableWindow(SPOKES[0])).toBe("70s");
    for (const spoke of SPOKES.slice(1)) expect(await stableWindow(spoke), spoke).not.toBe("70s");
    await waitUntil("the wait told", async () =>
      fleet.toldAbout(change).includes("WaitingForApproval production") ? true : undefined,
    );
    // An approval of another commit opens nothing (once its push was synced: a sync from Git).
    const gitSyncs = () => service.metric("knative_fleet_sync_duration_seconds_count", { trigger: "git" });
    const syncsBefore = (await gitSyncs()) ?? 0;
    await fleet.push(
      { "clusters/approvals/production-stale.yaml": approvalText("0".repeat(40), "production") },
      "an approval of another commit",
    );
    await waitUntil("the stale approval synced", async () =>
      ((await gitSyncs()) ?? 0) > syncsBefore ? true : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    for (const spoke of SPOKES.slice(1)) expect(await stableWindow(spoke), spoke).not.toBe("70s");

    // The approval, in a pull request a reviewer merges.
    const { owner, name } = fleet.repo;
    await fleet.push(
      {
        [`clusters/approvals/production-${change.slice(0, 12)}.yaml`]: approvalText(change, "production", {
          approvedBy: "reviewer",
          reason: "canary healthy",
        }),
      },
      "approve production",
      "approve-production",
    );
    const pull = await gitea.api<{ number: number }>("POST", `/repos/${owner}/${name}/pulls`, {
      head: "approve-production",
      base: "main",
      title: "Approve production for the stable window change",
    });
    const approvedAt = Date.now();
    await gitea.api("POST", `/repos/${owner}/${name}/pulls/${pull.number}/merge`, { Do: "merge" });
    // spoke-2 and spoke-3 go and are healthy; spoke-4, outside its own window, waits in its wave, which is
    // therefore not done: their statuses stay pending, saying so. The service posts one snapshot cluster by
    // cluster, so the test waits for all three rather than reading spoke-4 the moment the others are in.
    const outsideWindow = /outside its maintenance windows late \(daily \d\d:\d\d-\d\d:\d\d UTC\)$/;
    const opened = await waitUntil("production in its window healthy, spoke-4 told it waits", async () => {
      const latest = await fleet.latest(change);
      const proceeded = SPOKES.slice(1, 3).every(
        (s) => latest.get(context(s))?.description === "healthy; wave production not done yet",
      );
      return proceeded && outsideWindow.test(latest.get(context(SPOKES[3]))?.description ?? "")
        ? latest
        : undefined;
    });
    figures.approvalToProductionMs = Date.now() - approvedAt;
    expect(await stableWindow(SPOKES[1])).toBe("70s");
    expect(await stableWindow(SPOKES[2])).toBe("70s");
    expect(opened.get(context(SPOKES[3]))?.status).toBe("pending");
    expect(await stableWindow(SPOKES[3])).not.toBe("70s");
    expect(opened.get(context())?.status).toBe("pending");
    // Its window opens (a policy change, no CR change: the rollout keeps its commit): spoke-4 goes.
    await fleet.push({ "clusters/rollout.yaml": policy({ spoke4Open: true }) }, "spoke-4's window now");
    await fleet.waitStates(change, every("success"), "every status of the change success");
    expect(await stableWindow(SPOKES[3])).toBe("70s");
    expect(await rolloutCommit(hub, NS)).toBe(change);
    figures.changePosts = (await postedStatuses(service)) - before;
    figures.changeStatuses = (await fleet.history(change)).length;
    await waitUntil("the completion told", async () =>
      fleet.toldAbout(change).includes("RolloutCompleted") ? true : undefined,
    );
    expect(fleet.toldAbout(change)).toEqual([
      "RolloutStarted",
      "WaveOpened canary",
      "WaitingForApproval production",
      "WaveOpened production",
      "RolloutCompleted",
    ]);
  }, 540_000);

  it("a bad change fails on the canary with the halt's reason, told once", async () => {
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
    for (const spoke of SPOKES.slice(1)) {
      expect(halted.get(context(spoke))?.status, spoke).toBe("pending");
    }
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(fleet.toldAbout(bad)).toEqual(["RolloutStarted", "WaveOpened canary", "RolloutHalted canary"]);
    expect(fleet.receiver.told.find((t) => t.event === "RolloutHalted")?.text).toMatch(
      /DeploymentsAvailable=False/,
    );
    expect(fleet.receiver.told.every((t) => t.signed)).toBe(true);
    figures.notifications = fleet.receiver.told.length;
    figures.totalPosts = await postedStatuses(service);
  }, 300_000);
});
