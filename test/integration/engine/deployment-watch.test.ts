import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccessPolicySchema } from "../../../src/access/policy.ts";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { ReconcileReport } from "../../../src/reconcile/controller.ts";
import { type Reconciler, startReconciler } from "../../../src/reconcile/start.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { base64, testdata } from "../../support/access-pki.ts";
import { deleteCrs, forceDeleteCrs, KOURIER } from "../../support/handover.ts";
import { adminClient, copyClusterProfile, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { type LoopbackProxy, startClusterProxy } from "../../support/loopback-proxies.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";

// Readiness while an install rolls out, on real spokes: the install's Deployments are watched, so the CR is
// re-checked when the last one is Available, long before the poll interval; the watch ends with the wait;
// and where a watch cannot be had (a proxy in front of the spoke refuses long-lived streams) the CR is
// polled every --remote-deployments-poll-interval, as upstream does.

const sandbox = loadSandbox();
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
/** Long enough that a Ready before it can only have come from the watch. */
const POLL_MS = 30_000;
const WATCHED = "rollout-watched";
const REFUSED = "rollout-refused";
const REFUSED_CREDENTIALS = "rollout-refused-credentials";

/** A quota that admits no pod: the Deployments of an install in its namespace never become Available. */
const NO_PODS: KubeObject = {
  apiVersion: "v1",
  kind: "ResourceQuota",
  metadata: { name: "no-pods", namespace: "knative-serving" },
  spec: { hard: { pods: "0" } },
};

const serving = (
  namespace: string,
  cluster: { namespace: string; name: string },
  more: Record<string, unknown> = {},
): KubeObject => ({
  apiVersion: OPERATOR_API_VERSION,
  kind: "KnativeServing",
  metadata: { name: "serving", namespace },
  spec: { version: "1.22", ...KOURIER, ...more, clusterProfileRef: cluster },
});

/**
 * The watched install's activator waits for a node carrying this label: its rollout ends when the test labels
 * a node, after the install pass, however fast the spoke is.
 */
const HELD = { "rollout-watch-test/held": "released" };

describe("readiness while an install rolls out", () => {
  let hub: KubeClient;
  let spokeOne: KubeClient;
  let spokeTwo: KubeClient;
  let reconciler: Reconciler;
  let proxy: LoopbackProxy;
  const reports: ReconcileReport[] = [];
  const warnings: string[] = [];
  const reportTimes = new Map<ReconcileReport, number>();
  const watchFailures = () => warnings.filter((w) => w.includes("watching Deployments failed"));
  const crs = [
    serving(
      WATCHED,
      { namespace: sandbox.clusterProfileNamespace, name: spoke1.name },
      { workloads: [{ name: "activator", nodeSelector: HELD }] },
    ),
    serving(REFUSED, { namespace: REFUSED, name: spoke2.name }),
  ];
  const passes = (namespace: string) => reports.filter((r) => r.namespace === namespace);

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    for (const ns of [WATCHED, REFUSED]) await ensureNamespace(hub, ns);
    // An install another test left on these spokes would be Ready at once: nothing would roll out.
    await cleanSpokes(sandbox, [spoke1.name, spoke2.name]);
    proxy = await startClusterProxy({
      key: testdata("server.key"),
      cert: testdata("server.crt"),
      routes: { [spoke2.name]: spoke2.server },
      upstreamCa: Buffer.from(spoke2.caData, "base64").toString("utf8"),
      answer: (method, path) =>
        method === "GET" && /[?&]watch=/.test(path)
          ? { status: 403, body: "refused by the proxy\n" }
          : undefined,
    });
    await copyClusterProfile(
      hub,
      { namespace: sandbox.clusterProfileNamespace, name: spoke2.name },
      REFUSED,
      {
        url: `${proxy.url}/${spoke2.name}`,
        caData: base64(testdata("ca.crt")),
      },
      REFUSED_CREDENTIALS,
    );
    // The reconciler's warnings, kept: the fallback says so in the log.
    const log = pino({ level: "warn" }, { write: (line: string) => warnings.push(line) });
    reconciler = await startReconciler({
      hub,
      providerFile: sandbox.providerFile,
      // spoke-2's copy in REFUSED is a second ClusterProfile namespace: it has credentials of its own.
      allowedClusterProfileNamespaces: [sandbox.clusterProfileNamespace, REFUSED],
      accessPolicy: AccessPolicySchema.parse({
        credentialNamespaces: {
          [sandbox.clusterProfileNamespace]: sandbox.clusterProfileNamespace,
          [REFUSED]: REFUSED_CREDENTIALS,
        },
      }),
      kodataDir: knativeReleasesDir(),
      pollIntervalMs: POLL_MS,
      resyncIntervalMs: 3_600_000,
      workers: 4,
      applyConcurrency: 8,
      log,
      onReconciled: (r) => {
        reports.push(r);
        reportTimes.set(r, performance.now());
      },
    });
    spokeOne = adminClient(spoke1);
    spokeTwo = adminClient(spoke2);
    await ensureNamespace(spokeTwo, "knative-serving");
    await spokeTwo.apply(NO_PODS);
    for (const cr of crs) await hub.apply(cr);
  }, 120_000);

  afterAll(async () => {
    await deleteCrs(hub, crs, 180_000).catch(async () => forceDeleteCrs(hub, crs));
    await spokeTwo?.delete("v1", "ResourceQuota", "knative-serving", "no-pods"); // later tests start pods there
    await spokeOne?.mergePatch("v1", "Node", undefined, `${spoke1.name}-node-0`, {
      metadata: { labels: { [Object.keys(HELD)[0]!]: null } },
    });
    await reconciler?.stop();
    await proxy?.close();
    await hub
      .delete("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", REFUSED, spoke2.name)
      .catch(() => {});
    await hub.delete("v1", "Namespace", undefined, REFUSED_CREDENTIALS).catch(() => {});
  }, 240_000);

  it("is reported as soon as the last Deployment is Available: woken by the watch, not the poll", async () => {
    const install = await waitUntil("the watched CR's install pass", async () => passes(WATCHED)[0], 240_000);
    // The activator cannot be scheduled yet: the install pass ends with the rollout in progress.
    expect(install.ready).toBe(false);
    const released = performance.now();
    await spokeOne.mergePatch("v1", "Node", undefined, `${spoke1.name}-node-0`, {
      metadata: { labels: HELD },
    });
    const ready = await waitUntil(
      "the watched CR Ready",
      async () => passes(WATCHED).find((r) => r.ready),
      240_000,
    );
    // The pass the watch woke finds the rollout done, long before the poll would have come.
    expect(reportTimes.get(ready)! - released).toBeGreaterThan(0);
    expect(reportTimes.get(ready)! - released).toBeLessThan(POLL_MS);
  }, 300_000);

  it("stops watching once the CR is Ready", async () => {
    await waitUntil("the watched CR Ready", async () => passes(WATCHED).find((r) => r.ready), 240_000);
    const watchesOnSpoke1 = async () => {
      const resolved = await reconciler.access.resolve({
        namespace: sandbox.clusterProfileNamespace,
        name: spoke1.name,
      });
      if (!resolved.ok) throw new Error(resolved.message);
      return resolved.spoke.connection.rest.requestCounts.get("WATCH") ?? 0;
    };
    // One watch per namespace the install has Deployments in, while it rolled out; none started since.
    const atReady = await watchesOnSpoke1();
    expect(atReady).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await watchesOnSpoke1()).toBe(atReady);
    expect(reconciler.deploymentWatches.watchCount).toBe(0);
  }, 300_000);

  it("falls back to polling every poll interval where the spoke's watch is refused", async () => {
    // The rollout on spoke-2 cannot finish (the quota admits no pod), so the CR keeps waiting.
    await waitUntil(
      "the refused watch reported",
      async () => (watchFailures().length > 0 ? true : undefined),
      240_000,
    );
    expect(watchFailures()[0]).toContain(`${REFUSED}/${spoke2.name}`);
    expect(proxy.handled.some((h) => /[?&]watch=/.test(h))).toBe(true);
    // The failed watch wakes the CR; a pass that then finds the rollout going on is followed by the next
    // one a poll interval later, with no watch started again.
    const failedAt = performance.now();
    const [afterFailure, next] = await waitUntil(
      "two passes after the failure",
      async () => {
        const later = passes(REFUSED).filter((r) => reportTimes.get(r)! >= failedAt - 1_000);
        return later.length >= 2 ? later : undefined;
      },
      POLL_MS * 3,
    );
    expect(afterFailure!.ready).toBe(false);
    expect(reportTimes.get(next!)! - reportTimes.get(afterFailure!)!).toBeGreaterThan(POLL_MS - 1_000);
    expect(proxy.handled.filter((h) => /\/deployments\?(.*&)?watch=/.test(h))).toHaveLength(1);
    expect(reconciler.deploymentWatches.watchCount).toBe(0);
    // A CRD Established wait there (CRDs the pass wrote) found its watch refused too, and went on polling.
    const crdWatches = proxy.handled.filter((h) => /\/customresourcedefinitions\?(.*&)?watch=/.test(h));
    expect(warnings.filter((w) => w.includes("watching CRDs failed"))).toHaveLength(crdWatches.length);
  }, 300_000);
});
