import { mkdtempSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { describeRef, type KubeObject, nameOf, type ObjectRef } from "../../../src/kube/object.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { diffObjects } from "../../../src/plan/diff.ts";
import type { FleetPlan } from "../../../src/plan/report.ts";
import { readRevisions } from "../../../src/plan/revisions.ts";
import { type Reconciler, startReconciler } from "../../../src/reconcile/start.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { crText, TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { createFleetRepo, type FleetRepo } from "../../support/fleet-repo.ts";
import { startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import * as planCli from "../../support/plan-cli.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { syncInto } from "../../support/sync.ts";
import { waitUntil } from "../../support/wait.ts";

// The plan against the sandbox's real hub and spokes, with the real mirror and reconciler doing what merging
// does: the base branch is mirrored to the hub and installed, the plan runs, then head is mirrored and the
// reconciler applies it, and the cluster is compared with what the plan said.

const sandbox = loadSandbox();
/** The service's repository as its config names it, and the config `plan` is given: they agree. */
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const HUB_NAMESPACE = "plan-test";
const SERVING = "clusters/spoke-1/knative-serving.yaml";
const EVENTING = "clusters/spoke-2/knative-eventing.yaml";
const live = [
  "--kubeconfig",
  sandbox.hub.adminKubeconfig,
  "--clusterprofile-provider-file",
  sandbox.providerFile,
];

const serving = (spec: Record<string, unknown> = {}) =>
  crText({
    name: "plan-serving",
    namespace: HUB_NAMESPACE,
    cluster: spoke1.name,
    spec: { ingress: { kourier: { enabled: true } }, ...spec },
  });
const eventing = (version = "1.21", spec: Record<string, unknown> = {}) =>
  crText({
    kind: "KnativeEventing",
    name: "plan-eventing",
    namespace: HUB_NAMESPACE,
    cluster: spoke2.name,
    version,
    spec,
  });

const hub = adminClient(sandbox.hub);
const configDir = mkdtempSync(join(tmpdir(), "knative-fleet-plan-config-"));
const CONFIG = join(configDir, "config.yaml");
writeFileSync(
  CONFIG,
  `repository: {url: "${TEST_REPOSITORY}"}\ntenancy: {crNamespaces: [${HUB_NAMESPACE}]}\n` +
    `allowedClusterProfileNamespaces: [${sandbox.clusterProfileNamespace}]\n`,
);
/** plan as the service's config says, so it admits this test's hub namespace as the service does. */
const planJson = (...argv: string[]) => planCli.planJson("--config", CONFIG, ...argv);
const runPlan = (...argv: string[]) => planCli.runPlan("--config", CONFIG, ...argv);
const { resourceOf } = planCli;
const spokeOne = adminClient(spoke1);
const spokeTwo = adminClient(spoke2);

describe("knative-fleet plan against the sandbox", () => {
  let reconciler: Reconciler;
  let repo: FleetRepo;
  const figures: Record<string, number> = {};

  /** Mirrors a branch into the hub, as the service does after a merge. */
  async function merge(branch: string): Promise<void> {
    const revisions = await readRevisions(repo.dir, { base: branch, head: branch }, DEFAULT_FILE_SELECTION);
    const result = await syncInto(hub, {
      files: revisions.head.files,
      namespace: HUB_NAMESPACE,
      commit: revisions.head.commit,
      repository: TEST_REPOSITORY,
      branch,
    });
    expect(result.resources.every((outcome) => outcome.error === undefined)).toBe(true);
  }

  /** Waits until the hub CR reports Ready for its current generation. */
  async function waitConverged(kind: string, name: string): Promise<void> {
    await waitUntil(
      `${kind} ${name} Ready`,
      async () => {
        const cr = await hub.get(OPERATOR_API_VERSION, kind, HUB_NAMESPACE, name);
        const status = cr?.status as
          | { observedGeneration?: number; conditions?: { type: string; status: string }[] }
          | undefined;
        const ready = status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
        return ready && status?.observedGeneration === cr?.metadata.generation ? true : undefined;
      },
      240_000,
    );
  }

  async function timedPlan(label: string, ...argv: string[]) {
    const started = performance.now();
    const result = await planJson(...argv);
    figures[label] = Math.round(performance.now() - started);
    return result;
  }

  const getAll = (client: KubeClient, refs: readonly ObjectRef[]) =>
    Promise.all(
      refs.map((ref) => client.get(ref.apiVersion, ref.kind, ref.namespace || undefined, ref.name)),
    );

  beforeAll(async () => {
    await installFleetCrds(hub);
    await ensureNamespace(hub, HUB_NAMESPACE);
    repo = await createFleetRepo();
    await repo.commit("main", { [SERVING]: serving(), [EVENTING]: eventing() });
    // The service's reconciler, which installs what the mirror puts on the hub; two CRs need two workers.
    reconciler = await startReconciler({
      log: silentLogger,
      hub,
      providerFile: sandbox.providerFile,
      allowedClusterProfileNamespaces: [sandbox.clusterProfileNamespace],
      kodataDir: knativeReleasesDir(),
      workers: 2,
      applyConcurrency: 8,
      pollIntervalMs: 1_000,
      resyncIntervalMs: 3_600_000,
    });
    await merge("main");
    await Promise.all([
      waitConverged("KnativeServing", "plan-serving"),
      waitConverged("KnativeEventing", "plan-eventing"),
    ]);
  });

  afterAll(async () => {
    for (const kind of KNATIVE_KINDS) {
      for (const cr of (await hub.list(OPERATOR_API_VERSION, kind, { namespace: HUB_NAMESPACE })).items) {
        await hub.delete(OPERATOR_API_VERSION, kind, HUB_NAMESPACE, nameOf(cr));
        // The reconciler's finalizer cleans the spoke; then the CR is gone.
        await waitUntil(
          `${kind} ${cr.metadata.name} deleted`,
          async () =>
            (await hub.get(OPERATOR_API_VERSION, kind, HUB_NAMESPACE, nameOf(cr))) ? undefined : true,
          120_000,
        );
      }
    }
    await reconciler?.stop();
    await rm(repo.dir, { recursive: true, force: true });
    await rm(configDir, { recursive: true, force: true });
    console.log("plan figures (ms):", JSON.stringify(figures));
  });

  it("a config change on one spoke: the dry-run diff is exactly what the apply then does", async () => {
    await repo.commit("config", {
      [SERVING]: serving({
        config: {
          autoscaler: { "enable-scale-to-zero": "false" },
          network: { "domain-template": "{{.Name}}-{{.Namespace}}.{{.Domain}}" },
        },
        registry: { override: { controller: "registry.example/knative/controller:pinned" } },
      }),
    });
    const { code, plan } = await timedPlan(
      "liveOneSpokeMs",
      "--repo",
      repo.dir,
      "--base",
      "main",
      "--head",
      "config",
      ...live,
    );
    expect(code).toBe(0);
    expect(plan.source).toBe("live");
    const planned = resourceOf(plan, "plan-serving");
    expect(planned).toMatchObject({
      action: "update",
      source: "live",
      version: { from: "1.21.3", to: "1.21.3" },
    });
    expect(planned.objects.created).toEqual([]);
    expect(planned.objects.deleted).toEqual([]);
    const fields = new Map(planned.objects.changed.map((change) => [describeRef(change), change.fields]));
    expect(fields.get("ConfigMap knative-serving/config-autoscaler")).toContainEqual({
      path: "data.enable-scale-to-zero",
      after: "false",
    });
    expect(fields.get("Deployment.apps knative-serving/controller")).toContainEqual(
      expect.objectContaining({
        path: "spec.template.spec.containers[name=controller].image",
        after: "registry.example/knative/controller:pinned",
      }),
    );

    const before = await getAll(spokeOne, planned.objects.changed);
    await merge("config");
    await waitConverged("KnativeServing", "plan-serving");
    await reconciler.controller.queue.idle();
    const after = await getAll(spokeOne, planned.objects.changed);
    planned.objects.changed.forEach((change, index) => {
      const applied = diffObjects(before[index]!, after[index]!).filter(
        // Written by the Deployment controller after the template changed, not by the apply.
        (field) => field.path !== 'metadata.annotations["deployment.kubernetes.io/revision"]',
      );
      expect(applied, describeRef(change)).toEqual(change.fields);
    });

    // Merged and applied: the same change now plans nothing on the cluster.
    const again = await planJson("--repo", repo.dir, "--base", "main", "--head", "config", ...live);
    expect(resourceOf(again.plan, "plan-serving").objects).toEqual({ created: [], changed: [], deleted: [] });
  });

  it("a hand edit on the spoke: the live plan shows who changed what, and that it is put back merged or not", async () => {
    await spokeOne.rest.request({
      method: "PATCH",
      path: "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler",
      query: { fieldManager: "kubectl-edit" },
      body: { data: { "enable-scale-to-zero": "true" } },
      contentType: "application/strategic-merge-patch+json",
    });
    try {
      await repo.commit("domain", {
        [SERVING]: serving({
          config: {
            autoscaler: { "enable-scale-to-zero": "false" },
            network: { "domain-template": "{{.Name}}.{{.Namespace}}.{{.Domain}}" },
          },
          registry: { override: { controller: "registry.example/knative/controller:pinned" } },
        }),
      });
      const { plan } = await planJson("--repo", repo.dir, "--base", "config", "--head", "domain", ...live);
      const planned = resourceOf(plan, "plan-serving");
      const drift = planned.findings.filter((finding) => finding.code === "drift");
      expect(drift).toHaveLength(1);
      expect(drift[0]!.severity).toBe("warning");
      expect(drift[0]!.message).toMatch(
        /^ConfigMap config-autoscaler changed by kubectl-edit at \S+: data\.enable-scale-to-zero "false" -> "true"; knative-fleet puts it back at its next drift check, merged or not$/,
      );
      // The merge's own change, and the drifted object's revert, which the same apply makes.
      const changed = new Map(planned.objects.changed.map((change) => [describeRef(change), change.fields]));
      expect([...changed.keys()]).toEqual([
        "ConfigMap knative-serving/config-autoscaler",
        "ConfigMap knative-serving/config-network",
      ]);
      expect(changed.get("ConfigMap knative-serving/config-autoscaler")).toContainEqual(
        expect.objectContaining({ path: "data.enable-scale-to-zero", after: "false" }),
      );
    } finally {
      await spokeOne.rest.request({
        method: "PATCH",
        path: "/api/v1/namespaces/knative-serving/configmaps/config-autoscaler",
        query: { fieldManager: "kubectl-edit" },
        body: { data: { "enable-scale-to-zero": "false" } },
        contentType: "application/strategic-merge-patch+json",
      });
    }
  });

  it("two minors ahead of the version the hub reports installed: the upgrade chain's first step, dry-run on the cluster", async () => {
    await repo.commit("jump", { [EVENTING]: eventing("1.23") });
    const { code, plan } = await planJson("--repo", repo.dir, "--base", "main", "--head", "jump", ...live);
    expect(code).toBe(0);
    const chained = resourceOf(plan, "plan-eventing");
    expect(chained).toMatchObject({
      source: "live",
      version: { from: "1.21.4", to: "1.22.2" },
      chain: { minors: ["1.21", "1.22", "1.23"], step: "1.22", target: "1.23" },
    });
    expect(chained.findings.filter((finding) => finding.severity === "error")).toEqual([]);
    expect(chained.objects.changed.length).toBeGreaterThan(0);
  });

  it("a cluster whose ClusterProfile on the hub reports a Kubernetes older than head's release needs is an error", async () => {
    const profile = {
      apiVersion: "multicluster.x-k8s.io/v1alpha1",
      kind: "ClusterProfile",
      metadata: { name: spoke2.name, namespace: sandbox.clusterProfileNamespace },
    };
    await hub.apply(
      { ...profile, status: { version: { kubernetes: "v1.33.2" } } },
      { subresource: "status" },
    );
    try {
      await repo.commit("older", { [EVENTING]: eventing("1.22") });
      const { code, plan } = await planJson("--repo", repo.dir, "--base", "main", "--head", "older", ...live);
      expect(code).toBe(1);
      const refused = resourceOf(plan, "plan-eventing");
      expect(refused).toMatchObject({ source: "live", version: { from: "1.21.4", to: "1.22.2" } });
      expect(refused.findings).toEqual([
        expect.objectContaining({ code: "kubernetes-version", severity: "error" }),
      ]);
      expect(refused.findings[0]!.message).toContain("Kubernetes v1.33.2 is older than v1.34.0");
      expect(refused.objects).toEqual({ created: [], changed: [], deleted: [] });
    } finally {
      // The field goes with its only manager's apply.
      await hub.apply({ ...profile, status: {} }, { subresource: "status" });
    }
  });

  it("times a plan of every spoke, live and offline", async () => {
    await repo.commit("both", {
      [SERVING]: serving({ config: { gc: { "retain-since-create-time": "24h" } } }),
      [EVENTING]: eventing("1.21", { config: { features: { "kreference-group": "enabled" } } }),
    });
    const args = ["--repo", repo.dir, "--base", "main", "--head", "both"];
    const liveRun = await timedPlan("liveAllSpokesMs", ...args, ...live);
    const offlineRun = await timedPlan("offlineAllSpokesMs", ...args);
    for (const { code, plan } of [liveRun, offlineRun]) {
      expect(code).toBe(0);
      expect(plan.clusters.map((cluster) => cluster.cluster)).toEqual([
        `fleet-system/${spoke1.name}`,
        `fleet-system/${spoke2.name}`,
      ]);
    }
    const configOf = (plan: FleetPlan, name: string, configMap: string) =>
      resourceOf(plan, name).objects.changed.find((change) => change.name === configMap)?.fields;
    // Live (the dry run against spoke-2) and offline (base against head) agree on a change nothing else touched.
    for (const plan of [liveRun.plan, offlineRun.plan]) {
      expect(configOf(plan, "plan-eventing", "config-features")).toEqual([
        { path: "data.kreference-group", before: "disabled", after: "enabled" },
      ]);
    }
    expect(offlineRun.plan.clusters.flatMap((c) => c.resources).every((r) => r.source === "offline")).toBe(
      true,
    ); // Nothing changed on the clusters meanwhile: a second live plan is the same, to the byte.
    expect(await runPlan(...args, ...live)).toEqual(await runPlan(...args, ...live));
  });

  it("spokes that cannot be reached: exit 2, and their part of the plan is offline with the reason", async () => {
    const { code, plan } = await planJson(
      "--repo",
      repo.dir,
      "--base",
      "main",
      "--head",
      "both",
      "--kubeconfig",
      sandbox.hub.adminKubeconfig,
    );
    expect(code).toBe(2);
    for (const resource of plan.clusters.flatMap((cluster) => cluster.resources)) {
      expect(resource.source).toBe("offline");
      expect(resource.offlineReason).toContain("MulticlusterDisabled");
      expect(resource.findings).toContainEqual(expect.objectContaining({ code: "cluster-unreachable" }));
    }
  });

  it("a repository URL gives the same plan as its clone", async () => {
    const server = await startGitServer();
    try {
      const url = server.url("fleet");
      await server.createRepo("fleet", { [SERVING]: serving(), [EVENTING]: eventing() });
      await server.pushChange("fleet", {
        branch: "remove",
        message: "remove eventing",
        files: { [EVENTING]: null },
      });
      const remote = await timedPlan("offlineUrlMs", "--repo", url, "--base", "main", "--head", "remove");
      await repo.commit("url-remove", { [EVENTING]: null });
      const local = await planJson("--repo", repo.dir, "--base", "main", "--head", "url-remove");
      expect(remote.code).toBe(0);
      expect(remote.plan.repository).toBe(url);
      expect(remote.plan.clusters).toEqual(local.plan.clusters);
    } finally {
      await server.close();
    }
  });

  it("a removed file: the objects the plan lists as deleted are gone once merged; what it keeps stays", async () => {
    await repo.commit("remove", { [EVENTING]: null });
    const { code, plan } = await timedPlan(
      "liveRemovalMs",
      "--repo",
      repo.dir,
      "--base",
      "main",
      "--head",
      "remove",
      ...live,
    );
    expect(code).toBe(0);
    const removed = resourceOf(plan, "plan-eventing");
    expect(removed).toMatchObject({
      cluster: `fleet-system/${spoke2.name}`,
      action: "delete",
      source: "live",
      removal: { prune: "pruned" },
    });
    const { deleted } = removed.objects;
    expect(deleted.some((ref) => ref.kind === "ClusterRole")).toBe(true);
    expect(deleted).toContainEqual(
      expect.objectContaining({ kind: "ConfigMap", name: "knativeeventing-plan-eventing-root-owner" }),
    );
    expect(deleted.some((ref) => ref.kind === "Deployment")).toBe(true);
    expect(await getAll(spokeTwo, deleted)).not.toContain(undefined); // all there before the merge

    await merge("remove");
    await waitUntil(
      "the hub CR gone (FinalizeRemoteCluster done)",
      async () =>
        (await hub.get(OPERATOR_API_VERSION, "KnativeEventing", HUB_NAMESPACE, "plan-eventing"))
          ? undefined
          : true,
      120_000,
    );
    await waitUntil(
      "every object the plan listed deleted (namespaced ones by the garbage collector)",
      async () =>
        (await getAll(spokeTwo, deleted)).every((object) => object === undefined) ? true : undefined,
      120_000,
    );
    const kept = (await getAll(spokeTwo, removed.removal!.kept)) as (KubeObject | undefined)[];
    expect(kept.filter((object) => object === undefined)).toEqual([]);
  });
});
