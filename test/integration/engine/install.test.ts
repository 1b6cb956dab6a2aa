import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { ABANDON_CLEANUP_ANNOTATION, FINALIZERS } from "../../../src/api/labels.ts";
import { decodeInventory } from "../../../src/apply/inventory.ts";
import { isDeploymentAvailable } from "../../../src/install/health.ts";
import { anchorName } from "../../../src/install/identity.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { nameOf } from "../../../src/kube/object.ts";
import type { ReconcileReport } from "../../../src/reconcile/controller.ts";
import type { Reconciler } from "../../../src/reconcile/start.ts";
import { clusterProfileStatus, loadSandbox, putClusterProfile } from "../../sandbox/index.ts";
import { startFleet } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { waitUntil } from "../../support/wait.ts";
import { applyWrites, spokeWriteCount } from "./metrics.ts";

const sandbox = loadSandbox();
const SERVING_ANCHOR = anchorName({ kind: "KnativeServing", name: "serving" });
const dataOf = (object: KubeObject | undefined) => (object?.data ?? {}) as Record<string, string>;
const hubNs = "reconciler-test";
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];

describe("the reconcile reconciler on real spokes", () => {
  let hub: KubeClient;
  let spokeOne: KubeClient;
  let spokeTwo: KubeClient;
  let reconciler: Reconciler;
  let reports: ReconcileReport[] = [];
  const timings: Record<string, number> = {};

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    spokeOne = adminClient(spoke1);
    spokeTwo = adminClient(spoke2);
    await installFleetCrds(hub);
    await ensureNamespace(hub, hubNs);
    ({ reconciler, reports } = await startFleet(sandbox));
  });

  afterAll(async () => {
    await reconciler?.stop();
    for (const kind of KNATIVE_KINDS) {
      for (const cr of (await hub.list(OPERATOR_API_VERSION, kind, { namespace: hubNs })).items) {
        await hub
          .mergePatch(OPERATOR_API_VERSION, kind, hubNs, nameOf(cr), { metadata: { finalizers: null } })
          .catch(() => {});
        await hub.delete(OPERATOR_API_VERSION, kind, hubNs, nameOf(cr)).catch(() => {});
      }
    }
    console.log("reconciler figures:", JSON.stringify(timings));
  });

  const cr = (kind: "KnativeServing" | "KnativeEventing", name: string, spec: object): KubeObject => ({
    apiVersion: OPERATOR_API_VERSION,
    kind,
    metadata: { name, namespace: hubNs },
    spec,
  });
  const readyCondition = async (kind: string, name: string, namespace = hubNs) => {
    const live = await hub.get(OPERATOR_API_VERSION, kind, namespace, name);
    const status = live?.status as
      | {
          conditions?: { type: string; status: string; reason?: string; message?: string }[];
          version?: string;
        }
      | undefined;
    return { ready: status?.conditions?.find((c) => c.type === "Ready"), status, live };
  };
  const waitReady = (kind: string, name: string, namespace = hubNs, timeoutMs = 240_000) =>
    waitUntil(
      `${kind} ${namespace}/${name} Ready`,
      async () => ((await readyCondition(kind, name, namespace)).ready?.status === "True" ? true : undefined),
      timeoutMs,
    );
  const deploymentsIn = async (client: KubeClient, namespace: string) =>
    (await client.list("apps/v1", "Deployment", { namespace })).items;

  it("installs Serving 1.21 with kourier on spoke-1 and Eventing on spoke-2; both become Ready with every Deployment Available", async () => {
    const started = Date.now();
    await hub.apply(
      cr("KnativeServing", "serving", {
        version: "1.21",
        ingress: { kourier: { enabled: true } },
        config: {
          network: {
            "domain-template": "{{.Name}}.{{.Namespace}}.{{.Domain}}",
            "ingress-class": "kourier.ingress.networking.knative.dev",
          },
        },
        clusterProfileRef: { name: spoke1.name, namespace: sandbox.clusterProfileNamespace },
      }),
    );
    await hub.apply(
      cr("KnativeEventing", "eventing", {
        version: "1.21",
        clusterProfileRef: { name: spoke2.name, namespace: sandbox.clusterProfileNamespace },
      }),
    );
    await Promise.all([
      waitReady("KnativeServing", "serving").then(() => (timings.servingReadyMs = Date.now() - started)),
      waitReady("KnativeEventing", "eventing").then(() => (timings.eventingReadyMs = Date.now() - started)),
    ]);

    const serving = await deploymentsIn(spokeOne, "knative-serving");
    expect(serving.map((d) => d.metadata.name)).toEqual(
      expect.arrayContaining([
        "activator",
        "autoscaler",
        "controller",
        "webhook",
        "3scale-kourier-gateway",
        "net-kourier-controller",
      ]),
    );
    expect(serving.every(isDeploymentAvailable)).toBe(true);
    const eventing = await deploymentsIn(spokeTwo, "knative-eventing");
    expect(eventing.map((d) => d.metadata.name)).toEqual(
      expect.arrayContaining(["eventing-controller", "eventing-webhook"]),
    );
    expect(eventing.every(isDeploymentAvailable)).toBe(true);
    // Nothing of Serving reached spoke-2 or of Eventing spoke-1.
    expect(await deploymentsIn(spokeTwo, "knative-serving")).toEqual([]);
    expect(await deploymentsIn(spokeOne, "knative-eventing")).toEqual([]);

    const { status } = await readyCondition("KnativeServing", "serving");
    expect(status?.version).toBe("1.21.3");
    for (const type of [
      "TargetClusterResolved",
      "InstallSucceeded",
      "DeploymentsAvailable",
      "VersionMigrationEligible",
      "DependenciesInstalled",
    ]) {
      expect(status?.conditions?.find((c) => c.type === type)?.status, type).toBe("True");
    }

    // The anchor, as upstream names and marks it, owns the namespace-scoped objects.
    const anchor = await spokeOne.get(
      "v1",
      "ConfigMap",
      "knative-serving",
      anchorName({ kind: "KnativeServing", name: "serving" }),
    );
    expect(anchor?.metadata.name).toBe("knativeserving-serving-root-owner");
    expect(anchor?.metadata.annotations?.["operator.knative.dev/protected"]).toBe("true");
    const controller = serving.find((d) => d.metadata.name === "controller")!;
    expect(controller.metadata.ownerReferences?.[0]).toMatchObject({
      kind: "ConfigMap",
      name: anchor?.metadata.name,
      uid: anchor?.metadata.uid,
    });
    const config = await spokeOne.get("v1", "ConfigMap", "knative-serving", "config-network");
    expect(dataOf(config)["domain-template"]).toBe("{{.Name}}.{{.Namespace}}.{{.Domain}}");
    expect(dataOf(config)["ingress-class"]).toBe("kourier.ingress.networking.knative.dev");
    timings.servingObjects = decodeInventory(anchor).length;
  });

  it("a no-op reconcile writes nothing to the spoke or the hub", async () => {
    const before = await spokeWriteCount(spoke1);
    const seen = reports.length;
    reconciler.controller.enqueue({ kind: "KnativeServing", namespace: hubNs, name: "serving" });
    const report = await waitUntil("a reconcile", async () =>
      reports.slice(seen).find((r) => r.name === "serving"),
    );
    await reconciler.controller.queue.idle();
    expect(report.error).toBeUndefined();
    expect(report.writes).toBe(0);
    expect(report.statusWritten).toBe(false);
    expect(await spokeWriteCount(spoke1)).toBe(before);
    timings.noOpReconcileMs = report.durationMs;
    timings.noOpRequests = report.requests;
    timings.installRequests = reports
      .slice(0, seen)
      .filter((r) => r.name === "serving")
      .reduce((sum, r) => sum + r.requests, 0);
    timings.installWrites = reports
      .slice(0, seen)
      .filter((r) => r.name === "serving")
      .reduce((sum, r) => sum + r.writes, 0);
  });

  it("config and registry changes reach the spoke", async () => {
    const applies = await applyWrites(spoke1);
    await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", hubNs, "serving", {
      spec: {
        config: {
          network: { "domain-template": "{{.Name}}-{{.Namespace}}.{{.Domain}}" },
          autoscaler: { "enable-scale-to-zero": "false" },
        },
        registry: { override: { controller: "registry.example/knative/controller:pinned" } },
      },
    });
    await waitUntil("config and image on spoke-1", async () => {
      const network = await spokeOne.get("v1", "ConfigMap", "knative-serving", "config-network");
      const autoscaler = await spokeOne.get("v1", "ConfigMap", "knative-serving", "config-autoscaler");
      const controller = await spokeOne.get("apps/v1", "Deployment", "knative-serving", "controller");
      const spec = controller?.spec as
        | { template: { spec: { containers: { image: string }[] } } }
        | undefined;
      const image = spec?.template.spec.containers[0]?.image;
      return dataOf(network)["domain-template"] === "{{.Name}}-{{.Namespace}}.{{.Domain}}" &&
        dataOf(autoscaler)["enable-scale-to-zero"] === "false" &&
        image === "registry.example/knative/controller:pinned"
        ? true
        : undefined;
    });
    await waitReady("KnativeServing", "serving");
    // Only what changed was applied: a handful of objects, not the whole release.
    expect((await applyWrites(spoke1)) - applies).toBeLessThanOrEqual(6);
  });

  it("a Deployment deleted by hand on the spoke comes back and is counted as drift", async () => {
    await spokeOne.delete("apps/v1", "Deployment", "knative-serving", "activator");
    const seen = reports.length;
    reconciler.controller.enqueue({ kind: "KnativeServing", namespace: hubNs, name: "serving" });
    const report = await waitUntil("the drift reconcile", async () =>
      reports.slice(seen).find((r) => r.name === "serving"),
    );
    expect(report.drift).toBeGreaterThanOrEqual(1);
    await waitUntil("activator back and Available", async () => {
      const d = await spokeOne.get("apps/v1", "Deployment", "knative-serving", "activator");
      return d && isDeploymentAvailable(d) ? true : undefined;
    });
  });

  it("a jump of more than one minor is refused and nothing is touched", async () => {
    // Eventing 1.21.4 is installed on spoke-2. A CR that now asks for 1.23 is two minors away: refused,
    // and the spoke sees no write. (Each step of the window, one minor at a time: upgrade-window.test.ts.)
    await waitReady("KnativeEventing", "eventing");
    await reconciler.controller.queue.idle();
    const writesBefore = await applyWrites(spoke2);
    await hub.mergePatch(OPERATOR_API_VERSION, "KnativeEventing", hubNs, "eventing", {
      spec: { version: "1.23" },
    });
    const refusal = await waitUntil("VersionMigrationEligible=False", async () => {
      const { status } = await readyCondition("KnativeEventing", "eventing");
      return status?.conditions?.find((c) => c.type === "VersionMigrationEligible" && c.status === "False");
    });
    expect(refusal.message).toContain("multiple MINOR versions");
    expect(refusal.message).toContain("v1.21.4");
    expect((await readyCondition("KnativeEventing", "eventing")).ready?.status).toBe("False");
    await reconciler.controller.queue.idle();
    expect(await applyWrites(spoke2)).toBe(writesBefore);
  });

  it("deleting the CR removes the anchor, the namespaced objects (real GC) and the cluster-scoped ones; CRDs stay", async () => {
    const anchor = await spokeOne.get("v1", "ConfigMap", "knative-serving", SERVING_ANCHOR);
    const inventory = decodeInventory(anchor);
    const clusterScoped = inventory.filter(
      (r) => r.namespace === "" && r.kind !== "CustomResourceDefinition" && r.kind !== "Namespace",
    );
    expect(clusterScoped.length).toBeGreaterThan(5);
    await hub.delete(OPERATOR_API_VERSION, "KnativeServing", hubNs, "serving");
    await waitUntil("the hub CR gone (finalizer done)", async () =>
      (await hub.get(OPERATOR_API_VERSION, "KnativeServing", hubNs, "serving")) ? undefined : true,
    );
    expect(await spokeOne.get("v1", "ConfigMap", "knative-serving", SERVING_ANCHOR)).toBeUndefined();
    for (const ref of clusterScoped) {
      expect(
        await spokeOne.get(ref.apiVersion, ref.kind, undefined, ref.name),
        `${ref.kind} ${ref.name}`,
      ).toBeUndefined();
    }
    // Everything namespaced that the anchor owned goes through the spoke's garbage collector.
    const owned = async () => {
      const selector = {
        namespace: "knative-serving",
        labelSelector: "operator.knative.dev/cr-name=serving",
      };
      const [deployments, configMaps, services] = await Promise.all([
        spokeOne.list("apps/v1", "Deployment", selector),
        spokeOne.list("v1", "ConfigMap", selector),
        spokeOne.list("v1", "Service", selector),
      ]);
      return deployments.items.length + configMaps.items.length + services.items.length;
    };
    expect(await owned()).toBeGreaterThan(0);
    await waitUntil(
      "namespaced objects garbage-collected",
      async () => ((await owned()) === 0 ? true : undefined),
      120_000,
    );
    expect(
      await spokeOne.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        undefined,
        "services.serving.knative.dev",
      ),
    ).toBeDefined();
  });

  it("a CR whose spoke is unreachable is not wedged: the condition says how to release it, the annotation does", async () => {
    // A healthy-looking ClusterProfile whose server answers nothing (port 9 on loopback refuses at once).
    const dir = sandbox.hub.caFile.replace(/ca\.crt$/, "");
    const admin = {
      server: sandbox.hub.server,
      caFile: sandbox.hub.caFile,
      certFile: `${dir}admin.crt`,
      keyFile: `${dir}admin.key`,
    };
    const gone = { ...spoke1, name: "reconciler-gone", server: "https://127.0.0.1:9" };
    await putClusterProfile(admin, sandbox.clusterProfileNamespace, gone.name, clusterProfileStatus(gone));
    await hub.apply(
      cr("KnativeServing", "stranded", {
        clusterProfileRef: { name: gone.name, namespace: sandbox.clusterProfileNamespace },
      }),
    );
    await waitUntil("the finalizer on the CR", async () => {
      const live = await hub.get(OPERATOR_API_VERSION, "KnativeServing", hubNs, "stranded");
      return (live?.metadata.finalizers as string[] | undefined)?.includes(FINALIZERS.KnativeServing)
        ? true
        : undefined;
    });
    await hub.delete(OPERATOR_API_VERSION, "KnativeServing", hubNs, "stranded");
    const condition = await waitUntil("TargetClusterResolved=False with the way out", async () => {
      const { status } = await readyCondition("KnativeServing", "stranded");
      const target = status?.conditions?.find((c) => c.type === "TargetClusterResolved");
      return target?.status === "False" && target.message?.includes(ABANDON_CLEANUP_ANNOTATION)
        ? target
        : undefined;
    });
    expect(condition.reason).toBe("AccessProviderFailed"); // no credential Secret exists for reconciler-gone
    expect(condition.message).toContain(
      `Cleanup of ${sandbox.clusterProfileNamespace}/reconciler-gone is retried with backoff`,
    );
    expect(await hub.get(OPERATOR_API_VERSION, "KnativeServing", hubNs, "stranded")).toBeDefined(); // retried, not dropped
    await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", hubNs, "stranded", {
      metadata: { annotations: { [ABANDON_CLEANUP_ANNOTATION]: "true" } },
    });
    await waitUntil("the CR released", async () =>
      (await hub.get(OPERATOR_API_VERSION, "KnativeServing", hubNs, "stranded")) ? undefined : true,
    );
    await hub.delete(
      "multicluster.x-k8s.io/v1alpha1",
      "ClusterProfile",
      sandbox.clusterProfileNamespace,
      gone.name,
    );
  });

  it("a CR without clusterProfileRef installs on the hub itself", async () => {
    await ensureNamespace(hub, "knative-eventing");
    await hub.apply({
      apiVersion: OPERATOR_API_VERSION,
      kind: "KnativeEventing",
      metadata: { name: "local", namespace: "knative-eventing" },
      spec: { version: "1.22" },
    });
    await waitReady("KnativeEventing", "local", "knative-eventing");
    const deployments = await deploymentsIn(hub, "knative-eventing");
    expect(deployments.map((d) => d.metadata.name)).toContain("eventing-controller");
    expect(deployments.every(isDeploymentAvailable)).toBe(true);
    const owner = deployments[0]!.metadata.ownerReferences?.[0];
    expect(owner).toMatchObject({ kind: "KnativeEventing", name: "local" }); // locally the CR owns the install
    await hub.delete(OPERATOR_API_VERSION, "KnativeEventing", "knative-eventing", "local");
    await waitUntil("local CR gone", async () =>
      (await hub.get(OPERATOR_API_VERSION, "KnativeEventing", "knative-eventing", "local"))
        ? undefined
        : true,
    );
  });
});
