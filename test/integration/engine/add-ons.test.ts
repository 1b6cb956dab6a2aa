import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_SOURCES, KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { nameOf } from "../../../src/kube/object.ts";
import type { Reconciler } from "../../../src/reconcile/start.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { startFleet } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { waitUntil } from "../../support/wait.ts";

// Event sources and Security-Guard on a real spoke: enabled, they install (and the CR waits for their
// workloads as for the release's); an upgrade takes them to the new minor; disabled, what they installed
// goes, the rest stays.

const sandbox = loadSandbox();
const hubNs = "add-ons-test";
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const sources = (...enabled: string[]) =>
  Object.fromEntries(EVENT_SOURCES.map((name) => [name, { enabled: enabled.includes(name) }]));

describe("event sources and Security-Guard on real spokes", () => {
  let hub: KubeClient;
  let spokeOne: KubeClient;
  let spokeTwo: KubeClient;
  let reconciler: Reconciler;
  const timings: Record<string, number> = {};

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    spokeOne = adminClient(spoke1);
    spokeTwo = adminClient(spoke2);
    await installFleetCrds(hub);
    await ensureNamespace(hub, hubNs);
    ({ reconciler } = await startFleet(sandbox));
  });

  afterAll(async () => {
    for (const kind of KNATIVE_KINDS)
      for (const cr of (await hub.list(OPERATOR_API_VERSION, kind, { namespace: hubNs })).items)
        await hub.delete(OPERATOR_API_VERSION, kind, hubNs, nameOf(cr)).catch(() => {});
    await waitUntil(
      "the add-on CRs finalized",
      async () => {
        for (const kind of KNATIVE_KINDS)
          if ((await hub.list(OPERATOR_API_VERSION, kind, { namespace: hubNs })).items.length > 0)
            return undefined;
        return true;
      },
      120_000,
    ).catch(() => {});
    await reconciler?.stop();
    console.log("add-on figures:", JSON.stringify(timings));
  });

  const apply = (kind: "KnativeServing" | "KnativeEventing", name: string, spec: object, cluster: string) =>
    hub.apply({
      apiVersion: OPERATOR_API_VERSION,
      kind,
      metadata: { name, namespace: hubNs },
      spec: { ...spec, clusterProfileRef: { name: cluster, namespace: sandbox.clusterProfileNamespace } },
    } satisfies KubeObject);
  const readyAt = (kind: string, name: string, version: string) =>
    waitUntil(
      `${kind} ${name} Ready at ${version}`,
      async () => {
        const status = (await hub.get(OPERATOR_API_VERSION, kind, hubNs, name))?.status as
          | { version?: string; observedGeneration?: number; conditions?: { type: string; status: string }[] }
          | undefined;
        const ready = status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
        return ready && status?.version === version ? true : undefined;
      },
      240_000,
    );
  /** The Eventing CR at `version` with `enabled` sources, once Ready at `release`. */
  const eventingReadyAt = async (version: string, release: string, ...enabled: string[]) => {
    await apply("KnativeEventing", "eventing", { version, source: sources(...enabled) }, spoke2.name);
    await readyAt("KnativeEventing", "eventing", release);
  };
  const object = (
    client: KubeClient,
    apiVersion: string,
    kind: string,
    name: string,
    ns = "knative-eventing",
  ) => client.get(apiVersion, kind, ns, name);
  const versionOf = (live: KubeObject | undefined) => live?.metadata.labels?.["app.kubernetes.io/version"];

  it("Eventing with the redis and rabbitmq sources: installed, upgraded with the release, redis removed when disabled", async () => {
    let started = Date.now();
    await eventingReadyAt("1.22", "1.22.2", "redis", "rabbitmq");
    timings.installReadyMs = Date.now() - started;
    const redis = await object(spokeTwo, "apps/v1", "StatefulSet", "redis-controller-manager");
    const rabbitmq = await object(spokeTwo, "apps/v1", "Deployment", "rabbitmq-controller-manager");
    expect(redis, "redis's StatefulSet in the install namespace").toBeDefined();
    expect(rabbitmq, "rabbitmq's Deployment in the install namespace").toBeDefined();
    expect(
      await spokeTwo.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        undefined,
        "redisstreamsources.sources.knative.dev",
      ),
    ).toBeDefined();
    // The sources' own namespace is folded into the install namespace, as upstream's transform does.
    expect(await spokeTwo.get("v1", "Namespace", undefined, "knative-sources")).toBeUndefined();
    const status = (await hub.get(OPERATOR_API_VERSION, "KnativeEventing", hubNs, "eventing"))?.status as {
      manifests?: string[];
    };
    expect(status.manifests?.some((location) => location.endsWith("eventing-source/1.22/redis"))).toBe(true);

    started = Date.now();
    const rabbitmqBefore = JSON.stringify(rabbitmq?.spec);
    await eventingReadyAt("1.23", "1.23.0", "redis", "rabbitmq");
    timings.upgradeReadyMs = Date.now() - started;
    const upgraded = await object(spokeTwo, "apps/v1", "Deployment", "rabbitmq-controller-manager");
    expect(JSON.stringify(upgraded?.spec), "rabbitmq's controller at 1.23's manifests").not.toBe(
      rabbitmqBefore,
    );

    started = Date.now();
    await apply("KnativeEventing", "eventing", { version: "1.23", source: sources("rabbitmq") }, spoke2.name);
    await waitUntil(
      "redis's objects gone after disabling it",
      async () =>
        (await object(spokeTwo, "apps/v1", "StatefulSet", "redis-controller-manager")) === undefined
          ? true
          : undefined,
      120_000,
    );
    timings.disableCleanMs = Date.now() - started;
    expect(await object(spokeTwo, "apps/v1", "Deployment", "rabbitmq-controller-manager")).toBeDefined();
    expect(await object(spokeTwo, "apps/v1", "Deployment", "eventing-controller")).toBeDefined();
    expect(versionOf(await object(spokeTwo, "apps/v1", "Deployment", "eventing-controller"))).toBe("1.23.0");
  });

  it("Serving with Security-Guard: the guard service and the queue-proxy pod info; disabled, the guard goes", async () => {
    const started = Date.now();
    const spec = (enabled: boolean) => ({
      version: "1.23",
      ingress: { kourier: { enabled: true } },
      config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" } },
      security: { securityGuard: { enabled } },
    });
    await apply("KnativeServing", "serving", spec(true), spoke1.name);
    await readyAt("KnativeServing", "serving", "1.23.0");
    timings.guardReadyMs = Date.now() - started;
    expect(await object(spokeOne, "apps/v1", "Deployment", "guard-service", "knative-serving")).toBeDefined();
    const features = await object(spokeOne, "v1", "ConfigMap", "config-features", "knative-serving");
    expect(((features?.data ?? {}) as Record<string, string>)["queueproxy.mount-podinfo"]).toBe("allowed");

    await apply("KnativeServing", "serving", spec(false), spoke1.name);
    await waitUntil(
      "the guard service gone after disabling it",
      async () =>
        (await object(spokeOne, "apps/v1", "Deployment", "guard-service", "knative-serving")) === undefined
          ? true
          : undefined,
      120_000,
    );
    expect(await object(spokeOne, "apps/v1", "Deployment", "activator", "knative-serving")).toBeDefined();
  });
});
