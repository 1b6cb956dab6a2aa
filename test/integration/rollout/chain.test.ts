import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { peekRolloutState, ROLLOUT_STATE_CONFIGMAP, type RolloutState } from "../../../src/rollout/state.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { startFleetProcess } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { dropHubCrs } from "../../support/serving-fleet.ts";
import { waitUntil } from "../../support/wait.ts";

// An upgrade chain on the sandbox: a placement at Serving 1.20 on four spokes, set to 1.23 in one commit,
// walks 1.21 and 1.22 on every spoke, each step canary first and completed on all four before the next
// opens. What each spoke ran, and when, is read from the spokes themselves (the controller Deployment's
// version label), not from the hub CRs the reconciler writes.

const sandbox = loadSandbox();
const REPO = "chain-fleet";
const NS = "knative-fleet";
const SPOKES = ["spoke-1", "spoke-2", "spoke-3", "spoke-4"];
const CHAIN_LABEL = "chain-test/member";

const policy = stringify({
  apiVersion: "fleet.knative.dev/v1alpha1",
  kind: "KnativeRollout",
  metadata: { name: "knative" },
  spec: {
    waves: [{ name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: "spoke-1" }] }],
    maxUnavailable: 3,
    soak: "2s",
    timeLimit: "5m",
  },
});

const placement = (version: string) =>
  stringify({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeServingPlacement",
    metadata: { name: "serving", namespace: NS },
    spec: {
      clusterSelectorTerms: [{ labelSelector: { matchLabels: { [CHAIN_LABEL]: "member" } } }],
      template: {
        spec: {
          version,
          ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
          config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" } },
        },
      },
    },
  });

/** One spoke's history: each Knative minor its controller Deployment ran, and when it first did. */
type History = { minor: string; at: number }[];

describe("an upgrade chain on four spokes", () => {
  let git: GitServer;
  let hub: KubeClient;
  let service: ServiceProcess;
  const histories = new Map<string, History>(SPOKES.map((spoke) => [spoke, []]));
  let watching = true;
  let watcher: Promise<void> = Promise.resolve();
  const figures: Record<string, unknown> = {};

  const state = async (): Promise<RolloutState | undefined> => {
    const configMap = await hub.get("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP);
    return peekRolloutState(configMap?.data as Record<string, unknown> | undefined);
  };
  const installed = async (spoke: string) => {
    const cr = await hub.get(OPERATOR_API_VERSION, "KnativeServing", NS, `serving-${spoke}`);
    return (cr?.status as { version?: string } | undefined)?.version;
  };

  /** Reads each spoke's controller Deployment every 300 ms and records every new minor it runs. */
  async function watchSpokes() {
    const clients = SPOKES.map((spoke) => adminClient(sandbox.spokes.find((s) => s.name === spoke)!));
    while (watching) {
      await Promise.all(
        SPOKES.map(async (spoke, index) => {
          const deployment = await clients[index]!.get(
            "apps/v1",
            "Deployment",
            "knative-serving",
            "controller",
          ).catch(() => undefined);
          const version = deployment?.metadata.labels?.["app.kubernetes.io/version"];
          const minor = version?.split(".").slice(0, 2).join(".");
          const history = histories.get(spoke)!;
          if (minor && history.at(-1)?.minor !== minor) history.push({ minor, at: Date.now() });
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 4").toBeGreaterThanOrEqual(4);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await dropHubCrs(hub);
    await resetRolloutState(hub, NS);
    for (const spoke of SPOKES) {
      const client = adminClient(sandbox.spokes.find((s) => s.name === spoke)!);
      await client.delete("v1", "Namespace", undefined, "knative-serving");
      await waitUntil(
        `${spoke} namespace knative-serving gone`,
        async () => ((await client.get("v1", "Namespace", undefined, "knative-serving")) ? undefined : true),
        120_000,
      );
      await hub.mergePatch(
        "multicluster.x-k8s.io/v1alpha1",
        "ClusterProfile",
        CLUSTER_PROFILE_NAMESPACE,
        spoke,
        {
          metadata: { labels: { [CHAIN_LABEL]: "member" } },
        },
      );
    }
    git = await startGitServer();
    await git.createRepo(REPO, { "clusters/serving-placement.yaml": placement("1.20"), "clusters/rollout.yaml": policy });
    service = startFleetProcess({
      sandbox,
      scratch: mkdtempSync(join(tmpdir(), "chain-test-")),
      name: "chain-leader",
      service: { repositoryUrl: git.url(REPO), statusInterval: "2s" },
      config: { rollout: { checkInterval: "1s" }, logLevel: "info" },
    });
    watcher = watchSpokes();
  }, 180_000);

  afterAll(async () => {
    watching = false;
    await watcher;
    await service?.stop();
    await dropHubCrs(hub);
    await resetRolloutState(hub, NS);
    for (const spoke of SPOKES) {
      await hub
        .mergePatch("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", CLUSTER_PROFILE_NAMESPACE, spoke, {
          metadata: { labels: { [CHAIN_LABEL]: null } },
        })
        .catch(() => {});
    }
    await git?.close();
    console.log("upgrade chain figures:", JSON.stringify(figures, null, 1));
  });

  it("installs 1.20 on the four spokes, canary first, and completes", async () => {
    const started = Date.now();
    await waitUntil(
      "1.20 installed and the rollout complete",
      async () => {
        const versions = await Promise.all(SPOKES.map(installed));
        const done = versions.every((v) => v?.startsWith("1.20.")) && (await state())?.phase === "Complete";
        return done ? true : undefined;
      },
      300_000,
    );
    figures.install120Ms = Date.now() - started;
  });

  it("set to 1.23 in one commit: every spoke passes 1.21 and 1.22, each step canary first and done everywhere before the next", async () => {
    const started = Date.now();
    await git.pushChange(REPO, {
      files: { "clusters/serving-placement.yaml": placement("1.23") },
      message: "Knative 1.23",
    });
    await waitUntil(
      "every spoke on 1.23.0, the chain done",
      async () => {
        const versions = await Promise.all(SPOKES.map(installed));
        const current = await state();
        return versions.every((v) => v === "1.23.0") && current?.phase === "Complete" && !current.upgrades
          ? true
          : undefined;
      },
      900_000,
    );
    figures.chain120to123Ms = Date.now() - started;
    figures.histories = Object.fromEntries(
      [...histories].map(([spoke, history]) => [spoke, history.map((h) => `${h.minor}@${h.at - started}`)]),
    );
    // What the spokes ran, in order: no minor skipped.
    for (const spoke of SPOKES) {
      expect(
        histories.get(spoke)!.map((h) => h.minor),
        spoke,
      ).toEqual(["1.20", "1.21", "1.22", "1.23"]);
    }
    // Each step: the canary first, and no spoke on step k+1 before every spoke ran step k.
    const firstAt = (spoke: string, minor: string) =>
      histories.get(spoke)!.find((h) => h.minor === minor)!.at;
    for (const [previous, step] of [
      ["1.21", "1.22"],
      ["1.22", "1.23"],
    ] as const) {
      const opened = Math.min(...SPOKES.map((spoke) => firstAt(spoke, step)));
      expect(firstAt("spoke-1", step), `the canary opens ${step}`).toBe(opened);
      const lastOfPrevious = Math.max(...SPOKES.map((spoke) => firstAt(spoke, previous)));
      expect(opened, `${step} opens after every spoke ran ${previous}`).toBeGreaterThan(lastOfPrevious);
    }
    for (const step of ["1.21", "1.22", "1.23"]) {
      const others = SPOKES.slice(1).map((spoke) => firstAt(spoke, step));
      expect(firstAt("spoke-1", step), `the canary takes ${step} before the others`).toBeLessThan(
        Math.min(...others),
      );
    }
  });
});
