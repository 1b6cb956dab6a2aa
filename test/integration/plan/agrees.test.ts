import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterAccess } from "../../../src/access/cluster-access.ts";
import { loadProviderConfig } from "../../../src/access/provider-config.ts";
import { createTargetResolver } from "../../../src/access/target.ts";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import type { ApplyPlan } from "../../../src/apply/engine.ts";
import { type KubeObject, type ObjectRef, refKey, refOf } from "../../../src/kube/object.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { diffObjects } from "../../../src/plan/diff.ts";
import { buildPlan } from "../../../src/plan/plan.ts";
import type { ResourcePlan } from "../../../src/plan/report.ts";
import type { Revision } from "../../../src/plan/revisions.ts";
import { finalizeInstall, type ReconcileDeps, reconcileInstall } from "../../../src/reconcile/reconciler.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { DEFAULT_FLEET_SETTINGS } from "../../../src/sync/settings.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { type CrOptions, crFile, crObject } from "../../support/fleet-files.ts";
import { adminClient, installFleetCrds } from "../../support/hub.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// `plan` (live: the engine's pass with dryRun=All) and the apply that follows (the reconcile's own step
// list) agree object by object: the same create, update and prune sets, and every field the plan says
// changes is what the cluster then holds. For an install, a config change, an upgrade that removes
// objects (1.21 -> 1.22), and a removal (FinalizeRemoteCluster).

const sandbox = loadSandbox();
const spoke = sandbox.spokes[0]!;
const hub = adminClient(sandbox.hub);
const spokeClient = adminClient(spoke);
const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const NAME = "agree-serving";
const cr = (options: Partial<CrOptions> = {}): CrOptions => ({
  name: NAME,
  namespace: "plan-agree",
  cluster: spoke.name,
  clusterNamespace: sandbox.clusterProfileNamespace,
  spec: { ingress: { kourier: { enabled: true } } },
  ...options,
});

const revision = (ref: string, declared: CrOptions | null): Revision => ({
  ref,
  commit: ref.padEnd(40, "0"),
  files: declared ? [crFile(declared)] : [],
});
const keys = (refs: readonly ObjectRef[]) => refs.map(refKey).sort();
const getAll = (refs: readonly ObjectRef[]) =>
  Promise.all(refs.map((r) => spokeClient.get(r.apiVersion, r.kind, r.namespace || undefined, r.name)));
// Written by the cluster's controllers, not by the apply: the Deployment controller's revision after a
// template change, and the aggregation controller's rules of an aggregated ClusterRole.
const byApply = (object: KubeObject) => (field: { path: string }) =>
  !(object.aggregationRule !== undefined && field.path.startsWith("rules")) &&
  field.path !== 'metadata.annotations["deployment.kubernetes.io/revision"]';

describe("plan and the apply that follows agree, object by object", () => {
  let access: ClusterAccess;
  let deps: ReconcileDeps;
  let installed: KnativeResource["status"];

  beforeAll(async () => {
    await installFleetCrds(hub);
    access = new ClusterAccess({
      hub,
      providers: await loadProviderConfig(sandbox.providerFile),
      namespaces: [sandbox.clusterProfileNamespace],
    });
    deps = {
      releases,
      targets: createTargetResolver(hub, access),
      pollIntervalMs: 1_000,
      applyConcurrency: 8,
      now: () => new Date(),
      log: silentLogger,
    };
  });

  afterAll(async () => {
    // A failed test may leave the install behind: remove it the way the finalizer does.
    await finalizeInstall(KnativeResourceSchema.parse(crObject(cr())), [], deps, silentLogger).catch(
      () => {},
    );
    await access?.close();
  });

  async function planOf(base: CrOptions | null, head: CrOptions | null): Promise<ResourcePlan> {
    const plan = await buildPlan(
      { repository: "agree", base: revision("base", base), head: revision("head", head) },
      { releases, settings: DEFAULT_FLEET_SETTINGS, clusters: { hub, targets: deps.targets } },
    );
    const planned = plan.clusters.flatMap((c) => c.resources).find((r) => r.name === NAME)!;
    expect(planned.source).toBe("live");
    expect(planned.findings.filter((f) => f.severity === "error")).toEqual([]);
    return planned;
  }

  /** The reconcile of head (the step list, as the controller runs it), until its Deployments are Available. */
  async function reconcile(head: CrOptions): Promise<ApplyPlan> {
    const resource = KnativeResourceSchema.parse({
      ...crObject(head),
      ...(installed && { status: installed }),
    });
    const first = await reconcileInstall(resource, deps);
    expect(first.error).toBeUndefined();
    let last = first;
    await waitUntil(
      "Deployments Available",
      async () => {
        last = await reconcileInstall({ ...resource, status: last.status }, deps);
        return last.requeueAfterMs === undefined ? true : undefined;
      },
      180_000,
    );
    installed = last.status;
    return first.apply!.plan;
  }

  function expectSameSets(planned: ResourcePlan, applied: ApplyPlan): void {
    expect(keys(planned.objects.created)).toEqual(keys([...applied.setup, ...applied.create.map(refOf)]));
    expect(keys(planned.objects.changed)).toEqual(keys(applied.update.map((u) => refOf(u.desired))));
    expect(keys(planned.objects.deleted)).toEqual(keys(applied.prune));
  }

  async function expectFieldsApplied(
    planned: ResourcePlan,
    before: (KubeObject | undefined)[],
  ): Promise<void> {
    const after = await getAll(planned.objects.changed);
    planned.objects.changed.forEach((change, i) => {
      expect(change.refused).toBeUndefined();
      expect(
        diffObjects(before[i]!, after[i]!).filter(byApply(after[i]!)),
        `${change.kind} ${change.name}`,
      ).toEqual(change.fields);
    });
  }

  it("an install: the plan's creates are exactly what the apply creates", async () => {
    const planned = await planOf(null, cr());
    expect(planned.objects.created.length).toBeGreaterThan(50);
    const applied = await reconcile(cr());
    expectSameSets(planned, applied);
    expect((await getAll(planned.objects.created)).filter((o) => o === undefined)).toEqual([]);
  });

  it("a config change: the same updates, and each planned field is what the cluster then holds", async () => {
    const head = cr({
      spec: {
        ingress: { kourier: { enabled: true } },
        config: { autoscaler: { "enable-scale-to-zero": "false" } },
        registry: { override: { webhook: "registry.example/knative/webhook:pinned" } },
      },
    });
    const planned = await planOf(cr(), head);
    expect(planned.objects.changed.map((c) => c.name)).toEqual(
      expect.arrayContaining(["config-autoscaler", "webhook"]),
    );
    const before = await getAll(planned.objects.changed);
    const applied = await reconcile(head);
    expectSameSets(planned, applied);
    await expectFieldsApplied(planned, before);
    // Back to base for the next case, through the same engine.
    await reconcile(cr());
  });

  it("an upgrade 1.21 -> 1.22: the same creates, updates and prunes; the pruned objects are gone", async () => {
    const head = cr({ version: "1.22" });
    const planned = await planOf(cr(), head);
    expect(planned.version).toMatchObject({ from: "1.21.3", to: "1.22.1" });
    expect(planned.objects.deleted.length).toBeGreaterThan(0);
    const before = await getAll(planned.objects.changed);
    const applied = await reconcile(head);
    expectSameSets(planned, applied);
    await expectFieldsApplied(planned, before);
    expect((await getAll(planned.objects.deleted)).filter((o) => o !== undefined)).toEqual([]);
  });

  it("a removal: what the plan lists as deleted is gone after FinalizeRemoteCluster, what it keeps stays", async () => {
    const base = cr({ version: "1.22" });
    const planned = await planOf(base, null);
    const { deleted } = planned.objects;
    expect(deleted.length).toBeGreaterThan(0);
    expect((await getAll(deleted)).filter((o) => o === undefined)).toEqual([]);
    const outcome = await finalizeInstall(
      KnativeResourceSchema.parse(crObject(base)),
      [],
      deps,
      silentLogger,
    );
    expect(outcome).toEqual({ release: true });
    await waitUntil(
      "every planned deletion done (namespaced ones by the garbage collector)",
      async () => ((await getAll(deleted)).every((o) => o === undefined) ? true : undefined),
      120_000,
    );
    expect((await getAll(planned.removal!.kept)).filter((o) => o === undefined)).toEqual([]);
  });
});
