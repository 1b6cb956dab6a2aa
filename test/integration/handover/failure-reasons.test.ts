import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../../src/kube/object.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { forceDeleteCrs, startFleet, startUpstream } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { prepareUpstreamHub, waitConditions } from "../../support/upstream-operator.ts";

// Hand-over 3: the same failures give the same TargetClusterResolved reason in both reconcilers, so a status
// (and whatever alerts on it) means the same whoever reconciles: no provider file (multicluster off), a
// ClusterProfile that does not exist, one whose control plane is not healthy.

const sandbox = loadSandbox();
const hubNs = "handover-failures";
const profileNs = sandbox.clusterProfileNamespace;
const UNHEALTHY = "unhealthy-spoke";
const CLUSTER_PROFILE_API = "multicluster.x-k8s.io/v1alpha1";

const cr = (name: string, cluster: string): KubeObject => ({
  apiVersion: OPERATOR_API_VERSION,
  kind: "KnativeServing",
  metadata: { name, namespace: hubNs },
  spec: { version: "1.23", clusterProfileRef: { name: cluster, namespace: profileNs } },
});

type Case = "no provider file" | "missing ClusterProfile" | "unhealthy ClusterProfile";
const CASES: Record<Case, { cluster: string; multicluster: boolean }> = {
  "no provider file": { cluster: sandbox.spokes[0]!.name, multicluster: false },
  "missing ClusterProfile": { cluster: "no-such-cluster", multicluster: true },
  "unhealthy ClusterProfile": { cluster: UNHEALTHY, multicluster: true },
};

describe("the same failures give the same reasons in knative-fleet and upstream", () => {
  let hub: KubeClient;
  const created: KubeObject[] = [];
  const reasons: Record<string, Record<string, string | undefined>> = { upstream: {}, fleet: {} };

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await prepareUpstreamHub(hub);
    await ensureNamespace(hub, hubNs);
    await hub.apply({
      apiVersion: CLUSTER_PROFILE_API,
      kind: "ClusterProfile",
      metadata: { name: UNHEALTHY, namespace: profileNs },
      spec: { displayName: UNHEALTHY, clusterManager: { name: "knative-fleet-sandbox" } },
    });
    await hub.apply(
      {
        apiVersion: CLUSTER_PROFILE_API,
        kind: "ClusterProfile",
        metadata: { name: UNHEALTHY, namespace: profileNs },
        status: {
          conditions: [
            {
              type: "ControlPlaneHealthy",
              status: "False",
              reason: "Unreachable",
              message: "the control plane does not answer",
              lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
            },
          ],
        },
      },
      { subresource: "status" },
    );
  });

  afterAll(async () => {
    await forceDeleteCrs(hub, created);
    await hub.delete(CLUSTER_PROFILE_API, "ClusterProfile", profileNs, UNHEALTHY).catch(() => {});
    console.log("TargetClusterResolved reasons:", JSON.stringify(reasons));
  });

  /** Starts one reconciler (with or without the provider file), creates one CR per case, records the reasons. */
  async function observe(who: "upstream" | "fleet", multicluster: boolean): Promise<void> {
    const options = { providerFile: multicluster ? sandbox.providerFile : undefined };
    const running =
      who === "upstream" ? await startUpstream(sandbox, options) : await startFleet(sandbox, options);
    try {
      const cases = Object.entries(CASES).filter(([, c]) => c.multicluster === multicluster);
      await Promise.all(
        cases.map(async ([name, c]) => {
          const resource = cr(`${who}-${name.replaceAll(" ", "-").toLowerCase()}`, c.cluster);
          created.push(resource);
          await hub.apply(resource);
          const { conditions } = await waitConditions(
            hub,
            "KnativeServing",
            hubNs,
            nameOf(resource),
            { TargetClusterResolved: "False" },
            60_000,
          );
          reasons[who]![name] = conditions.find((x) => x.type === "TargetClusterResolved")?.reason;
        }),
      );
    } finally {
      if ("reconciler" in running) await running.reconciler.stop();
      else await running.stop();
      // Gone before the next reconciler starts: with multicluster on, it would install the first case's CR.
      await forceDeleteCrs(hub, created.splice(0));
    }
  }

  it("upstream: each case marks TargetClusterResolved False with a reason", async () => {
    await observe("upstream", false);
    await observe("upstream", true);
    expect(Object.keys(reasons.upstream!).sort()).toEqual(Object.keys(CASES).sort());
    for (const reason of Object.values(reasons.upstream!)) expect(reason).toMatch(/^[A-Z]\w+$/);
  });

  it("knative-fleet: the same reason as upstream for each case", async () => {
    await observe("fleet", false);
    await observe("fleet", true);
    expect(reasons.fleet).toEqual(reasons.upstream);
  });
});
