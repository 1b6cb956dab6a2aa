import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import {
  ROLLOUT_PAUSED_ANNOTATION,
  ROLLOUT_START_OVER_ANNOTATION,
  ROLLOUT_WAITING_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../../src/kube/object.ts";
import {
  historyOf,
  peekRolloutState,
  ROLLOUT_STATE_CONFIGMAP,
  type RolloutState,
} from "../../../src/rollout/state.ts";
import { healthOf } from "../../../src/rollout/weigh.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { runCli } from "../../support/cli.ts";
import { crText } from "../../support/fleet-files.ts";
import { startFleetProcess } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// A fleet of four spokes under a rollout policy: canary (spoke-1 by name), early (spoke-2 by a ClusterProfile
// label), then the remaining spoke-3 and spoke-4 one at a time. knative-fleet runs as a real process, so the
// leader can be killed with SIGKILL mid-wave. Needs a sandbox with at least 4 spokes.

const sandbox = loadSandbox();
const REPO = "rollout-fleet";
const NS = "knative-fleet";
const SPOKES = ["spoke-1", "spoke-2", "spoke-3", "spoke-4"];
const RING_LABEL = "rollout-test/ring";
const SOAK_S = 5;
const TIME_LIMIT_S = 45;
/** A change no spoke can run: the activator's new pod asks for a node that does not exist, so it stays Pending. */
const BAD_WORKLOADS = [{ name: "activator", nodeSelector: { "rollout-test/no-such-node": "true" } }];

const policy = (extra: Record<string, unknown> = {}) =>
  stringify({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeRollout",
    metadata: { name: "knative" },
    spec: {
      waves: [
        { name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: "spoke-1" }] },
        {
          name: "early",
          clusterSelectorTerms: [{ labelSelector: { matchLabels: { [RING_LABEL]: "early" } } }],
        },
      ],
      soak: `${SOAK_S}s`,
      timeLimit: `${TIME_LIMIT_S}s`,
      ...extra,
    },
  });

/** Serving with Kourier (the sandbox's spokes serve no Istio CRDs), plus what a test changes. */
const crFiles = (
  version: string,
  spec: { config?: Record<string, Record<string, string>>; workloads?: unknown } = {},
) =>
  Object.fromEntries(
    SPOKES.map((spoke) => [
      `clusters/serving-${spoke}.yaml`,
      crText({
        name: `serving-${spoke}`,
        cluster: spoke,
        version,
        spec: {
          ...spec,
          ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
          config: {
            network: { "ingress-class": "kourier.ingress.networking.knative.dev" },
            ...spec.config,
          },
        },
      }),
    ]),
  );

describe("progressive rollout on four spokes", () => {
  let git: GitServer;
  let hub: KubeClient;
  let service: ServiceProcess;
  let scratch: string;
  const figures: Record<string, unknown> = {};

  const hubCr = (spoke: string) => hub.get(OPERATOR_API_VERSION, "KnativeServing", NS, `serving-${spoke}`);
  const specOf = (cr: KubeObject | undefined) =>
    (cr?.spec ?? {}) as {
      version?: string;
      workloads?: unknown;
      config?: Record<string, Record<string, string>>;
    };
  const state = async (): Promise<RolloutState | undefined> => {
    const configMap = await hub.get("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP);
    return peekRolloutState(configMap?.data as Record<string, unknown> | undefined);
  };
  /**
   * Waits for the rollout named by another commit than `previous` to reach `phase`. A rollout is named by the
   * last commit that changed a CR's content: the person's commit, even when a status commit of the bot landed
   * on it before the poll (GitSource.contentOrigin).
   */
  const rolloutOf = (previous: string | undefined, phase: RolloutState["phase"], timeoutMs = 60_000) =>
    waitUntil(
      `a new rollout ${phase}`,
      async () => {
        const current = await state();
        return current?.phase === phase && current.commit !== previous ? current : undefined;
      },
      timeoutMs,
    );
  const released = (current: RolloutState | undefined, spoke: string) =>
    current?.crs[`KnativeServing ${NS}/serving-${spoke}`]?.released;
  const healthyWith = async (spoke: string, holds: (cr: KubeObject) => boolean) => {
    const cr = await hubCr(spoke);
    return cr !== undefined && holds(cr) && healthOf(cr).healthy ? cr : undefined;
  };
  const push = (files: Record<string, string | null>, message: string) =>
    git.pushChange(REPO, { files, message });

  /** Deletes this test's hub CRs without waiting for a controller to clean their spokes. */
  async function removeHubCrs() {
    for (const cr of (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items) {
      await hub
        .mergePatch(OPERATOR_API_VERSION, "KnativeServing", NS, nameOf(cr), {
          metadata: { finalizers: null },
        })
        .catch(() => {});
      await hub.delete(OPERATOR_API_VERSION, "KnativeServing", NS, nameOf(cr)).catch(() => {});
    }
  }

  const startService = (name: string): ServiceProcess =>
    startFleetProcess({
      sandbox,
      scratch,
      name,
      service: { repositoryUrl: git.url(REPO), statusInterval: "2s" },
      config: { rollout: { checkInterval: "1s" }, logLevel: "info" },
    });

  /**
   * Watches the hub while a change rolls out: when each CR first holds the change (its spec, as the mirror
   * applied it) and when it is first healthy with it, in ms after the push.
   */
  async function followRollout(has: (cr: KubeObject) => boolean, started: number, timeoutMs: number) {
    const applied: Record<string, number> = {};
    const healthy: Record<string, number> = {};
    await waitUntil(
      "every spoke healthy with the change",
      async () => {
        for (const spoke of SPOKES) {
          const cr = await hubCr(spoke);
          if (cr === undefined || !has(cr)) continue;
          applied[spoke] ??= Date.now() - started;
          if (healthOf(cr).healthy) healthy[spoke] ??= Date.now() - started;
        }
        return Object.keys(healthy).length === SPOKES.length ? true : undefined;
      },
      timeoutMs,
    );
    return { applied, healthy };
  }

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 4").toBeGreaterThanOrEqual(4);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    // A clean slate: what an earlier, interrupted run left on the hub and the spokes.
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    for (const spoke of SPOKES) {
      const client = adminClient(sandbox.spokes.find((s) => s.name === spoke)!);
      await client.delete("v1", "Namespace", undefined, "knative-serving");
      await waitUntil(
        `${spoke} namespace knative-serving gone`,
        async () => ((await client.get("v1", "Namespace", undefined, "knative-serving")) ? undefined : true),
        120_000,
      );
    }
    await hub.mergePatch(
      "multicluster.x-k8s.io/v1alpha1",
      "ClusterProfile",
      CLUSTER_PROFILE_NAMESPACE,
      "spoke-2",
      { metadata: { labels: { [RING_LABEL]: "early" } } },
    );
    scratch = mkdtempSync(join(tmpdir(), "rollout-test-"));
    git = await startGitServer();
    await git.createRepo(REPO, crFiles("1.21"));
    service = startService("leader-1");
  }, 120_000);

  afterAll(async () => {
    await service?.stop();
    await removeHubCrs();
    await resetRolloutState(hub, NS);
    await hub
      .mergePatch("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", CLUSTER_PROFILE_NAMESPACE, "spoke-2", {
        metadata: { labels: { [RING_LABEL]: null } },
      })
      .catch(() => {});
    await git?.close();
    console.log("rollout figures:", JSON.stringify(figures, null, 1));
  });

  it("without a policy, a commit reaches every cluster at once (as before)", async () => {
    const started = Date.now();
    const { applied } = await followRollout((cr) => specOf(cr).version === "1.21", started, 300_000);
    figures.installWithoutPolicy = applied;
    // One sync creates all four: seen within a few polls of each other, not wave by wave.
    const times = Object.values(applied);
    expect(Math.max(...times) - Math.min(...times)).toBeLessThan(5_000);
    expect(await state()).toBeUndefined();
  });

  it("adding a policy changes no CR: the fleet as it is becomes the first baseline, wave by wave", async () => {
    const generations = await Promise.all(SPOKES.map(async (s) => (await hubCr(s))?.metadata.generation));
    await push({ "clusters/rollout.yaml": policy() }, "rollout policy");
    const complete = await waitUntil(
      "the rollout state",
      async () => {
        const current = await state();
        return current?.phase === "Complete" ? current : undefined;
      },
      120_000,
    );
    for (const spoke of SPOKES) {
      expect(complete.crs[`KnativeServing ${NS}/serving-${spoke}`]?.baseline, spoke).toBeDefined();
    }
    expect(await Promise.all(SPOKES.map(async (s) => (await hubCr(s))?.metadata.generation))).toEqual(
      generations,
    );
  });

  it("plan shows the waves a bump goes through, the labelled wave read from the hub", async () => {
    const base = (await git.headOf(REPO))!;
    await git.pushChange(REPO, {
      files: crFiles("1.22"),
      message: "Knative 1.22 (for review)",
      branch: "bump",
    });
    const { code, stdout } = await runCli(
      "plan",
      "--kodata",
      knativeReleasesDir(),
      "--repo",
      git.url(REPO),
      "--base",
      base,
      "--head",
      "bump",
      "--kubeconfig",
      sandbox.hub.adminKubeconfig,
      "--clusterprofile-provider-file",
      sandbox.providerFile,
    );
    expect(code, stdout).toBe(0);
    expect(stdout).toContain("## Rollout");
    expect(stdout).toContain("The merge changes CRs in 3 of 3 waves");
    for (const [wave, spoke] of [
      ["canary", "spoke-1"],
      ["early", "spoke-2"],
      ["remaining", "spoke-3"],
      ["remaining", "spoke-4"],
    ]) {
      expect(stdout).toContain(
        `| ${wave} | \`KnativeServing ${NS}/serving-${spoke}\` | ${CLUSTER_PROFILE_NAMESPACE}/${spoke} | update |`,
      );
    }
  });

  it("a version bump goes canary, early, then the rest one at a time, each after the last one's soak", async () => {
    const previous = (await state())?.commit;
    await push(crFiles("1.22"), "Knative 1.22");
    const started = Date.now();
    // While the canary is open, a later wave's CR keeps its spec and says what it waits for.
    const held = await waitUntil("spoke-4 marked as waiting", async () => {
      const cr = await hubCr("spoke-4");
      return cr?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION];
    });
    expect(held).toMatch(/^rollout of [0-9a-f]{12} waits for its wave, remaining$/);
    expect(specOf(await hubCr("spoke-4")).version).toBe("1.21");
    const { applied, healthy } = await followRollout((cr) => specOf(cr).version === "1.22", started, 600_000);
    figures.versionBump = { applied, healthy };
    const soakMs = SOAK_S * 1000;
    expect(applied["spoke-2"]!).toBeGreaterThanOrEqual(healthy["spoke-1"]! + soakMs - 1000);
    const [first, second] = ["spoke-3", "spoke-4"].sort((a, b) => applied[a]! - applied[b]!);
    expect(applied[first!]!).toBeGreaterThanOrEqual(healthy["spoke-2"]! + soakMs - 1000);
    // maxUnavailable 1: the second of the remaining wave goes once the first is healthy.
    expect(applied[second!]!).toBeGreaterThanOrEqual(healthy[first!]! - 1000);
    const done = await rolloutOf(previous, "Complete");
    figures.versionBumpWaves = historyOf(done);
    expect(historyOf(done).map((h) => h.wave)).toEqual(["canary", "early", "remaining"]);
    for (const spoke of SPOKES) {
      expect((await hubCr(spoke))?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION]).toBeUndefined();
    }
  });

  it("a change that never becomes healthy halts in the canary, a relabel meanwhile releases nothing", async () => {
    const previous = (await state())?.commit;
    await push(crFiles("1.22", { workloads: BAD_WORKLOADS }), "activator on a node that does not exist");
    const started = Date.now();
    // While the canary is failing, spoke-3 joins the early wave: an inventory change, no commit. It neither
    // skips the canary nor counts as a new release.
    await waitUntil("the canary has the bad change", async () =>
      specOf(await hubCr("spoke-1")).workloads ? true : undefined,
    );
    await hub.mergePatch(
      "multicluster.x-k8s.io/v1alpha1",
      "ClusterProfile",
      CLUSTER_PROFILE_NAMESPACE,
      "spoke-3",
      {
        metadata: { labels: { [RING_LABEL]: "early" } },
      },
    );
    const halted = await rolloutOf(previous, "Halted", (TIME_LIMIT_S + 60) * 1000);
    figures.haltedAfterMs = Date.now() - started;
    expect(halted.halt).toMatchObject({
      wave: "canary",
      resource: `KnativeServing ${NS}/serving-spoke-1`,
      cluster: `${CLUSTER_PROFILE_NAMESPACE}/spoke-1`,
    });
    expect(halted.halt?.reason).toMatch(/^DeploymentsAvailable=False/);
    figures.haltReason = halted.halt?.reason;
    for (const spoke of ["spoke-2", "spoke-3", "spoke-4"]) {
      // The pass stores the halt before it marks the CRs that wait: the annotation follows within that pass.
      const cr = await waitUntil(`${spoke} marked as halted`, async () => {
        const found = await hubCr(spoke);
        return /halted in wave canary/.test(found?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION] ?? "")
          ? found
          : undefined;
      });
      expect(specOf(cr).workloads, spoke).toBeUndefined();
      expect(healthOf(cr!).healthy, spoke).toBe(true);
    }
    expect(await service.metric("knative_fleet_rollout_halted")).toBe(1);
    const events = await hub.list("v1", "Event", { namespace: NS });
    // The status file in Git and `knative-fleet status` say the same.
    const readme = await waitUntil("the status file's Rollout section", async () => {
      const text = await git.readFile(REPO, "main", "status/README.md").catch(() => "");
      return text.includes("halted in wave canary") ? text : undefined;
    });
    expect(readme).toContain(
      `KnativeServing ${NS}/serving-spoke-1 on ${CLUSTER_PROFILE_NAMESPACE}/spoke-1: DeploymentsAvailable=False`,
    );
    const cli = await runCli("status", "--kubeconfig", sandbox.hub.adminKubeconfig, "-n", NS);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain(
      `Rollout: rollout of ${halted.commit.slice(0, 12)} halted in wave canary: KnativeServing ${NS}/serving-spoke-1 on ${CLUSTER_PROFILE_NAMESPACE}/spoke-1: DeploymentsAvailable=False`,
    );
    // Nothing went past the canary, the relabelled spoke-3 included, at any time.
    for (const spoke of ["spoke-2", "spoke-3", "spoke-4"])
      expect(released(await state(), spoke), spoke).toBeUndefined();
    await hub.mergePatch(
      "multicluster.x-k8s.io/v1alpha1",
      "ClusterProfile",
      CLUSTER_PROFILE_NAMESPACE,
      "spoke-3",
      {
        metadata: { labels: { [RING_LABEL]: null } },
      },
    );
    // This halt's Event (an earlier run's may still be listed: Events live for an hour).
    const haltEvent = events.items.find(
      (e) =>
        e.reason === "RolloutHalted" &&
        (e.involvedObject as { name: string }).name === "serving-spoke-1" &&
        String(e.message).startsWith(`rollout of ${halted.commit.slice(0, 12)} halted in wave canary`),
    );
    expect(haltEvent?.type).toBe("Warning");
  });

  it("halt-and-revert puts the canary back on the content of the last completed rollout", async () => {
    const lastGood = (await hubCr("spoke-2"))?.metadata.annotations?.["fleet.knative.dev/source-commit"];
    await push({ "clusters/rollout.yaml": policy({ onFailure: "HaltAndRevert" }) }, "revert on failure");
    const started = Date.now();
    const reverted = await waitUntil(
      "the canary healthy on its last good spec",
      () => healthyWith("spoke-1", (cr) => specOf(cr).workloads === undefined),
      180_000,
    );
    figures.revertHealthyMs = Date.now() - started;
    expect(reverted.metadata.annotations?.["fleet.knative.dev/source-commit"]).toBe(lastGood);
    expect((await state())?.phase).toBe("Halted");
  });

  it("a newer commit supersedes the halted one and goes through every wave", async () => {
    const fixed = { config: { autoscaler: { "stable-window": "70s" } } };
    const previous = (await state())?.commit;
    await push(crFiles("1.22", fixed), "fix: no node selector; longer stable window");
    const started = Date.now();
    const { applied, healthy } = await followRollout(
      (cr) =>
        specOf(cr).config?.autoscaler?.["stable-window"] === "70s" && specOf(cr).workloads === undefined,
      started,
      600_000,
    );
    figures.fixingCommit = { applied, healthy };
    expect(applied["spoke-1"]!).toBeLessThan(applied["spoke-2"]!);
    const done = await rolloutOf(previous, "Complete");
    expect(done.halt).toBeUndefined();
    await waitUntil("the halt metric cleared", async () =>
      (await service.metric("knative_fleet_rollout_halted")) === 0 ? true : undefined,
    );
  });

  it("a commit with a broken file keeps the revert target: the fix carrying a bad change halts and goes back", async () => {
    const fixed = { config: { autoscaler: { "stable-window": "70s" } } };
    const lastGood = (await hubCr("spoke-1"))?.metadata.annotations?.["fleet.knative.dev/source-commit"];
    // spoke-1's file fails validation for a while: its CR keeps its state, and its baseline stays.
    await push(
      { "clusters/serving-spoke-1.yaml": "kind: KnativeServing\nmetadata: {name: serving-spoke-1\n" },
      "oops",
    );
    await waitUntil("the broken file reported", async () => {
      const text = await git.readFile(REPO, "main", "status/README.md").catch(() => "");
      return text.includes("## Validation errors") && text.includes("serving-spoke-1.yaml")
        ? true
        : undefined;
    });
    const previous = (await state())?.commit;
    await push(crFiles("1.22", { ...fixed, workloads: BAD_WORKLOADS }), "fix the file, and a bad change");
    const halted = await rolloutOf(previous, "Halted", (TIME_LIMIT_S + 60) * 1000);
    expect(halted.halt?.resource).toBe(`KnativeServing ${NS}/serving-spoke-1`);
    const reverted = await waitUntil(
      "the canary back on the last completed rollout's content",
      () => healthyWith("spoke-1", (cr) => specOf(cr).workloads === undefined),
      180_000,
    );
    expect(reverted.metadata.annotations?.["fleet.knative.dev/source-commit"]).toBe(lastGood);
    const events = await hub.list("v1", "Event", { namespace: NS });
    expect(
      events.items.some(
        (e) =>
          e.reason === "RolloutReverted" && (e.involvedObject as { name: string }).name === "serving-spoke-1",
      ),
    ).toBe(true);
    for (const spoke of ["spoke-2", "spoke-3", "spoke-4"])
      expect(specOf(await hubCr(spoke)).workloads, spoke).toBeUndefined();
    // Back to what every spoke has: the halt is lifted, and nothing is left to roll out.
    await push(crFiles("1.22", fixed), "drop the bad change");
    await waitUntil(
      "rollout complete",
      async () => ((await state())?.phase === "Complete" ? true : undefined),
      120_000,
    );
  });

  it("outside its windows no wave opens; inside one, the change goes out", async () => {
    const change = { config: { autoscaler: { "stable-window": "75s" } } };
    const has = (cr: KubeObject) => specOf(cr).config?.autoscaler?.["stable-window"] === "75s";
    // A window on another day of the week than today, in UTC: closed now.
    const today = new Date().getUTCDay();
    const otherDay = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][(today + 3) % 7];
    const closed = [{ days: [otherDay], start: "00:00", end: "23:59", timeZone: "UTC" }];
    await push(
      { ...crFiles("1.22", change), "clusters/rollout.yaml": policy({ windows: closed }) },
      "change, window closed",
    );
    const note = await waitUntil(
      "the canary marked as outside the windows",
      async () => (await hubCr("spoke-1"))?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION],
    );
    expect(note).toMatch(/in progress: wave canary waits to open: outside the rollout windows$/);
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    for (const spoke of SPOKES) expect(has((await hubCr(spoke))!), spoke).toBe(false);
    // Midnight to noon, and noon past midnight: every minute of the day.
    const open = [
      { start: "00:00", end: "12:00", timeZone: "Etc/UTC" },
      { start: "12:00", end: "00:00", timeZone: "Etc/UTC" },
    ];
    await push({ "clusters/rollout.yaml": policy({ windows: open }) }, "window open all day");
    await followRollout(has, Date.now(), 300_000);
    await waitUntil("rollout complete", async () =>
      (await state())?.phase === "Complete" ? true : undefined,
    );
  });

  it("a pause in the file, then on the hub, holds every wave; resuming goes on", async () => {
    const change = { config: { autoscaler: { "stable-window": "80s" } } };
    const has = (cr: KubeObject) => specOf(cr).config?.autoscaler?.["stable-window"] === "80s";
    await push(
      { ...crFiles("1.22", change), "clusters/rollout.yaml": policy({ paused: true }) },
      "paused change",
    );
    const note = await waitUntil(
      "the canary marked as paused",
      async () => (await hubCr("spoke-1"))?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION],
    );
    expect(note).toMatch(/is paused$/);
    await hub.mergePatch("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP, {
      metadata: { annotations: { [ROLLOUT_PAUSED_ANNOTATION]: "true" } },
    });
    await push({ "clusters/rollout.yaml": policy() }, "unpause in Git; still paused on the hub");
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    for (const spoke of SPOKES) expect(has((await hubCr(spoke))!), spoke).toBe(false);
    await hub.mergePatch("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP, {
      metadata: { annotations: { [ROLLOUT_PAUSED_ANNOTATION]: null } },
    });
    const started = Date.now();

    // The leader dies (SIGKILL) once the canary has the change; a new process carries on from the hub.
    const canary = await waitUntil("the canary changed", async () => {
      const cr = await hubCr("spoke-1");
      return cr && has(cr) ? cr : undefined;
    });
    service.kill("SIGKILL");
    await service.exited;
    const canaryOpened = (await state())?.waves.canary?.opened;
    expect(canaryOpened).toBeDefined();
    figures.killedAtMs = Date.now() - started;
    service = startService("leader-2");
    const { applied, healthy } = await followRollout(has, started, 600_000);
    figures.afterLeaderKill = { applied, healthy };
    const after = await waitUntil("rollout complete", async () => {
      const current = await state();
      return current?.phase === "Complete" ? current : undefined;
    });
    // Nothing re-applied: the canary's spec was written once (its generation), and its wave kept its time.
    expect((await hubCr("spoke-1"))?.metadata.generation).toBe(canary.metadata.generation);
    expect(after?.waves.canary?.opened).toBe(canaryOpened);
    expect(historyOf(after!).map((h) => h.wave)).toEqual(["canary", "early", "remaining"]);
    figures.afterLeaderKillWaves = historyOf(after!);
  });

  it("a rollout state written by anyone but knative-fleet is refused: every change waits, and says why", async () => {
    const has = (cr: KubeObject) => specOf(cr).config?.autoscaler?.["stable-window"] === "85s";
    // Someone who may write ConfigMaps in the namespace backdates every CR's health, to skip the soaks.
    const configMap = (await hub.get("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP))!;
    const forged = JSON.parse((configMap.data as Record<string, string>).state!) as RolloutState;
    for (const cr of Object.values(forged.crs)) if (cr.health) cr.health.since = "2000-01-01T00:00:00.000Z";
    await hub.mergePatch("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP, {
      data: { state: JSON.stringify(forged) },
    });
    await push(
      crFiles("1.22", { config: { autoscaler: { "stable-window": "85s" } } }),
      "a change during the forgery",
    );
    const note = await waitUntil(
      "the canary marked as waiting for the refused state",
      async () => (await hubCr("spoke-1"))?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION],
    );
    expect(note).toContain("is refused: its HMAC does not match");
    const refused = await waitUntil("a RolloutStateRefused Event", async () =>
      (await hub.list("v1", "Event", { namespace: NS })).items.find(
        (e) => e.reason === "RolloutStateRefused",
      ),
    );
    expect(refused.type).toBe("Warning");
    const cli = await runCli("status", "--kubeconfig", sandbox.hub.adminKubeconfig, "-n", NS);
    expect(cli.code).toBe(1);
    expect(cli.stdout).toContain(
      `Rollout: the rollout state ConfigMap ${NS}/knative-fleet-rollout is refused: its HMAC does not match`,
    );
    for (const spoke of SPOKES) expect(has((await hubCr(spoke))!), spoke).toBe(false);
    // Deleting it is no way out: the key Secret records that a state was stored, so every change still waits.
    await hub.delete("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP);
    const missing = await waitUntil("the missing state refused", async () =>
      (await hub.list("v1", "Event", { namespace: NS })).items.find(
        (e) => e.reason === "RolloutStateRefused" && /it is missing/.test(String(e.message)),
      ),
    );
    expect(missing.message).toContain(ROLLOUT_START_OVER_ANNOTATION);
    for (const spoke of SPOKES) expect(has((await hubCr(spoke))!), spoke).toBe(false);
    // A person starts it over: the rollout state starts again, canary first.
    await hub.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: ROLLOUT_STATE_CONFIGMAP,
        namespace: NS,
        annotations: { [ROLLOUT_START_OVER_ANNOTATION]: "the forgery is cleared up" },
      },
    });
    const started = Date.now();
    const { applied } = await followRollout(has, started, 600_000);
    figures.afterForgery = applied;
    expect(applied["spoke-1"]!).toBeLessThan(applied["spoke-2"]!);
  });

  it("deletions follow the waves in reverse: the remaining wave's CR is gone before the canary's is deleted", async () => {
    await push(
      { "clusters/serving-spoke-1.yaml": null, "clusters/serving-spoke-4.yaml": null },
      "spoke-1 and spoke-4 leave the fleet",
    );
    const started = Date.now();
    const seen: Record<string, number> = {};
    await waitUntil(
      "both CRs deleted",
      async () => {
        for (const spoke of ["spoke-1", "spoke-4"]) {
          const cr = await hubCr(spoke);
          if (cr?.metadata.deletionTimestamp) seen[`${spoke} deleting`] ??= Date.now() - started;
          if (cr === undefined) seen[`${spoke} gone`] ??= Date.now() - started;
        }
        return seen["spoke-1 gone"] !== undefined && seen["spoke-4 gone"] !== undefined ? true : undefined;
      },
      300_000,
    );
    figures.deletions = seen;
    // spoke-1's deletion was only seen after spoke-4's CR had left the hub (its spoke cleaned).
    expect(seen["spoke-4 gone"]!).toBeLessThanOrEqual(seen["spoke-1 deleting"] ?? seen["spoke-1 gone"]!);
    expect(await hubCr("spoke-2")).toBeDefined();
  });
});
