import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { ROLLOUT_WAITING_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { peekRolloutState, ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { healthOf } from "../../../src/rollout/weigh.ts";
import { loadServiceConfig } from "../../../src/service/config.ts";
import type { FleetService } from "../../../src/service/service.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { crText } from "../../support/fleet-files.ts";
import { startServiceOnSandbox, writeServiceConfig } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { deleteCrs, KOURIER, startUpstream } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds, resetRolloutState } from "../../support/hub.ts";
import { prepareUpstreamHub, type UpstreamOperator } from "../../support/upstream-operator.ts";
import { waitUntil } from "../../support/wait.ts";

// Hand-over test 4 (#17) and the external-reconciler mode of the rollout (#14): the real upstream Knative
// Operator reconciles the hub CRs onto the spokes; knative-fleet (`reconciler: external`) only mirrors the
// fleet repository, gates the waves on the conditions upstream writes, and reports. A canary (spoke-1) and
// the remaining wave (spoke-2): spoke-2's CR is created, and later bumped, only after upstream has made
// spoke-1's Ready on the current generation and the soak has passed.
//
// The CRs live in the hub namespace knative-serving: this upstream commit installs into the hub CR's
// namespace on the spoke, and knative-fleet's canonical layout is the same namespace.

const sandbox = loadSandbox();
const SPOKES = sandbox.spokes.slice(0, 2).map((s) => s.name);
const NS = "knative-serving";
const REPO = "external-reconciler-fleet";
const SOAK_S = 5;

const files = (version: string) => ({
  ...Object.fromEntries(
    SPOKES.map((spoke) => [
      `clusters/${spoke}.yaml`,
      crText({ name: `serving-${spoke}`, namespace: NS, cluster: spoke, version, spec: KOURIER }),
    ]),
  ),
  "clusters/rollout.yaml": stringify({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeRollout",
    metadata: { name: "knative" },
    spec: {
      waves: [
        {
          name: "canary",
          clusterProfiles: [{ namespace: sandbox.clusterProfileNamespace, name: SPOKES[0] }],
        },
      ],
      soak: `${SOAK_S}s`,
      timeLimit: "4m",
    },
  }),
});

describe("external-reconciler mode: the real upstream operator reconciles, knative-fleet gates the waves", () => {
  let hub: KubeClient;
  let git: GitServer;
  let upstream: UpstreamOperator | undefined;
  let service: FleetService | undefined;
  const figures: Record<string, unknown> = {};
  const hubCr = (spoke: string) => hub.get(OPERATOR_API_VERSION, "KnativeServing", NS, `serving-${spoke}`);
  const version = (cr: KubeObject | undefined) => (cr?.spec as { version?: string } | undefined)?.version;

  /** When each CR first holds `wanted` on the hub and when upstream first reports it healthy, after `started`. */
  async function follow(wanted: string, started: number) {
    const applied: Record<string, number> = {};
    const healthy: Record<string, number> = {};
    await waitUntil(
      `both CRs healthy on ${wanted}`,
      async () => {
        for (const spoke of SPOKES) {
          const cr = await hubCr(spoke);
          if (version(cr) !== wanted) continue;
          applied[spoke] ??= Date.now() - started;
          if (healthOf(cr!).healthy) healthy[spoke] ??= Date.now() - started;
        }
        return Object.keys(healthy).length === SPOKES.length ? true : undefined;
      },
      480_000,
    );
    return { applied, healthy };
  }

  beforeAll(async () => {
    expect(SPOKES.length, "this test needs a sandbox with 2 spokes").toBe(2);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await prepareUpstreamHub(hub);
    await ensureNamespace(hub, NS);
    await resetRolloutState(hub, NS);
    // Start from spokes without a Serving install (an earlier test file's may be there).
    for (const spoke of sandbox.spokes.slice(0, 2)) {
      const client = adminClient(spoke);
      await client.delete("v1", "Namespace", undefined, NS);
      await waitUntil(
        `${spoke.name} namespace ${NS} gone`,
        async () => ((await client.get("v1", "Namespace", undefined, NS)) ? undefined : true),
        120_000,
      );
    }
    upstream = await startUpstream(sandbox);
    git = await startGitServer();
    await git.createRepo(REPO, files("1.22"));
    const config = loadServiceConfig(writeServiceConfig({ repositoryUrl: git.url(REPO), namespace: NS }));
    service = await startServiceOnSandbox(
      sandbox,
      { ...config, reconciler: "external", rollout: { checkInterval: "1s" } },
      "external-reconciler-test",
    );
  }, 300_000);

  afterAll(async () => {
    await service?.stop();
    // Upstream's finalizer uninstalls from the spokes.
    const crs = SPOKES.map((spoke) => ({
      apiVersion: OPERATOR_API_VERSION,
      kind: "KnativeServing",
      metadata: { name: `serving-${spoke}`, namespace: NS },
    }));
    await deleteCrs(hub, crs).catch(() => {});
    await resetRolloutState(hub, NS);
    await upstream?.stop();
    await git?.close();
    console.log("external-reconciler figures:", JSON.stringify(figures));
  });

  it("the first install goes canary first, the rest after upstream reports the canary healthy and the soak", async () => {
    const started = Date.now();
    const held = await waitUntil("spoke-2's CR held", async () => {
      const state = peekRolloutState(
        (await hub.get("v1", "ConfigMap", NS, ROLLOUT_STATE_CONFIGMAP))?.data as Record<string, unknown>,
      );
      return state?.waveName === "canary" ? state : undefined;
    });
    const released = Object.entries(held.crs).flatMap(([key, cr]) => (cr.released ? [key] : []));
    expect(released).toEqual([`KnativeServing ${NS}/serving-${SPOKES[0]}`]);
    expect(await hubCr(SPOKES[1]!)).toBeUndefined();
    const { applied, healthy } = await follow("1.22", started);
    figures.install = { applied, healthy };
    expect(applied[SPOKES[1]!]!).toBeGreaterThanOrEqual(healthy[SPOKES[0]!]! + SOAK_S * 1000 - 1500);
    // Upstream, not knative-fleet, reconciled them: its log says so, and it logged no error.
    await upstream!.waitReconciled(NS, `serving-${SPOKES[0]}`);
    await upstream!.waitReconciled(NS, `serving-${SPOKES[1]}`);
    expect(upstream!.errors([NS])).toEqual([]);
  });

  it("a version bump waits on upstream's Ready for the current generation of the canary", async () => {
    await git.pushChange(REPO, { files: files("1.23"), message: "Knative 1.23" });
    const started = Date.now();
    const note = await waitUntil(
      "spoke-2 marked as waiting",
      async () => (await hubCr(SPOKES[1]!))?.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION],
    );
    expect(note).toMatch(/waits for its wave, remaining$/);
    const { applied, healthy } = await follow("1.23", started);
    figures.bump = { applied, healthy };
    expect(applied[SPOKES[1]!]!).toBeGreaterThanOrEqual(healthy[SPOKES[0]!]! + SOAK_S * 1000 - 1500);
    const status = (await hubCr(SPOKES[0]!))?.status as { version?: string };
    expect(status.version).toBe("1.23.0");
    expect(upstream!.errors([NS])).toEqual([]);
  });
});
