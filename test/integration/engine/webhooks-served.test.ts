import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConditionType, findCondition, readinessOf } from "../../../src/api/conditions.ts";
import { type Condition, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { isDeploymentAvailable } from "../../../src/install/health.ts";
import { isReadyEndpoint } from "../../../src/install/webhooks.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { Reconciler } from "../../../src/reconcile/start.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { deleteCrs, forceDeleteCrs, startFleet } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";

// The gate "the release's webhooks are served" (#39) on a real spoke: the controller-manager's EndpointSlice
// controller gives the webhook Services the endpoints of kwok's ready pods, and an install is Ready only then.
// A webhook Service that selects no pod (its selector overridden by spec.services, so the reconciler itself
// keeps it so) leaves every Deployment Available and the CR not Ready, saying which Service waits.

const sandbox = loadSandbox();
const spoke = sandbox.spokes[0]!;
const HUB_NS = "webhooks-served";
const NO_PODS = { "webhooks-served-test/selects": "nothing" };

const eventing = (services?: unknown[]): KubeObject => ({
  apiVersion: OPERATOR_API_VERSION,
  kind: "KnativeEventing",
  metadata: { name: "eventing", namespace: HUB_NS },
  spec: {
    version: "1.22",
    clusterProfileRef: { name: spoke.name, namespace: sandbox.clusterProfileNamespace },
    ...(services ? { services } : {}),
  },
});

describe("an install is Ready only once its webhook Services have ready endpoints", () => {
  let hub: KubeClient;
  let spokeClient: KubeClient;
  let reconciler: Reconciler;

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    spokeClient = adminClient(spoke);
    await installFleetCrds(hub);
    await ensureNamespace(hub, HUB_NS);
    await cleanSpokes(sandbox, [spoke.name]);
    ({ reconciler } = await startFleet(sandbox));
  });

  afterAll(async () => {
    await deleteCrs(hub, [eventing()]).catch(() => {});
    await reconciler?.stop();
    await forceDeleteCrs(hub, [eventing()]).catch(() => {});
  });

  const live = async () => (await hub.get(OPERATOR_API_VERSION, "KnativeEventing", HUB_NS, "eventing"))!;
  const conditionsOf = (cr: KubeObject) =>
    (cr.status as { conditions?: Condition[] } | undefined)?.conditions;
  const slicesOf = async (service: string) =>
    (
      await spokeClient.list("discovery.k8s.io/v1", "EndpointSlice", {
        namespace: "knative-eventing",
        labelSelector: `kubernetes.io/service-name=${service}`,
      })
    ).items;
  const served = async (service: string) =>
    (await slicesOf(service)).some((slice) => ((slice.endpoints as unknown[]) ?? []).some(isReadyEndpoint));

  it("a webhook Service that selects no pod: every Deployment Available, not Ready, 'Waiting on webhook endpoints: eventing-webhook'", async () => {
    await hub.apply(eventing([{ name: "eventing-webhook", selector: NO_PODS }]));
    const waiting = await waitUntil(
      "the CR waits on the webhook's endpoints",
      async () => {
        const cr = await live();
        const deployments = findCondition(conditionsOf(cr), ConditionType.DeploymentsAvailable);
        return deployments?.message === "Waiting on webhook endpoints: eventing-webhook" ? cr : undefined;
      },
      240_000,
    );
    expect(findCondition(conditionsOf(waiting), ConditionType.DeploymentsAvailable)).toMatchObject({
      status: "False",
      reason: "NotReady",
    });
    expect(findCondition(conditionsOf(waiting), ConditionType.Ready)).toMatchObject({
      status: "False",
      reason: "NotReady",
      message: "Waiting on webhook endpoints: eventing-webhook",
    });
    expect(readinessOf(waiting as Parameters<typeof readinessOf>[0]).phase).not.toBe("Current");
    expect((waiting.status as { version?: string }).version).toBeUndefined();

    // The Deployments are all Available: only the webhook holds the install back.
    const deployments = (await spokeClient.list("apps/v1", "Deployment", { namespace: "knative-eventing" }))
      .items;
    expect(deployments.map((d) => d.metadata.name)).toContain("eventing-webhook");
    expect(deployments.every(isDeploymentAvailable)).toBe(true);
    // The real EndpointSlice controller: the other webhook is served, this one has no ready endpoint.
    expect(await served("inmemorychannel-webhook")).toBe(true);
    expect(await served("eventing-webhook")).toBe(false);

    // It stays so: re-checked every poll interval, never Ready while the Service selects nothing.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(findCondition(conditionsOf(await live()), ConditionType.Ready)?.status).toBe("False");
  });

  it("the override removed: the Service selects the webhook's pods, the slice gets its endpoint, and the CR becomes Ready", async () => {
    await hub.apply(eventing());
    const ready = await waitUntil(
      "the CR Ready",
      async () => {
        const cr = await live();
        const current =
          (cr.status as { observedGeneration?: number } | undefined)?.observedGeneration ===
          cr.metadata.generation;
        return current && findCondition(conditionsOf(cr), ConditionType.Ready)?.status === "True"
          ? cr
          : undefined;
      },
      240_000,
    );
    expect(findCondition(conditionsOf(ready), ConditionType.DeploymentsAvailable)?.status).toBe("True");
    expect((ready.status as { version?: string }).version).toBe("1.22.2");
    expect(readinessOf(ready as Parameters<typeof readinessOf>[0]).phase).toBe("Current");
    // What the gate saw: both webhook Services served by a ready endpoint with an address.
    expect(await served("eventing-webhook")).toBe(true);
    expect(await served("inmemorychannel-webhook")).toBe(true);
  });
});
