import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTargetResolver } from "../../../src/access/target.ts";
import { type KnativeResource, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { renderInstall } from "../../../src/install/desired.ts";
import { isDeploymentAvailable } from "../../../src/install/health.ts";
import { anchorName } from "../../../src/install/identity.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { liveView } from "../../../src/plan/cluster-view.ts";
import type { Reconciler } from "../../../src/reconcile/start.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import {
  anchorNamespaces,
  deleteCrs,
  hubCr,
  KOURIER,
  startFleet,
  startUpstream,
  waitFleetReady,
} from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import {
  prepareUpstreamHub,
  type UpstreamOperator,
  waitConditions,
} from "../../support/upstream-operator.ts";
import { waitUntil } from "../../support/wait.ts";

// Hand-over 1: the real upstream operator (knative/operator b4f2c2549cd0, which installs into the hub CR's
// namespace on the spoke) installs Serving 1.23 with Kourier and Eventing 1.23, the newest it ships, from hub
// CRs in `team-a`; it is stopped; knative-fleet takes the same CRs over. Bound: Ready within 60 s of
// knative-fleet starting (the Deployments are already Available, so it is one apply pass and one health
// check); the figures are printed.

const sandbox = loadSandbox();
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const hubNs = "team-a";
const TAKE_OVER_BOUND_MS = 60_000;

const serving = hubCr(sandbox, "KnativeServing", hubNs, spoke1.name, { version: "1.23", ...KOURIER });
const eventing = hubCr(sandbox, "KnativeEventing", hubNs, spoke2.name, { version: "1.23" });

describe("hand-over from the upstream operator to knative-fleet", () => {
  let hub: KubeClient;
  let spokeOne: KubeClient;
  let spokeTwo: KubeClient;
  let upstream: UpstreamOperator | undefined;
  let fleet: Awaited<ReturnType<typeof startFleet>> | undefined;
  const figures: Record<string, number> = {};

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    spokeOne = adminClient(spoke1);
    spokeTwo = adminClient(spoke2);
    // The sandbox is shared: whatever an earlier file left in the canonical namespaces goes first, so that
    // "nothing in the canonical namespace" speaks of this hand-over only.
    for (const [spoke, canonical] of [
      [spokeOne, "knative-serving"],
      [spokeTwo, "knative-eventing"],
    ] as const) {
      await spoke.delete("v1", "Namespace", undefined, canonical).catch(() => {});
      await waitUntil(
        `${canonical} gone`,
        async () => ((await spoke.get("v1", "Namespace", undefined, canonical)) ? undefined : true),
        180_000,
      );
    }
    await installFleetCrds(hub);
    await prepareUpstreamHub(hub);
    await ensureNamespace(hub, hubNs);
    upstream = await startUpstream(sandbox);
    await hub.apply(serving);
    await hub.apply(eventing);
    await Promise.all([
      waitConditions(hub, "KnativeServing", hubNs, "serving", { Ready: "True" }),
      waitConditions(hub, "KnativeEventing", hubNs, "eventing", { Ready: "True" }),
    ]);
    expect(upstream.errors([hubNs])).toEqual([]);
    await upstream.stop();
  });

  afterAll(async () => {
    if (!fleet) fleet = await startFleet(sandbox).catch(() => undefined);
    await deleteCrs(hub, [serving, eventing]).catch(() => {});
    await (fleet?.reconciler as Reconciler | undefined)?.stop();
    await upstream?.stop();
    console.log("upstream -> knative-fleet figures:", JSON.stringify(figures));
  });

  it("knative-fleet takes the same CRs over: Ready in bound, with no error (no immutable field) on the way", async () => {
    const started = Date.now();
    fleet = await startFleet(sandbox);
    const [servingReady, eventingReady] = await Promise.all([
      waitFleetReady(fleet.reports, "KnativeServing", hubNs, "serving", TAKE_OVER_BOUND_MS).then((r) => {
        figures.servingReadyMs = Date.now() - started;
        return r;
      }),
      waitFleetReady(fleet.reports, "KnativeEventing", hubNs, "eventing", TAKE_OVER_BOUND_MS).then((r) => {
        figures.eventingReadyMs = Date.now() - started;
        return r;
      }),
    ]);
    expect(fleet.reports.filter((r) => r.error).map((r) => `${r.name}: ${r.error?.message}`)).toEqual([]);
    const upTo = (ready: typeof servingReady) => fleet!.reports.slice(0, fleet!.reports.indexOf(ready) + 1);
    figures.servingSpokeRequests = upTo(servingReady)
      .filter((r) => r.name === "serving")
      .reduce((n, r) => n + r.requests, 0);
    figures.servingSpokeWrites = upTo(servingReady)
      .filter((r) => r.name === "serving")
      .reduce((n, r) => n + r.writes, 0);
    figures.eventingSpokeRequests = upTo(eventingReady)
      .filter((r) => r.name === "eventing")
      .reduce((n, r) => n + r.requests, 0);
    const status = await waitConditions(hub, "KnativeServing", hubNs, "serving", {
      Ready: "True",
      InstallSucceeded: "True",
    });
    expect(JSON.stringify(status)).not.toMatch(/immutable/);
  });

  it("one install on each spoke, where upstream put it; nothing in the canonical namespace", async () => {
    expect(await anchorNamespaces(spokeOne, "KnativeServing", "serving")).toEqual([hubNs]);
    expect(await anchorNamespaces(spokeTwo, "KnativeEventing", "eventing")).toEqual([hubNs]);
    for (const [spoke, canonical] of [
      [spokeOne, "knative-serving"],
      [spokeTwo, "knative-eventing"],
    ] as const) {
      expect((await spoke.list("apps/v1", "Deployment", { namespace: canonical })).items).toEqual([]);
      expect(
        (await spoke.list("v1", "ConfigMap", { namespace: canonical })).items.map((c) => c.metadata.name),
      ).not.toContain("config-network");
    }
    const deployments = (await spokeOne.list("apps/v1", "Deployment", { namespace: hubNs })).items;
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual([
      "3scale-kourier-gateway",
      "activator",
      "autoscaler",
      "autoscaler-hpa",
      "controller",
      "net-kourier-controller",
      "webhook",
    ]);
    expect(deployments.every(isDeploymentAvailable)).toBe(true);
  });

  it("no orphan: every object of the install is knative-fleet's now and owned by the one anchor", async () => {
    const anchor = await spokeOne.get(
      "v1",
      "ConfigMap",
      hubNs,
      anchorName({ kind: "KnativeServing", name: "serving" }),
    );
    expect(anchor?.metadata.labels?.["app.kubernetes.io/managed-by"]).toBe("knative-fleet");
    for (const kind of [
      ["apps/v1", "Deployment"],
      ["v1", "ConfigMap"],
      ["v1", "Service"],
      ["batch/v1", "Job"],
    ] as const) {
      const items = (await spokeOne.list(kind[0], kind[1], { namespace: hubNs })).items.filter(
        (o) =>
          o.metadata.labels?.["app.kubernetes.io/name"] === "knative-serving" &&
          o.metadata.name !== anchor?.metadata.name,
      );
      expect(items.length, kind[1]).toBeGreaterThan(0);
      for (const item of items) {
        expect(
          item.metadata.ownerReferences?.map((r) => r.uid),
          `${kind[1]} ${item.metadata.name}`,
        ).toEqual([anchor?.metadata.uid]);
        expect(
          item.metadata.labels?.["operator.knative.dev/cr-name"],
          `${kind[1]} ${item.metadata.name}`,
        ).toBe("serving");
      }
    }
    // The post-install Jobs upstream created are the ones kept: same template, no replacement needed.
    const jobs = (await spokeOne.list("batch/v1", "Job", { namespace: hubNs })).items;
    expect(jobs.map((j) => j.metadata.name).sort()).toEqual([
      "cleanup-serving-serving-1.23.0",
      "storage-version-migration-serving-serving-1.23.0",
    ]);
  });

  it("plan, live, says the install is adopted in the hub CR's namespace", async () => {
    const targets = createTargetResolver(hub, fleet!.reconciler.access);
    const resource = serving as unknown as KnativeResource;
    const view = await liveView({ hub, targets }, resource, undefined);
    expect(view).toMatchObject({ adopted: true, namespace: hubNs });
    // The dry run works where the install is: the converged install there has nothing to create or prune.
    const release = await new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() })).load(resource);
    const pass = await view.dryRun(resource, renderInstall(resource, release, view.namespace), 8);
    expect(pass.plan.setup).toEqual([]);
    expect(pass.plan.create.map((o) => o.metadata.name)).toEqual([]);
    expect(pass.plan.prune).toEqual([]);
  });

  it("the spoke namespace carries the release's Namespace labels", async () => {
    const namespace = await spokeOne.get("v1", "Namespace", undefined, hubNs);
    expect(namespace?.metadata.labels).toMatchObject({
      "app.kubernetes.io/name": "knative-serving",
      "app.kubernetes.io/version": "1.23.0",
      "networking.knative.dev/ingress-provider": "kourier",
    });
  });

  it("status.manifests stays readable by upstream: the kodata directories it wrote itself", async () => {
    const live = await hub.get(OPERATOR_API_VERSION, "KnativeServing", hubNs, "serving");
    const manifests = (live?.status as { manifests?: string[] } | undefined)?.manifests ?? [];
    expect(manifests).toHaveLength(2);
    expect(manifests[0]).toMatch(/\/knative-serving\/1\.23\.0$/);
    expect(manifests[1]).toMatch(/\/ingress\/1\.23\/kourier$/);
  });
});
