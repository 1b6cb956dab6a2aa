import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { anchorName } from "../../../src/install/identity.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { ReconcileReport } from "../../../src/reconcile/controller.ts";
import type { Reconciler } from "../../../src/reconcile/start.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { base64, testdata } from "../../support/access-pki.ts";
import { deleteCrs, forceDeleteCrs, hubCr, KOURIER, startFleet } from "../../support/handover.ts";
import { adminClient, copyClusterProfile, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { type LoopbackProxy, startClusterProxy } from "../../support/loopback-proxies.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";
import { spokeWriteCount } from "./metrics.ts";

// A spoke whose Kubernetes is older than the release needs gets nothing, on real servers: the sandbox's spokes
// run v1.35.4, so a loopback proxy in front of spoke-1 (OCM cluster-proxy's shape, everything else passed
// through) answers /version as a v1.33 cluster would. Knative 1.22 needs v1.34.0.

const sandbox = loadSandbox();
const spoke = sandbox.spokes[0]!;
const NAMESPACE = "kubernetes-version-test";
const CREDENTIALS = "kubernetes-version-test-credentials";
const CLUSTER_PROFILE_API_VERSION = "multicluster.x-k8s.io/v1alpha1";

/** GET /version of a Kubernetes `gitVersion` cluster. */
const versionAnswer = (gitVersion: string) => {
  const [major, minor] = gitVersion.slice(1).split(".");
  return { status: 200, body: { major, minor, gitVersion, platform: "linux/amd64" } };
};

describe("a spoke below the release's minimum Kubernetes", () => {
  let hub: KubeClient;
  let spokeClient: KubeClient;
  let reconciler: Reconciler;
  let reports: ReconcileReport[];
  let proxy: LoopbackProxy;
  let reported = "v1.33.4";
  const cr = hubCr(sandbox, "KnativeServing", NAMESPACE, spoke.name, { version: "1.22", ...KOURIER });
  cr.spec = { ...(cr.spec as object), clusterProfileRef: { name: spoke.name, namespace: NAMESPACE } };
  const condition = async (type: string) => {
    const live = await hub.get(OPERATOR_API_VERSION, "KnativeServing", NAMESPACE, "serving");
    const status = live?.status as
      | {
          conditions?: { type: string; status: string; reason?: string; message?: string }[];
          version?: string;
        }
      | undefined;
    return { found: status?.conditions?.find((c) => c.type === type), version: status?.version };
  };

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    spokeClient = adminClient(spoke);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NAMESPACE);
    await cleanSpokes(sandbox, [spoke.name]);
    proxy = await startClusterProxy({
      key: testdata("server.key"),
      cert: testdata("server.crt"),
      routes: { [spoke.name]: spoke.server },
      upstreamCa: Buffer.from(spoke.caData, "base64").toString("utf8"),
      answer: (method, path) =>
        method === "GET" && path === "/version" ? versionAnswer(reported) : undefined,
    });
    await copyClusterProfile(
      hub,
      { namespace: sandbox.clusterProfileNamespace, name: spoke.name },
      NAMESPACE,
      {
        url: `${proxy.url}/${spoke.name}`,
        caData: base64(testdata("ca.crt")),
      },
      CREDENTIALS,
    );
    // The copy lives in a second ClusterProfile namespace: it reads credentials of its own.
    ({ reconciler, reports } = await startFleet(sandbox, {
      providerFile: sandbox.providerFile,
      credentialNamespaces: { [NAMESPACE]: CREDENTIALS },
    }));
  }, 120_000);

  afterAll(async () => {
    // Uninstalled by knative-fleet's own finalizer (cluster-scoped objects included), then forced if not.
    await deleteCrs(hub, [cr]).catch(() => forceDeleteCrs(hub, [cr]));
    await reconciler?.stop();
    await proxy?.close();
    await hub.delete(CLUSTER_PROFILE_API_VERSION, "ClusterProfile", NAMESPACE, spoke.name);
    await hub.delete("v1", "Namespace", undefined, CREDENTIALS).catch(() => {});
    await cleanSpokes(sandbox, [spoke.name]);
  });

  it("gets nothing: InstallSucceeded says KubernetesVersionUnsupported with both versions, and it is retried", async () => {
    const writesBefore = await spokeWriteCount(spoke);
    await hub.apply(cr);
    const refused = await waitUntil("InstallSucceeded=False", async () => {
      const { found } = await condition("InstallSucceeded");
      return found?.status === "False" ? found : undefined;
    });
    expect(refused).toMatchObject({
      reason: "KubernetesVersionUnsupported",
      message:
        `Cluster ${NAMESPACE}/${spoke.name}: Kubernetes v1.33.4 is older than v1.34.0, the oldest Kubernetes ` +
        "Knative 1.22.1 runs on (knative.dev/pkg's minimum version check). Nothing is applied to it until it " +
        "is upgraded.",
    });
    expect((await condition("Ready")).found).toMatchObject({
      status: "False",
      reason: "KubernetesVersionUnsupported",
    });
    expect((await condition("TargetClusterResolved")).found?.status).toBe("True");
    // Retried with backoff: a second refusal, and still nothing on the spoke.
    await waitUntil("a second refusal", async () =>
      reports.filter((r) => r.namespace === NAMESPACE && r.error).length >= 2 ? true : undefined,
    );
    expect(await spokeWriteCount(spoke)).toBe(writesBefore);
    expect(await spokeClient.get("v1", "Namespace", undefined, "knative-serving")).toBeUndefined();
    // Each refusal read /version again, through the proxy: the kept version alone never refuses.
    expect(proxy.handled.filter((r) => r === `GET /${spoke.name}/version`).length).toBeGreaterThanOrEqual(3);
  });

  it("installs once the spoke reports a version at the minimum: the refusal's fresh read sees the upgrade", async () => {
    reported = "v1.34.0";
    await waitUntil(
      "Ready at 1.22.1",
      async () => {
        const { found, version } = await condition("Ready");
        return found?.status === "True" && version === "1.22.1" ? true : undefined;
      },
      240_000,
    );
    const anchor = anchorName({ kind: "KnativeServing", name: "serving" });
    expect(await spokeClient.get("v1", "ConfigMap", "knative-serving", anchor)).toBeDefined();
    expect((await condition("InstallSucceeded")).found?.status).toBe("True");
  });
});
