import { mkdtempSync, readFileSync } from "node:fs";
import { cp, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { CONFIRM_PRUNE_ANNOTATION, PRUNE_CONFIRMATION_CONFIGMAP } from "../../../src/api/labels.ts";
import { identityOf } from "../../../src/fleet/identity.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../../src/kube/object.ts";
import { pruneToken } from "../../../src/mirror/decide.ts";
import { loadServiceConfig } from "../../../src/service/config.ts";
import type { FleetService } from "../../../src/service/service.ts";
import { CLUSTER_PROFILE_NAMESPACE, loadSandbox } from "../../sandbox/index.ts";
import { runCli } from "../../support/cli.ts";
import { startServiceOnSandbox, writeServiceConfig } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { knativeReleasesDir, repoRoot, sharedDir } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// One placement file (the fleet-example's worked example) against a hub with four spokes whose
// ClusterProfiles carry different labels and status.properties. Needs a sandbox with at least 4 spokes.

const sandbox = loadSandbox();
const REPO = "placement-fleet";
const NS = "knative-fleet";
const PROFILES = CLUSTER_PROFILE_NAMESPACE;
const PLACEMENT_PATH = "clusters/placements/knative-serving.yaml";
/**
 * The departure grace period of this test: shorter than the 5m default so that a relabelled cluster's
 * prune is seen within the test, and still longer than the 30 s a ClusterProfile is deleted for below.
 */
const GRACE_SECONDS = 45;

/** What each spoke's ClusterProfile says about it: the placement selects spoke-1 (prod, eu) and spoke-3. */
const IDENTITY: Record<string, { labels: Record<string, string>; properties: Record<string, string> }> = {
  "spoke-1": { labels: { env: "prod" }, properties: { location: "eu-west" } },
  "spoke-2": { labels: { env: "prod" }, properties: { location: "us-east" } },
  "spoke-3": { labels: { env: "staging" }, properties: { location: "eu-north" } },
  "spoke-4": { labels: { env: "dev" }, properties: { location: "eu-west" } },
};

describe("placements: one file for many clusters, following the inventory", () => {
  let git: GitServer;
  let hub: KubeClient;
  let service: FleetService;
  const figures: Record<string, number> = {};
  const spoke = (name: string) => adminClient(sandbox.spokes.find((s) => s.name === name)!);

  const hubCr = (kind: string, name: string) => hub.get(OPERATOR_API_VERSION, kind, NS, name);
  const isReady = (cr: KubeObject | undefined) =>
    (cr?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.some(
      (c) => c.type === "Ready" && c.status === "True",
    );
  const waitReady = (name: string) =>
    waitUntil(
      `KnativeServing ${name} Ready`,
      async () => (isReady(await hubCr("KnativeServing", name)) ? true : undefined),
      300_000,
    );
  const servingNames = async () =>
    (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items
      .map((cr) => cr.metadata.name)
      .sort();
  const configMap = async (cluster: string, name: string) =>
    ((await spoke(cluster).get("v1", "ConfigMap", "knative-serving", name))?.data ?? {}) as Record<
      string,
      string
    >;
  const statusReadme = () => git.readFile(REPO, "main", "status/README.md").catch((e) => `ERR ${e.message}`);

  /** Sets a spoke's ClusterProfile labels and status.properties, as its cluster manager would. */
  async function describeCluster(name: string, identity = IDENTITY[name]!) {
    const path = `/apis/multicluster.x-k8s.io/v1alpha1/namespaces/${PROFILES}/clusterprofiles/${name}`;
    await hub.rest.request({
      method: "PATCH",
      path,
      contentType: "application/merge-patch+json",
      body: { metadata: { labels: { env: identity.labels.env } } },
    });
    await hub.rest.request({
      method: "PATCH",
      path: `${path}/status`,
      contentType: "application/merge-patch+json",
      body: {
        status: {
          properties: Object.entries(identity.properties).map(([n, value]) => ({
            name: n,
            value,
            lastObservedTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
          })),
        },
      },
    });
  }

  beforeAll(async () => {
    expect(sandbox.spokes.length, "this test needs a sandbox with --spokes 4").toBeGreaterThanOrEqual(4);
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    const decisionCrd = parseAllDocuments(
      readFileSync(join(sharedDir(), "crds", "multicluster.x-k8s.io_placementdecisions.yaml"), "utf8"),
    )[0]!.toJSON() as KubeObject;
    await hub.apply(decisionCrd);
    await waitUntil("PlacementDecision CRD served", async () =>
      (await hub.list("multicluster.x-k8s.io/v1alpha1", "PlacementDecision").catch(() => undefined))
        ? true
        : undefined,
    );
    await ensureNamespace(hub, NS);
    // A clean slate: what an earlier, interrupted run installed (or confirmed) must not pass for this run's.
    await hub.delete("v1", "ConfigMap", NS, PRUNE_CONFIRMATION_CONFIGMAP);
    for (const name of Object.keys(IDENTITY)) {
      const client = spoke(name);
      for (const ns of ["knative-serving", "knative-eventing"])
        await client.delete("v1", "Namespace", undefined, ns);
    }
    for (const name of Object.keys(IDENTITY)) {
      for (const ns of ["knative-serving", "knative-eventing"]) {
        await waitUntil(
          `${name} namespace ${ns} gone`,
          async () => ((await spoke(name).get("v1", "Namespace", undefined, ns)) ? undefined : true),
          120_000,
        );
      }
    }
    for (const name of Object.keys(IDENTITY)) await describeCluster(name);

    // The repository: the fleet-example's worked placement, in the folder the service reads.
    const dir = mkdtempSync(join(tmpdir(), "placement-fleet-"));
    await mkdir(join(dir, "clusters", "placements"), { recursive: true });
    await cp(
      join(repoRoot, "fleet-example", "placements", "knative-serving.yaml"),
      join(dir, PLACEMENT_PATH),
    );
    git = await startGitServer();
    await git.createRepo(REPO, dir);
    const config = loadServiceConfig(writeServiceConfig({ repositoryUrl: git.url(REPO) }));
    service = await startServiceOnSandbox(
      sandbox,
      { ...config, placements: { departureGracePeriod: `${GRACE_SECONDS}s` } },
      "placement-test",
    );
  }, 120_000);

  afterAll(async () => {
    await service?.stop();
    await hub.delete("v1", "ConfigMap", NS, PRUNE_CONFIRMATION_CONFIGMAP).catch(() => {});
    for (const kind of ["KnativeServing", "KnativeEventing"]) {
      for (const cr of (await hub.list(OPERATOR_API_VERSION, kind, { namespace: NS })).items) {
        await hub
          .mergePatch(OPERATOR_API_VERSION, kind, NS, nameOf(cr), { metadata: { finalizers: null } })
          .catch(() => {});
        await hub.delete(OPERATOR_API_VERSION, kind, NS, nameOf(cr)).catch(() => {});
      }
    }
    for (const name of Object.keys(IDENTITY)) {
      await hub
        .mergePatch("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", PROFILES, name, {
          metadata: { labels: { env: null } },
        })
        .catch(() => {});
    }
    await git?.close();
    console.log("placement figures:", JSON.stringify(figures));
  });

  it("one placement file installs Serving on the matching spokes only, each override on its own cluster", async () => {
    const started = Date.now();
    await waitUntil("the placement's CRs on the hub", async () =>
      (await servingNames()).join() === "serving-spoke-1,serving-spoke-3" ? true : undefined,
    );
    const cr = await hubCr("KnativeServing", "serving-spoke-1");
    expect(cr?.metadata.annotations).toMatchObject({
      "fleet.knative.dev/source-path": PLACEMENT_PATH,
      "fleet.knative.dev/source-cluster": `${PROFILES}/spoke-1`,
    });
    expect(cr?.metadata.labels?.["fleet.knative.dev/placement"]).toBe("serving");
    await Promise.all([waitReady("serving-spoke-1"), waitReady("serving-spoke-3")]);
    figures.placementReadyMs = Date.now() - started;
    // The staging override reaches spoke-3 only; the per-cluster override spoke-1 only.
    expect((await configMap("spoke-3", "config-autoscaler"))["enable-scale-to-zero"]).toBe("false");
    expect((await configMap("spoke-1", "config-autoscaler"))["enable-scale-to-zero"]).toBe("true");
    expect(await configMap("spoke-1", "config-domain")).toHaveProperty(["spoke-1.example.com"]);
    expect(await configMap("spoke-3", "config-domain")).not.toHaveProperty(["spoke-1.example.com"]);
    // Spokes the placement does not select get nothing.
    for (const other of ["spoke-2", "spoke-4"]) {
      expect(await spoke(other).get("apps/v1", "Deployment", "knative-serving", "activator")).toBeUndefined();
    }
    const readme = await waitUntil("the status rollup", async () => {
      const text = await statusReadme();
      return text.includes("## Placements") &&
        /KnativeServingPlacement knative-fleet\/serving \| clusters\/placements\/knative-serving\.yaml:\d+ \| 2 \| 2 \| 0 \|/.test(
          text,
        )
        ? text
        : undefined;
    });
    expect(readme).toContain("serving-spoke-3");
  });

  it("plan reads the hub's ClusterProfiles live and shows each selected cluster's merged spec", async () => {
    const { code, stdout } = await runCli(
      "plan",
      "--kodata",
      knativeReleasesDir(),
      "--repo",
      git.url(REPO),
      "--base",
      "main",
      "--head",
      "main",
      "--kubeconfig",
      sandbox.hub.adminKubeconfig,
    );
    expect(code).toBe(0);
    expect(stdout).toContain("Selection read from the hub's ClusterProfiles and PlacementDecisions.");
    expect(stdout).toContain("- selects after the merge: `fleet-system/spoke-1`, `fleet-system/spoke-3`");
    expect(stdout).toContain("fleet-system/spoke-3 → serving-spoke-3 (overrides 0)");
  });

  it("an override null: the key is gone on the hub CR and the spoke's ConfigMap", async () => {
    const example = await git.readFile(REPO, "main", PLACEMENT_PATH);
    expect(example).toContain('enable-scale-to-zero: "true"');
    // RFC 7386 applied onto the template: the null deletes what the template set, for spoke-1 only.
    await git.pushChange(REPO, {
      files: {
        [PLACEMENT_PATH]: `${example}    - clusters:\n        - namespace: ${PROFILES}\n          name: spoke-1\n      patch:\n        config:\n          autoscaler: null\n`,
      },
      message: "spoke-1 runs the release's autoscaler defaults",
    });
    await service.syncNow();
    const started = Date.now();
    const cr = await waitUntil("serving-spoke-1 without config.autoscaler", async () => {
      const object = await hubCr("KnativeServing", "serving-spoke-1");
      const config = (object?.spec as { config?: Record<string, unknown> } | undefined)?.config;
      return config && !("autoscaler" in config) ? object : undefined;
    });
    expect((cr!.spec as { config: Record<string, unknown> }).config).toEqual({
      network: { "ingress-class": "kourier.ingress.networking.knative.dev" },
      domain: { "spoke-1.example.com": "" },
    });
    await waitUntil(
      "spoke-1's config-autoscaler without the template's key",
      async () =>
        !("enable-scale-to-zero" in (await configMap("spoke-1", "config-autoscaler"))) ? true : undefined,
      120_000,
    );
    figures.overrideNullToSpokeMs = Date.now() - started;
    // The other cluster keeps the template's autoscaler section with its own override.
    expect((await hubCr("KnativeServing", "serving-spoke-3"))?.spec).toMatchObject({
      config: { autoscaler: { "enable-scale-to-zero": "false" } },
    });
    expect((await configMap("spoke-3", "config-autoscaler"))["enable-scale-to-zero"]).toBe("false");
  });

  it("relabelling ClusterProfiles adds a cluster at once and removes one after the grace period, with no Git change", async () => {
    const commitsBefore = (await git.log(REPO)).filter(
      (entry) => entry.authorName !== "knative-fleet",
    ).length;
    const started = Date.now();
    await describeCluster("spoke-4", { labels: { env: "staging" }, properties: { location: "eu-west" } });
    await describeCluster("spoke-3", { labels: { env: "dev" }, properties: { location: "eu-north" } });
    await waitUntil(
      "serving-spoke-4 created",
      async () => hubCr("KnativeServing", "serving-spoke-4"),
      30_000,
    );
    figures.relabelToHubCrMs = Date.now() - started;
    // spoke-3 left: its CR stays, unchanged, for the grace period...
    expect(await hubCr("KnativeServing", "serving-spoke-3")).toBeDefined();
    await waitUntil("the status lists spoke-3 as left", async () =>
      /^\| KnativeServingPlacement knative-fleet\/serving \|.*\| fleet-system\/spoke-3 \|$/m.test(
        await statusReadme(),
      )
        ? true
        : undefined,
    );
    // ...and is pruned once it has stayed out that long; its finalizer uninstalls Serving from spoke-3.
    await waitUntil(
      "serving-spoke-3 pruned after the grace period",
      async () => ((await hubCr("KnativeServing", "serving-spoke-3")) ? undefined : true),
      (GRACE_SECONDS + 60) * 1000,
    );
    figures.relabelToPruneMs = Date.now() - started;
    expect(figures.relabelToPruneMs).toBeGreaterThanOrEqual(GRACE_SECONDS * 1000);
    await waitReady("serving-spoke-4");
    expect((await configMap("spoke-4", "config-autoscaler"))["enable-scale-to-zero"]).toBe("false");
    await waitUntil(
      "spoke-3 cleaned",
      async () =>
        (await spoke("spoke-3").get("apps/v1", "Deployment", "knative-serving", "activator"))
          ? undefined
          : true,
      120_000,
    );
    const commitsAfter = (await git.log(REPO)).filter((entry) => entry.authorName !== "knative-fleet").length;
    expect(commitsAfter).toBe(commitsBefore);
  });

  it("a PlacementDecision written by hand drives an Eventing placement", async () => {
    await git.pushChange(REPO, {
      files: {
        "clusters/placements/knative-eventing.yaml": `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeEventingPlacement
metadata:
  name: eventing
spec:
  placementDecisionRef:
    namespace: ${PROFILES}
    decisionKey: eventing
  template:
    spec:
      version: "1.21"
`,
      },
      message: "Eventing wherever the scheduler says",
    });
    await service.syncNow();
    const decision = (clusters: string[]) => ({
      apiVersion: "multicluster.x-k8s.io/v1alpha1",
      kind: "PlacementDecision",
      metadata: {
        name: "eventing-1",
        namespace: PROFILES,
        labels: { "multicluster.x-k8s.io/decision-key": "eventing" },
      },
      decisions: clusters.map((name) => ({ clusterProfileRef: { name }, reason: "hand-written" })),
      schedulerName: "a-person",
    });
    const started = Date.now();
    await hub.apply(decision(["spoke-2"]) as unknown as KubeObject);
    await waitUntil(
      "eventing-spoke-2 created",
      async () => hubCr("KnativeEventing", "eventing-spoke-2"),
      30_000,
    );
    figures.decisionToHubCrMs = Date.now() - started;
    await hub.apply(decision(["spoke-2", "spoke-4"]) as unknown as KubeObject);
    await waitUntil(
      "eventing-spoke-4 created",
      async () => hubCr("KnativeEventing", "eventing-spoke-4"),
      30_000,
    );
    const names = (await hub.list(OPERATOR_API_VERSION, "KnativeEventing", { namespace: NS })).items.map(
      (cr) => cr.metadata.name,
    );
    expect(names.sort()).toEqual(["eventing-spoke-2", "eventing-spoke-4"]);
  });

  it("a conflict with a per-cluster file is rejected with file:line on both files and prunes nothing", async () => {
    const before = await servingNames();
    await git.pushChange(REPO, {
      files: {
        "clusters/spoke-1/knative-serving.yaml": `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: spoke-1-serving
  namespace: ${NS}
spec:
  version: "1.21"
  clusterProfileRef:
    name: spoke-1
    namespace: ${PROFILES}
`,
      },
      message: "A per-cluster file for a cluster the placement already covers",
    });
    await service.syncNow();
    const readme = await waitUntil("the conflict in the status", async () => {
      const text = await statusReadme();
      return text.includes("clusters/spoke-1/knative-serving.yaml:1:1") ? text : undefined;
    });
    expect(readme).toContain(`${PLACEMENT_PATH}:`);
    expect(readme).toContain("a cluster runs one KnativeServing, so none of them is applied");
    expect(await servingNames()).toEqual(before);
    expect(await hubCr("KnativeServing", "spoke-1-serving")).toBeUndefined();
    await git.pushChange(REPO, { files: { "clusters/spoke-1/knative-serving.yaml": null }, message: "Undo" });
    await service.syncNow();
  });

  it("deleting a selected cluster's ClusterProfile for 30 s and restoring it prunes nothing", async () => {
    const watched = "serving-spoke-4";
    const uid = (await hubCr("KnativeServing", watched))?.metadata.uid;
    expect(uid).toBeDefined();
    const profile = (await hub.get("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", PROFILES, "spoke-4"))!;
    await hub.delete("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", PROFILES, "spoke-4");
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const cr = await hubCr("KnativeServing", watched);
      expect(cr?.metadata.uid).toBe(uid);
      expect(cr?.metadata.deletionTimestamp).toBeUndefined();
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    // The cluster manager is back: it creates the profile again, then writes its status.
    const { name, namespace, labels } = profile.metadata;
    await hub.apply({
      apiVersion: profile.apiVersion,
      kind: profile.kind,
      metadata: { name, namespace, labels },
      spec: profile.spec,
    } as KubeObject);
    await hub.rest.request({
      method: "PATCH",
      path: `/apis/multicluster.x-k8s.io/v1alpha1/namespaces/${PROFILES}/clusterprofiles/spoke-4/status`,
      contentType: "application/merge-patch+json",
      body: { status: profile.status },
    });
    // Past the moment the grace period would have ended had the cluster stayed away: still the same CR.
    await new Promise((resolve) => setTimeout(resolve, (GRACE_SECONDS - 30 + 10) * 1000));
    const cr = await hubCr("KnativeServing", watched);
    expect(cr?.metadata.uid).toBe(uid);
    expect(cr?.metadata.deletionTimestamp).toBeUndefined();
    await waitReady(watched);
  });

  it("deleting the placement files is a prune like removed files: over half is held until confirmed, then uninstalled", async () => {
    const mirrored = [
      ...(await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items,
      ...(await hub.list(OPERATOR_API_VERSION, "KnativeEventing", { namespace: NS })).items,
    ];
    expect(mirrored.length).toBeGreaterThanOrEqual(3);
    // The repository must still declare something, or the empty-fleet safeguard would skip the prune
    // before the confirmation gate is reached: a CR for a cluster that does not exist, which installs nothing.
    await git.pushChange(REPO, {
      files: {
        [PLACEMENT_PATH]: null,
        "clusters/placements/knative-eventing.yaml": null,
        "clusters/elsewhere/knative-serving.yaml": `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: elsewhere-serving
spec:
  clusterProfileRef:
    name: not-a-cluster
    namespace: ${PROFILES}
`,
      },
      message: "Remove the placements",
    });
    await service.syncNow();
    const readme = await waitUntil("the prune held in the status", async () => {
      const text = await statusReadme();
      return text.includes("Held:") ? text : undefined;
    });
    const token = pruneToken(mirrored.map((cr) => identityOf(cr)));
    expect(readme).toContain(token);
    expect(await servingNames()).toEqual(["elsewhere-serving", "serving-spoke-1", "serving-spoke-4"]);
    await hub.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: PRUNE_CONFIRMATION_CONFIGMAP,
        namespace: NS,
        annotations: { [CONFIRM_PRUNE_ANNOTATION]: token },
      },
    });
    // The confirmation alone releases the prune: no commit, no inventory change, no poll (the service
    // looks for it while the prune is held).
    const remaining = async () => [
      ...(await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items,
      ...(await hub.list(OPERATOR_API_VERSION, "KnativeEventing", { namespace: NS })).items,
    ];
    await waitUntil(
      "every placement CR pruned and finalized",
      async () =>
        (await remaining()).map((cr) => cr.metadata.name).join() === "elsewhere-serving" ? true : undefined,
      240_000,
    ).catch(async (err: Error) => {
      const left = (await remaining()).map((cr) => ({
        name: cr.metadata.name,
        deleting: cr.metadata.deletionTimestamp,
        conditions: (cr.status as { conditions?: unknown } | undefined)?.conditions,
      }));
      throw new Error(
        `${err.message}; on the hub: ${JSON.stringify(left)}; status:\n${await statusReadme()}`,
      );
    });
    // FinalizeRemoteCluster deletes the anchor; the spoke's garbage collector then removes what it owned.
    await waitUntil(
      "spoke-1's Serving garbage-collected",
      async () =>
        (await spoke("spoke-1").get("apps/v1", "Deployment", "knative-serving", "activator")) === undefined
          ? true
          : undefined,
      120_000,
    );
  });
});
