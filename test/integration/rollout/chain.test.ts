import { mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { ROLLOUT_WAITING_ANNOTATION } from "../../../src/api/labels.ts";
import { peekRolloutState, ROLLOUT_STATE_CONFIGMAP, type RolloutState } from "../../../src/rollout/state.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { placementText, rolloutText } from "../../support/fleet-files.ts";
import { startFleetProcess } from "../../support/fleet-service.ts";
import { installGatewayApi, removeGatewayApi } from "../../support/gateway-api.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import { type RunningPrometheus, startPrometheus } from "../../support/prometheus.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { dropHubCrs } from "../../support/serving-fleet.ts";
import { cleanSpokes } from "../../support/spokes.ts";
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

const policy = (extra: Record<string, unknown> = {}) =>
  rolloutText(
    {
      waves: [
        { name: "canary", clusterProfiles: [{ namespace: CLUSTER_PROFILE_NAMESPACE, name: "spoke-1" }] },
      ],
      maxUnavailable: 3,
      soak: "2s",
      timeLimit: "5m",
      ...extra,
    },
    { name: "knative" },
  );

const KOURIER = { kourier: { enabled: true, "service-type": "ClusterIP" } };
const KOURIER_CLASS = "kourier.ingress.networking.knative.dev";

const placement = (
  version: string,
  ingress: Record<string, unknown> = KOURIER,
  ingressClass = KOURIER_CLASS,
) =>
  placementText({
    name: "serving",
    namespace: NS,
    spec: {
      clusterSelectorTerms: [{ labelSelector: { matchLabels: { [CHAIN_LABEL]: "member" } } }],
      template: { spec: { version, ingress, config: { network: { "ingress-class": ingressClass } } } },
    },
  });

/** One spoke's history: each Knative minor its controller Deployment ran, and when it first did. */
type History = { minor: string; at: number }[];

/**
 * The fleet of one describe on a clean slate: the hub CRs and rollout state of an earlier test gone, the
 * spokes without Knative, the four spokes labelled into the placement, a Git repository with `files`, the
 * service running with `config`, and each spoke's history recorded from then on.
 */
function fleetOnSandbox(
  name: string,
  files: () => Record<string, string>,
  config: () => Record<string, unknown>,
) {
  const fleet = {
    git: undefined as unknown as GitServer,
    hub: adminClient(sandbox.hub),
    service: undefined as ServiceProcess | undefined,
    histories: new Map<string, History>(SPOKES.map((spoke) => [spoke, []])),
    figures: {} as Record<string, unknown>,
    scratch: mkdtempSync(join(tmpdir(), `${name}-`)),
    async state(): Promise<RolloutState | undefined> {
      const configMap = await fleet.hub.get("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP);
      return peekRolloutState(configMap?.data as Record<string, unknown> | undefined);
    },
    async hubCr(spoke: string) {
      return fleet.hub.get(OPERATOR_API_VERSION, "KnativeServing", NS, `serving-${spoke}`);
    },
    async installed(spoke: string) {
      return ((await fleet.hubCr(spoke))?.status as { version?: string } | undefined)?.version;
    },
    minors: (spoke: string) => fleet.histories.get(spoke)!.map((h) => h.minor),
  };
  let watching = true;
  let watcher: Promise<void> = Promise.resolve();

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
          const history = fleet.histories.get(spoke)!;
          if (minor && history.at(-1)?.minor !== minor) history.push({ minor, at: Date.now() });
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
  }

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 4").toBeGreaterThanOrEqual(4);
    const { hub } = fleet;
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await dropHubCrs(hub);
    await resetRolloutState(hub, NS);
    await cleanSpokes(sandbox, SPOKES);
    for (const spoke of SPOKES) {
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
    fleet.git = await startGitServer();
    await fleet.git.createRepo(REPO, files());
    fleet.service = startFleetProcess({
      sandbox,
      scratch: fleet.scratch,
      name,
      service: { repositoryUrl: fleet.git.url(REPO), statusInterval: "2s" },
      config: config(),
    });
    watching = true;
    watcher = watchSpokes();
  }, 300_000);

  afterAll(async () => {
    watching = false;
    await watcher;
    await fleet.service?.stop();
    await dropHubCrs(fleet.hub);
    await resetRolloutState(fleet.hub, NS);
    for (const spoke of SPOKES) {
      await fleet.hub
        .mergePatch("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", CLUSTER_PROFILE_NAMESPACE, spoke, {
          metadata: { labels: { [CHAIN_LABEL]: null } },
        })
        .catch(() => {});
    }
    await fleet.git?.close();
    console.log(`${name} figures:`, JSON.stringify(fleet.figures, null, 1));
  });
  return fleet;
}

/** Waits until every spoke runs `version` (status.version) and the rollout is complete. */
async function settledOn(
  fleet: ReturnType<typeof fleetOnSandbox>,
  version: (v: string | undefined) => boolean,
) {
  await waitUntil(
    "every spoke installed and the rollout complete",
    async () => {
      const versions = await Promise.all(SPOKES.map((spoke) => fleet.installed(spoke)));
      const current = await fleet.state();
      return versions.every(version) && current?.phase === "Complete" && !current.upgrades ? true : undefined;
    },
    600_000,
  );
}

describe("an upgrade chain on four spokes", () => {
  const fleet = fleetOnSandbox(
    "chain",
    () => ({ "clusters/serving-placement.yaml": placement("1.20"), "clusters/rollout.yaml": policy() }),
    () => ({ rollout: { checkInterval: "1s" }, logLevel: "info" }),
  );
  const { histories, figures } = fleet;

  it("installs 1.20 on the four spokes, canary first, and completes", async () => {
    const started = Date.now();
    await settledOn(fleet, (v) => v?.startsWith("1.20.") === true);
    figures.install120Ms = Date.now() - started;
  });

  it("set to 1.23 in one commit: every spoke passes 1.21 and 1.22, each step canary first and done everywhere before the next", async () => {
    const started = Date.now();
    await fleet.git.pushChange(REPO, {
      files: { "clusters/serving-placement.yaml": placement("1.23") },
      message: "Knative 1.23",
    });
    await settledOn(fleet, (v) => v === "1.23.0");
    figures.chain120to123Ms = Date.now() - started;
    figures.histories = Object.fromEntries(
      [...histories].map(([spoke, history]) => [spoke, history.map((h) => `${h.minor}@${h.at - started}`)]),
    );
    // What the spokes ran, in order: no minor skipped.
    for (const spoke of SPOKES) expect(fleet.minors(spoke), spoke).toEqual(["1.20", "1.21", "1.22", "1.23"]);
    // Each step: the canary first, and no spoke on step k+1 before every spoke ran step k.
    const firstAt = (spoke: string, minor: string) =>
      histories.get(spoke)!.find((h) => h.minor === minor)!.at;
    for (const [previous, step] of [
      ["1.21", "1.22"],
      ["1.22", "1.23"],
    ] as const) {
      const lastOfPrevious = Math.max(...SPOKES.map((spoke) => firstAt(spoke, previous)));
      const opened = Math.min(...SPOKES.map((spoke) => firstAt(spoke, step)));
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

describe("a verification gate that fails on the canary, in the middle of a chain", () => {
  // The series a real Prometheus scrapes from this test: each spoke's canary error ratio.
  const errors = new Map(SPOKES.map((spoke) => [spoke, 0]));
  const target = createServer((_req, res) =>
    res.end([...errors].map(([spoke, value]) => `canary_errors{cluster="${spoke}"} ${value}\n`).join("")),
  );
  let prometheus: RunningPrometheus | undefined;
  const gates = [
    {
      name: "error-rate",
      waves: ["canary"],
      prometheus: {
        query: 'max(canary_errors{cluster="{{ .cluster.name }}"})',
        threshold: { op: "<", value: 0.05 },
      },
    },
  ];
  // Before the fleet's own: the service is started with Prometheus' URL.
  beforeAll(async () => {
    await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
    const { port } = target.address() as AddressInfo;
    prometheus = await startPrometheus(mkdtempSync(join(tmpdir(), "chain-gate-prometheus-")), {
      scrape_configs: [{ job_name: "canary", static_configs: [{ targets: [`127.0.0.1:${port}`] }] }],
    });
  }, 60_000);
  const fleet = fleetOnSandbox(
    "chain-gate",
    () => ({
      "clusters/serving-placement.yaml": placement("1.20"),
      "clusters/rollout.yaml": policy({ gates, onFailure: "HaltAndRevert", timeLimit: "20s" }),
    }),
    () => ({ rollout: { checkInterval: "1s", prometheusUrl: prometheus!.url }, logLevel: "info" }),
  );

  afterAll(async () => {
    prometheus?.stop();
    target.closeAllConnections();
    await new Promise((resolve) => target.close(resolve));
  });

  it("halts the chain in its step with nothing past the canary changed; HaltAndRevert takes the canary back one minor", async () => {
    await settledOn(fleet, (v) => v?.startsWith("1.20.") === true);
    const started = Date.now();
    await fleet.git.pushChange(REPO, {
      files: { "clusters/serving-placement.yaml": placement("1.23") },
      message: "Knative 1.23",
    });
    // Step 1.21 passes the gate everywhere; once the canary is given 1.22, its error ratio goes up.
    await waitUntil(
      "the canary given 1.22",
      async () =>
        ((await fleet.hubCr("spoke-1"))?.spec as { version?: string } | undefined)?.version === "1.22" ||
        undefined,
      300_000,
    );
    fleet.figures.step121Ms = Date.now() - started;
    errors.set("spoke-1", 0.31);
    const halted = await waitUntil(
      "the rollout halted",
      async () => {
        const current = await fleet.state();
        return current?.phase === "Halted" ? current : undefined;
      },
      120_000,
    );
    expect(halted.halt).toMatchObject({ wave: "canary", resource: `KnativeServing ${NS}/serving-spoke-1` });
    expect(halted.halt?.reason).toBe(
      'gate error-rate: max(canary_errors{cluster="spoke-1"}) = 0.31, wanted < 0.05',
    );
    expect(halted.upgrades).toEqual({ "KnativeServing 1.23": "1.22" });
    // The canary goes back to 1.21 (its baseline: the previous step), not to 1.20.
    await waitUntil(
      "the canary back on 1.21",
      async () =>
        ((await fleet.installed("spoke-1"))?.startsWith("1.21.") &&
          fleet.minors("spoke-1").at(-1) === "1.21") ||
        undefined,
      120_000,
    );
    fleet.figures.haltedAndRevertedMs = Date.now() - started;
    expect(fleet.minors("spoke-1")).toEqual(["1.20", "1.21", "1.22", "1.21"]);
    for (const spoke of SPOKES.slice(1)) expect(fleet.minors(spoke), spoke).toEqual(["1.20", "1.21"]);
    // What the gate cost: read from the service's log, one line per check.
    const checks = readFileSync(join(fleet.scratch, "chain-gate.log"), "utf8")
      .split("\n")
      .filter((line) => line.includes("verification gates evaluated"))
      .map((line) => JSON.parse(line) as { crs: number; requests: number; durationMs: number });
    fleet.figures.gateChecks = checks.length;
    fleet.figures.gateRequests = checks.reduce((sum, check) => sum + check.requests, 0);
    fleet.figures.gateMsPerCheck = Math.round(
      checks.reduce((sum, c) => sum + c.durationMs, 0) / checks.length,
    );
    expect(checks.every((check) => check.requests === check.crs)).toBe(true);
  });
});

describe("a spoke the preflight finds unready, in the middle of a chain", () => {
  const GATEWAY = { "gateway-api": { enabled: true } };
  const GATEWAY_CLASS = "gateway-api.ingress.networking.knative.dev";
  const spokeClient = (spoke: string) => adminClient(sandbox.spokes.find((s) => s.name === spoke)!);
  beforeAll(async () => {
    for (const spoke of SPOKES.slice(0, 3)) await installGatewayApi(spokeClient(spoke));
    await removeGatewayApi(spokeClient("spoke-4"));
  }, 120_000);
  afterAll(async () => {
    for (const spoke of SPOKES.slice(0, 3)) await removeGatewayApi(spokeClient(spoke));
  }, 120_000);
  const fleet = fleetOnSandbox(
    "chain-preflight",
    () => ({ "clusters/serving-placement.yaml": placement("1.21"), "clusters/rollout.yaml": policy() }),
    () => ({ rollout: { checkInterval: "1s" }, logLevel: "info" }),
  );

  it("a spoke without the Gateway API CRDs waits, saying so, while the others walk the chain to the gateway-api ingress", async () => {
    await settledOn(fleet, (v) => v?.startsWith("1.21.") === true);
    const started = Date.now();
    await fleet.git.pushChange(REPO, {
      files: { "clusters/serving-placement.yaml": placement("1.23", GATEWAY, GATEWAY_CLASS) },
      message: "Knative 1.23 on the Gateway API",
    });
    const ingressOf = async (spoke: string) =>
      Object.keys(((await fleet.hubCr(spoke))?.spec as { ingress?: object } | undefined)?.ingress ?? {});
    await waitUntil(
      "spokes 1-3 on 1.23.0 with the gateway-api ingress, the chain done",
      async () => {
        const ready = await Promise.all(
          SPOKES.slice(0, 3).map(
            async (spoke) =>
              (await fleet.installed(spoke)) === "1.23.0" && (await ingressOf(spoke)).includes("gateway-api"),
          ),
        );
        const current = await fleet.state();
        return ready.every(Boolean) && current?.phase === "Complete" ? true : undefined;
      },
      600_000,
    );
    fleet.figures.othersDoneMs = Date.now() - started;
    for (const spoke of SPOKES.slice(0, 3))
      expect(fleet.minors(spoke), spoke).toEqual(["1.21", "1.22", "1.23"]);
    // spoke-4 kept what it had, and its hub CR says why.
    const waiting = await fleet.hubCr("spoke-4");
    expect((waiting?.spec as { version?: string } | undefined)?.version).toBe("1.21");
    expect(await ingressOf("spoke-4")).toEqual(["kourier"]);
    expect(fleet.minors("spoke-4")).toEqual(["1.21"]);
    expect(waiting?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION]).toMatch(
      /its cluster is not ready for it: GatewayAPIMissing: spec\.ingress\.gateway-api\.enabled needs the Gateway API CRDs/,
    );
  });
});
