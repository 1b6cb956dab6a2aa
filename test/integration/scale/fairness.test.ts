import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { loadServiceConfig } from "../../../src/service/config.ts";
import type { FleetService } from "../../../src/service/service.ts";
import { loadSandbox, resumeApiserver, stopApiserver } from "../../sandbox/index.ts";
import { crText } from "../../support/fleet-files.ts";
import { startServiceOnSandbox, writeServiceConfig } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import {
  conditionsOf,
  dropHubCrs,
  isReady,
  FLEET_NAMESPACE as NS,
  servingFile,
} from "../../support/serving-fleet.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";

// Per-spoke fairness: two workers, one per spoke at most. spoke-3 carries two CRs (Serving and Eventing),
// so without the per-spoke bound a frozen spoke-3 would hold both workers for a whole request timeout
// (30 s) at a time. Its apiserver is frozen (SIGSTOP: connections hang, the worst case), a config change
// is pushed for every CR, and the other spokes must get it well within that timeout.

const sandbox = loadSandbox();
const REPO = "fairness-fleet";
const HEALTHY = ["spoke-1", "spoke-2"];
const FROZEN = "spoke-3";
/** The spoke client's request timeout: without fairness the healthy spokes would wait at least this long. */
const SPOKE_REQUEST_TIMEOUT_MS = 30_000;
/** The poll schedule (5 s) plus the mirror and one apply per healthy spoke, with room for a busy machine. */
const CHANGE_BOUND_MS = 25_000;

const servingOf = (cluster: string) => `serving-${cluster}`;
const files = (target: string) => ({
  ...Object.assign(
    {},
    ...[...HEALTHY, FROZEN].map((cluster) =>
      servingFile(cluster, { autoscaler: { "container-concurrency-target-default": target } }),
    ),
  ),
  [`clusters/eventing-${FROZEN}.yaml`]: crText({
    kind: "KnativeEventing",
    name: `eventing-${FROZEN}`,
    cluster: FROZEN,
    version: "1.22",
    spec: {
      config: { features: { "new-apiserversource-filters": target === "100" ? "enabled" : "disabled" } },
    },
  }),
});

describe("per-spoke fairness", () => {
  let git: GitServer;
  let hub: KubeClient;
  let service: FleetService;
  const spoke = (name: string) => adminClient(sandbox.spokes.find((s) => s.name === name)!);
  const ready = (kind: string, name: string) => isReady(hub, kind, name);
  const target = async (cluster: string) => {
    const map = await spoke(cluster).get("v1", "ConfigMap", "knative-serving", "config-autoscaler");
    return (map?.data as Record<string, string> | undefined)?.["container-concurrency-target-default"];
  };

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 3").toBeGreaterThanOrEqual(3);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await dropHubCrs(hub);
    await cleanSpokes(sandbox, [...HEALTHY, FROZEN]);
    git = await startGitServer();
    await git.createRepo(REPO, files("100"));
    const config = loadServiceConfig(writeServiceConfig({ repositoryUrl: git.url(REPO) }));
    service = await startServiceOnSandbox(
      sandbox,
      { ...config, workers: 2, workersPerCluster: 1 },
      "fairness-test",
    );
  }, 60_000);

  afterAll(async () => {
    resumeApiserver(sandbox.stateDir, FROZEN);
    await service?.stop();
    await dropHubCrs(hub);
    await cleanSpokes(sandbox, [...HEALTHY, FROZEN]); // the installs of the dropped CRs
    await git?.close();
  }, 240_000);

  it("a frozen spoke holds one worker: a change reaches the other spokes within the bound, the frozen one reports its failure, and gets the change once thawed", async () => {
    const crs = [
      ...[...HEALTHY, FROZEN].map((c) => ["KnativeServing", servingOf(c)] as const),
      ["KnativeEventing", `eventing-${FROZEN}`] as const,
    ];
    for (const [kind, name] of crs)
      await waitUntil(
        `${kind} ${name} Ready`,
        async () => ((await ready(kind, name)) ? true : undefined),
        300_000,
      );

    stopApiserver(sandbox.stateDir, FROZEN);
    const pushedAt = Date.now();
    await git.pushChange(REPO, { files: files("150"), message: "raise the concurrency target everywhere" });
    const reached: Record<string, number> = {};
    await Promise.all(
      HEALTHY.map(async (cluster) => {
        await waitUntil(
          `the change on ${cluster}`,
          async () => ((await target(cluster)) === "150" ? true : undefined),
          2 * SPOKE_REQUEST_TIMEOUT_MS,
        );
        reached[cluster] = Date.now() - pushedAt;
      }),
    );
    console.log(
      `fairness: with ${FROZEN} frozen the change reached ${JSON.stringify(reached)} ms after the push`,
    );
    for (const ms of Object.values(reached)) expect(ms).toBeLessThan(CHANGE_BOUND_MS);

    // The frozen spoke's CRs say why, once their requests time out.
    const failure = await waitUntil(
      `${servingOf(FROZEN)} reports the failure`,
      async () => {
        const found = conditionsOf(
          await hub.get(OPERATOR_API_VERSION, "KnativeServing", NS, servingOf(FROZEN)),
        );
        const ready = found.find((c) => c.type === "Ready");
        return ready && ready.status !== "True" ? ready : undefined;
      },
      3 * SPOKE_REQUEST_TIMEOUT_MS,
    );
    console.log(`fairness: ${servingOf(FROZEN)} while frozen: Ready=${failure.status}: ${failure.message}`);
    expect(failure.status).toBe("False");
    expect(failure.message).toMatch(/timeout|timed out|aborted/i);
    expect(await ready("KnativeServing", servingOf("spoke-1"))).toBe(true);

    // Thawed, the spoke gets the change from a retry. Its Ready is not awaited: a freeze longer than the
    // node monitor grace period leaves its controller-manager marking the fake pods not ready, which the
    // hub CR then rightly reports.
    resumeApiserver(sandbox.stateDir, FROZEN);
    await waitUntil(
      `the change on ${FROZEN} after it thawed`,
      async () => ((await target(FROZEN)) === "150" ? true : undefined),
      // A retry waits out its backoff (doubling from 1 s per failure) before it reaches the thawed spoke.
      300_000,
    );
  }, 900_000);
});
