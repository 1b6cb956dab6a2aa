import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ClusterAccess } from "../../../src/access/cluster-access.ts";
import { loadProviderConfig } from "../../../src/access/provider-config.ts";
import { createTargetResolver } from "../../../src/access/target.ts";
import {
  type KnativeResource,
  KnativeResourceSchema,
  OPERATOR_API_VERSION,
} from "../../../src/api/knative.ts";
import { canonicalJson } from "../../../src/apply/compare.ts";
import type { ApplyPlan } from "../../../src/apply/engine.ts";
import { compareStrings } from "../../../src/fleet/diagnostic.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { type KubeObject, nameOf, type ObjectRef, refKey, refOf } from "../../../src/kube/object.ts";
import { hubMirror } from "../../../src/mirror/mirror.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { Inventory } from "../../../src/placement/inventory.ts";
import { diffObjects } from "../../../src/plan/diff.ts";
import { buildPlan } from "../../../src/plan/plan.ts";
import type { ResourcePlan } from "../../../src/plan/report.ts";
import type { Revision } from "../../../src/plan/revisions.ts";
import { finalizeInstall, type ReconcileDeps, reconcileInstall } from "../../../src/reconcile/reconciler.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { DEFAULT_FLEET_SETTINGS, type FleetSettings } from "../../../src/sync/settings.ts";
import { fixedPlacements, sync } from "../../../src/sync/sync.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import {
  type CrOptions,
  cluster,
  crFile,
  crObject,
  crText,
  placementText,
  rolloutText,
  TEST_REPOSITORY,
} from "../../support/fleet-files.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// `plan` (live: the engine's pass with dryRun=All) and the apply that follows (the reconcile's own step
// list) agree object by object: the same create, update and prune sets, and every field the plan says
// changes is what the cluster then holds. For an install, a config change, an upgrade that removes
// objects (1.21 -> 1.22), and a removal (FinalizeRemoteCluster). Then placements: what plan says merging
// does to each hub CR (its dry syncs of base and head) is what the service's sync of head then does to
// the real hub, CR by CR and spec by spec.

const sandbox = loadSandbox();
const spoke = sandbox.spokes[0]!;
const hub = adminClient(sandbox.hub);
const spokeClient = adminClient(spoke);
const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const NAME = "agree-serving";
const PLACEMENT_NS = "plan-agree-placements";
const cr = (options: Partial<CrOptions> = {}): CrOptions => ({
  name: NAME,
  namespace: "plan-agree",
  cluster: spoke.name,
  clusterNamespace: sandbox.clusterProfileNamespace,
  spec: { ingress: { kourier: { enabled: true } } },
  ...options,
});

/** The service's settings for these CRs: their hub namespace admitted, the sandbox's ClusterProfiles. */
const SETTINGS: FleetSettings = {
  ...DEFAULT_FLEET_SETTINGS,
  crNamespaces: ["plan-agree", PLACEMENT_NS],
  access: { ...DEFAULT_FLEET_SETTINGS.access, namespaces: [sandbox.clusterProfileNamespace] },
};

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
      { releases, settings: SETTINGS, clusters: { hub, targets: deps.targets } },
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

describe("placements: what plan says merging does to each hub CR is what the service's sync then does", () => {
  const PROFILES = sandbox.clusterProfileNamespace;
  const inventory: Inventory = {
    clusters: [
      cluster("c-eu", { env: "prod", region: "eu" }, {}, PROFILES),
      cluster("c-us", { env: "prod", region: "us" }, {}, PROFILES),
      cluster("c-dev", { env: "dev", region: "ap" }, {}, PROFILES),
    ],
    decisions: [],
  };
  const placement = (selector: string, version = "1.21") =>
    placementText({
      name: "p",
      namespace: PLACEMENT_NS,
      spec: {
        clusterSelectorTerms: [{ labelSelector: { matchLabels: Object.fromEntries([selector.split("=")]) } }],
        template: { spec: { version, config: { autoscaler: { "enable-scale-to-zero": "false" } } } },
      },
    });
  const ROLLOUT = rolloutText({
    waves: [{ name: "canary", clusterProfiles: [{ namespace: PROFILES, name: "c-eu" }] }],
  });
  const files = (byPath: Record<string, string>): FleetFile[] =>
    Object.entries(byPath)
      .map(([path, text]) => ({ path, text }))
      .sort((a, b) => compareStrings(a.path, b.path));
  const hubCrs = async () =>
    (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: PLACEMENT_NS })).items;

  /** The service's sync of one commit into the real hub, its placements against `inventory`. */
  const serviceSync = (commit: string, byPath: Record<string, string>) =>
    sync(
      { source: { repository: TEST_REPOSITORY, branch: "main", commit }, files: files(byPath) },
      { fleet: { ...SETTINGS, defaultNamespace: PLACEMENT_NS }, kodataDir: undefined },
      {
        hub: hubMirror(hub, PLACEMENT_NS),
        placements: fixedPlacements(inventory, SETTINGS.departureGracePeriodMs),
      },
    );

  beforeAll(async () => {
    await installFleetCrds(hub);
    await ensureNamespace(hub, PLACEMENT_NS);
  });
  afterEach(async () => {
    for (const cr of await hubCrs()) {
      await hub.delete(OPERATOR_API_VERSION, "KnativeServing", PLACEMENT_NS, nameOf(cr));
    }
  });

  /**
   * Base synced into the hub; the plan of base -> head; head synced. Returns what the plan says happens to
   * each CR (a reinstall is its create and the removal of the CR it replaces) and what the hub then shows.
   */
  async function mergeOf(base: Record<string, string>, head: Record<string, string>) {
    await serviceSync("base", base);
    const before = new Map((await hubCrs()).map((cr) => [nameOf(cr), cr]));
    const plan = await buildPlan(
      {
        repository: TEST_REPOSITORY,
        base: { ref: "base", commit: "base".padEnd(40, "0"), files: files(base) },
        head: { ref: "head", commit: "head".padEnd(40, "0"), files: files(head) },
      },
      {
        releases,
        settings: { ...SETTINGS, defaultNamespace: PLACEMENT_NS },
        inventory: { source: "snapshot", inventory, kubernetesVersions: new Map() },
      },
    );
    const planned = plan.clusters.flatMap((cluster) => cluster.resources);
    const says = planned
      .flatMap((r): string[] => {
        if (r.action === "reinstall")
          return [`create ${r.name}`, `delete ${r.replaces!.split("/")[1]} ${r.removal!.prune}`];
        if (r.action === "delete") return [`delete ${r.name} ${r.removal!.prune}`];
        return [`${r.action} ${r.name}`];
      })
      .sort();
    const synced = await serviceSync("head", head);
    const after = new Map((await hubCrs()).map((cr) => [nameOf(cr), cr]));
    const held = new Set(synced.placements.departures.map((d) => d.name));
    const does = [
      ...[...after.keys()].flatMap((name) => {
        const was = before.get(name);
        if (was === undefined) return [`create ${name}`];
        if (held.has(name)) return [`delete ${name} departure`];
        return canonicalJson(was.spec) === canonicalJson(after.get(name)!.spec) ? [] : [`update ${name}`];
      }),
      ...[...before.keys()].filter((name) => !after.has(name)).map((name) => `delete ${name} pruned`),
    ].sort();
    expect(says).toEqual(does);
    // Each CR a placement makes holds on the hub the merged spec the plan shows for it.
    for (const entry of plan.placements.placements) {
      for (const selected of entry.after ?? []) {
        const { clusterProfileRef, ...spec } = after.get(selected.crName)!.spec as Record<string, unknown>;
        expect(clusterProfileRef).toEqual({ namespace: selected.namespace, name: selected.name });
        expect(spec).toEqual(selected.spec);
      }
    }
    return { plan, says };
  }

  const PATH = "clusters/p.yaml";

  it("a version bump in the template: every selected cluster's CR is updated", async () => {
    const { plan, says } = await mergeOf(
      { [PATH]: placement("env=prod") },
      { [PATH]: placement("env=prod", "1.22") },
    );
    expect(says).toEqual(["update p-c-eu", "update p-c-us"]);
    expect(plan.clusters.flatMap((c) => c.resources).map((r) => r.version)).toEqual([
      { from: "1.21.3", to: "1.22.1" },
      { from: "1.21.3", to: "1.22.1" },
    ]);
  });

  it("a label typo that selects nothing: both CRs leave after the grace period, and a warning names them", async () => {
    const { plan, says } = await mergeOf(
      { [PATH]: placement("env=prod") },
      { [PATH]: placement("env=prdo") },
    );
    expect(says).toEqual(["delete p-c-eu departure", "delete p-c-us departure"]);
    expect(plan.findings).toEqual([
      expect.objectContaining({
        code: "placement-selects-none",
        message: expect.stringContaining(`selects ${PROFILES}/c-eu, ${PROFILES}/c-us before the merge`),
      }),
    ]);
  });

  it("a cluster's own file moved into a placement: one reinstall (created, the old CR pruned)", async () => {
    const own = crText({
      name: "c-eu-serving",
      namespace: PLACEMENT_NS,
      cluster: "c-eu",
      clusterNamespace: PROFILES,
    });
    const { plan, says } = await mergeOf(
      {
        "clusters/c-eu.yaml": own,
        "clusters/c-us.yaml": crText({
          name: "c-us-serving",
          namespace: PLACEMENT_NS,
          cluster: "c-us",
          clusterNamespace: PROFILES,
        }),
      },
      {
        [PATH]: placement("region=eu"),
        "clusters/c-us.yaml": crText({
          name: "c-us-serving",
          namespace: PLACEMENT_NS,
          cluster: "c-us",
          clusterNamespace: PROFILES,
        }),
      },
    );
    expect(says).toEqual(["create p-c-eu", "delete c-eu-serving pruned"]);
    expect(plan.clusters.flatMap((c) => c.resources).map((r) => r.action)).toEqual(["reinstall"]);
  });

  it("a relabel: the cluster that joins gets its CR, the one that leaves keeps its CR for the grace period", async () => {
    const { says } = await mergeOf({ [PATH]: placement("region=us") }, { [PATH]: placement("env=dev") });
    expect(says).toEqual(["create p-c-dev", "delete p-c-us departure"]);
  });

  it("the rollout policy removed with a version bump: a warning, and every CR updated at once", async () => {
    const { plan, says } = await mergeOf(
      { [PATH]: placement("env=prod"), "clusters/rollout.yaml": ROLLOUT },
      { [PATH]: placement("env=prod", "1.22") },
    );
    expect(says).toEqual(["update p-c-eu", "update p-c-us"]);
    expect(plan.findings.map((f) => f.code)).toEqual(["rollout-removed"]);
  });
});
