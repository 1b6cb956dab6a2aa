// Big fleets for the status files' and the plan comment's size tests (test/unit/status/big-fleet.test.ts,
// test/unit/plan/big-fleet.test.ts) and their benchmark (scripts/bench-reports.ts): N clusters, two CRs
// each (a Serving and an Eventing placement), realistic in shape: most CRs Ready, some failing with long
// reasons, some in progress, some drifted, a rollout in its second wave with the later waves waiting; the
// plan upgrades every CR (objects from a real plan of the real releases, copied per CR), with a few joins,
// departures, findings and errors. Also one placement of N clusters and N CRs on an upgrade chain, for the
// two steps of the plan's pipeline that were quadratic (issue #44).
import type { Condition } from "../../src/api/knative.ts";
import {
  DRIFT_STATUS_ANNOTATION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../src/api/labels.ts";
import { compareStrings } from "../../src/fleet/diagnostic.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import type { PlacementSelection, SelectedCluster } from "../../src/placement/expand.ts";
import { buildPlan, type FleetPlan, type ResourcePlan } from "../../src/plan/index.ts";
import { createKodataSource, ReleaseLoader } from "../../src/render/index.ts";
import type { renderStatusSummary } from "../../src/status/summary.ts";
import { DEFAULT_FLEET_SETTINGS } from "../../src/sync/settings.ts";
import type { ChainedCr } from "../../src/upgrade/chain.ts";
import { crText } from "./fleet-files.ts";
import { knativeReleasesDir } from "./shared.ts";

type StatusInput = Parameters<typeof renderStatusSummary>[0];

const COMMIT = "4f2a9c1e7b3d5a6f8e0c2b4d6a8f0e1c3b5d7a9f";
const OLDER = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d";
const NAMESPACE = "knative-fleet";
const REGIONS = ["eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-southeast-1"];
const PLACEMENTS = [
  { kind: "KnativeServing", placement: "serving", path: "placements/serving.yaml" },
  { kind: "KnativeEventing", placement: "eventing", path: "placements/eventing.yaml" },
] as const;

/** `prod-eu-west-1-0042`: env, region and a number, as fleets name their clusters. */
export const clusterName = (i: number): string =>
  `${i % 10 === 0 ? "staging" : "prod"}-${REGIONS[i % REGIONS.length]}-${String(i).padStart(4, "0")}`;

/** The rollout's waves: a canary of ten clusters, then the EU, then the US, then the rest. */
export function waveOf(i: number): string {
  if (i < 10) return "canary";
  const region = REGIONS[i % REGIONS.length]!;
  return region.startsWith("eu-") ? "prod-eu" : region.startsWith("us-") ? "prod-us" : "remaining";
}

const READY: Condition[] = [
  { type: "TargetClusterResolved", status: "True" },
  { type: "InstallSucceeded", status: "True" },
  { type: "DeploymentsAvailable", status: "True" },
  { type: "Ready", status: "True" },
];

/** Failures as the hub reports them, with the long messages a scheduler or a webhook gives. */
const FAILURES: Condition[][] = [
  [
    { type: "TargetClusterResolved", status: "True" },
    { type: "InstallSucceeded", status: "True" },
    {
      type: "DeploymentsAvailable",
      status: "False",
      reason: "NotMinimumReplicas",
      message:
        "activator: 1/3 ready: 0/6 nodes are available: 3 Insufficient cpu, 3 node(s) had untolerated taint " +
        "{node-role.kubernetes.io/control-plane: }. preemption: 0/6 nodes are available: 3 No preemption " +
        "victims found for incoming pod, 3 Preemption is not helpful for scheduling.",
    },
    { type: "Ready", status: "False", reason: "NotMinimumReplicas", message: "activator: 1/3 ready" },
  ],
  [
    {
      type: "TargetClusterResolved",
      status: "False",
      reason: "ClusterProfileUnavailable",
      message:
        'the ClusterProfile\'s cluster has not answered for 12m: Get "https://10.20.30.40:6443/api": dial ' +
        "tcp 10.20.30.40:6443: connect: connection timed out",
    },
    { type: "Ready", status: "False", reason: "ClusterProfileUnavailable", message: "not answered for 12m" },
  ],
  [
    { type: "TargetClusterResolved", status: "True" },
    {
      type: "InstallSucceeded",
      status: "False",
      reason: "ApplyFailed",
      message:
        'Internal error occurred: failed calling webhook "validation.webhook.serving.knative.dev": failed to ' +
        'call webhook: Post "https://webhook.knative-serving.svc:443/resource-validation?timeout=10s": ' +
        "context deadline exceeded",
    },
    { type: "Ready", status: "False", reason: "ApplyFailed", message: "webhook timed out" },
  ],
];

const DRIFT = JSON.stringify([
  {
    object: "ConfigMap knative-serving/config-autoscaler",
    change: "changed",
    fields: [
      {
        path: "data.enable-scale-to-zero",
        want: '"true"',
        have: '"false"',
        owner: {
          field: "spec.config.autoscaler.enable-scale-to-zero",
          set: true,
          at: "placements/serving.yaml:14",
        },
      },
    ],
    manager: "kubectl-edit",
    operation: "Update",
    at: "2026-11-28T15:00:00Z",
    outcome: "kept",
  },
]);

/** One hub CR of a placement; `state` picks a readiness, a drift or neither. */
function hubCr(
  i: number,
  kind: (typeof PLACEMENTS)[number],
  state: "ready" | "failed" | "progress" | "drift",
): KubeObject {
  const cluster = clusterName(i);
  const upgraded = ["canary", "prod-eu"].includes(waveOf(i));
  const conditions =
    state === "failed"
      ? FAILURES[i % FAILURES.length]!
      : state === "drift"
        ? [...READY, { type: "Drifted", status: "True", reason: "DriftKept" }]
        : READY;
  return {
    apiVersion: "operator.knative.dev/v1beta1",
    kind: kind.kind,
    metadata: {
      name: `${kind.placement}-${cluster}`,
      namespace: NAMESPACE,
      generation: state === "progress" ? 4 : 3,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
      annotations: {
        [SOURCE_REPOSITORY_ANNOTATION]: "https://git.example/platform/fleet.git",
        [SOURCE_PATH_ANNOTATION]: kind.path,
        [SOURCE_COMMIT_ANNOTATION]: upgraded ? COMMIT : OLDER,
      },
    },
    spec: { clusterProfileRef: { namespace: "fleet-system", name: cluster } },
    status: {
      observedGeneration: 3,
      version: upgraded ? "1.22.1" : "1.21.4",
      conditions,
      ...(state === "drift" && { annotations: { [DRIFT_STATUS_ANNOTATION]: DRIFT } }),
    },
  };
}

/** Which CRs are unhealthy: about 3% fail, 2% are on their way, 1% keep a drift. */
const stateOf = (n: number): "ready" | "failed" | "progress" | "drift" =>
  n % 37 === 5 ? "failed" : n % 53 === 7 ? "progress" : n % 97 === 11 ? "drift" : "ready";

const selected = (clusters: number, spec: (i: number) => Record<string, unknown>, placement: string) =>
  Array.from(
    { length: clusters },
    (_, i): SelectedCluster => ({
      namespace: "fleet-system",
      name: clusterName(i),
      crName: `${placement}-${clusterName(i)}`,
      via: ["selector"],
      overrides: REGIONS[i % REGIONS.length]!.startsWith("eu-") ? [0] : [],
      spec: spec(i),
    }),
  ).sort((a, b) => compareStrings(a.name, b.name));

const templateSpec = (i: number, version: string) => ({
  version,
  "high-availability": { replicas: 3 },
  config: {
    autoscaler: { "enable-scale-to-zero": "true" },
    ...(REGIONS[i % REGIONS.length]!.startsWith("eu-") && {
      defaults: { "revision-timeout-seconds": "600" },
    }),
  },
});

/** The hub's CRs and the last sync of a fleet of `clusters` clusters in the middle of a rollout. */
export function bigFleetStatus(clusters: number): StatusInput {
  const resources = Array.from({ length: clusters }, (_, i) =>
    PLACEMENTS.map((kind, k) => hubCr(i, kind, stateOf(2 * i + k))),
  ).flat();
  const waiting = Array.from({ length: clusters }, (_, i) => i)
    .filter((i) => ["prod-us", "remaining"].includes(waveOf(i)))
    .flatMap((i) =>
      PLACEMENTS.map((kind) => ({
        kind: kind.kind,
        namespace: NAMESPACE,
        name: `${kind.placement}-${clusterName(i)}`,
        path: kind.path,
        action: "waiting" as const,
        reason: `rollout of ${COMMIT.slice(0, 7)} waits for its wave, ${waveOf(i)}: wave prod-eu has not soaked yet (30m)`,
      })),
    );
  return {
    resources,
    sync: {
      source: { repository: "https://git.example/platform/fleet.git", branch: "main", commit: COMMIT },
      resources: waiting,
      prune: { state: "none", candidates: [], retained: [] },
      diagnostics: [],
      failedFiles: [],
      placements: {
        selections: PLACEMENTS.map(({ kind, placement, path }) => ({
          path,
          line: 1,
          kind: `${kind}Placement` as const,
          namespace: NAMESPACE,
          name: placement,
          clusters: selected(clusters, (i) => templateSpec(i, "1.22"), placement),
          skipped: [],
        })),
        departures: [],
      },
      rollout: {
        phase: "Progressing",
        commit: COMMIT,
        wave: "prod-eu",
        opened: true,
        paused: false,
        waiting: waiting.length,
        history: [{ wave: "canary", opened: "2026-11-28T09:00:00Z", completed: "2026-11-28T10:30:00Z" }],
        clusterWaves: Object.fromEntries(
          Array.from({ length: clusters }, (_, i) => [`fleet-system/${clusterName(i)}`, waveOf(i)]),
        ),
      },
    },
  };
}

/** A real plan's CRs of one cluster, upgraded 1.21 -> 1.22, created and deleted: copied per cluster below. */
async function templates(): Promise<{ update: ResourcePlan[]; create: ResourcePlan; remove: ResourcePlan }> {
  const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
  const cr = (name: string, version: string, kind?: "KnativeEventing") =>
    crText({ name, cluster: name, version, ...(kind && { kind }) });
  const revision = (ref: string, files: Record<string, string>) => ({
    ref,
    commit: ref.padEnd(40, "0"),
    files: Object.entries(files).map(([path, text]) => ({ path, text })),
  });
  const plan = await buildPlan(
    {
      repository: "fleet",
      base: revision("base", {
        "a/serving.yaml": cr("a", "1.21"),
        "a/eventing.yaml": cr("a-e", "1.21", "KnativeEventing"),
        "c/serving.yaml": cr("c", "1.22"),
      }),
      head: revision("head", {
        "a/serving.yaml": cr("a", "1.22"),
        "a/eventing.yaml": cr("a-e", "1.22", "KnativeEventing"),
        "b/serving.yaml": cr("b", "1.22"),
      }),
    },
    { releases, kodataDir: knativeReleasesDir(), settings: DEFAULT_FLEET_SETTINGS },
  );
  const all = plan.clusters.flatMap((c) => c.resources);
  const by = (action: string) => all.filter((r) => r.action === action);
  return { update: by("update"), create: by("create")[0]!, remove: by("delete")[0]! };
}

/** The plan of upgrading every CR of a fleet of `clusters` clusters, with the changes a big merge brings. */
export async function bigFleetPlan(clusters: number): Promise<FleetPlan> {
  const { update, create, remove } = await templates();
  const resourceOf = (template: ResourcePlan, i: number, kind: (typeof PLACEMENTS)[number]) => {
    const findings: ResourcePlan["findings"] = [
      ...(i % 50 === 3 && kind.kind === "KnativeServing"
        ? [
            {
              severity: "warning" as const,
              code: "drift" as const,
              message:
                `someone else changed ConfigMap knative-serving/config-autoscaler on fleet-system/${clusterName(i)} ` +
                '(kubectl-edit, Update at 2026-11-28T15:00:00Z: data.enable-scale-to-zero "true" -> "false"); ' +
                "report mode keeps it: set spec.config.autoscaler.enable-scale-to-zero in placements/serving.yaml:14 instead",
            },
          ]
        : []),
      ...(i % 125 === 7
        ? [
            {
              severity: "error" as const,
              code: "version-jump" as const,
              message: `the cluster runs 1.20.3: 1.22 is more than one minor ahead, and the hub controller refuses it`,
            },
          ]
        : []),
    ];
    return {
      ...template,
      kind: kind.kind,
      namespace: NAMESPACE,
      name: `${kind.placement}-${clusterName(i)}`,
      cluster: `fleet-system/${clusterName(i)}`,
      path: kind.path,
      findings,
    };
  };
  const joining = new Set([clusters - 1, clusters - 2, clusters - 3]);
  const leaving = new Set([clusters - 4, clusters - 5]);
  const clusterPlans = Array.from({ length: clusters }, (_, i) => {
    const resources = PLACEMENTS.map((kind, k) => {
      if (joining.has(i)) return resourceOf(create, i, kind);
      if (leaving.has(i))
        return {
          ...resourceOf(remove, i, kind),
          removal: { ...remove.removal!, prune: "departure" as const, message: "pruned after 24h" },
        };
      return resourceOf(update[k % update.length]!, i, kind);
    });
    return { cluster: `fleet-system/${clusterName(i)}`, resources };
  }).sort((a, b) => compareStrings(a.cluster, b.cluster));
  const resources = clusterPlans.flatMap((c) => c.resources);
  const errors = resources.flatMap((r) => r.findings).filter((f) => f.severity === "error").length;
  const waves = ["canary", "prod-eu", "prod-us", "remaining"].map((name) => ({
    name,
    maxUnavailable: name === "canary" ? "1" : "10%",
    soak: "30m",
    timeLimit: "2h",
    resources: resources
      .filter((r) => !leaving.has(clusterIndex(r.cluster)) && waveOf(clusterIndex(r.cluster)) === name)
      .map((r) => ({
        resource: `${r.kind} ${r.namespace}/${r.name}`,
        cluster: r.cluster,
        change: r.action as "create" | "update",
      })),
    deletions: resources
      .filter((r) => r.action === "delete" && waveOf(clusterIndex(r.cluster)) === name)
      .map((r) => `${r.kind} ${r.namespace}/${r.name}`),
    approval: name === "prod-us",
  }));
  const all = Array.from({ length: clusters }, (_, i) => i);
  const keys = (list: readonly number[]) =>
    list.map((i) => `fleet-system/${clusterName(i)}`).sort(compareStrings);
  return {
    repository: "https://git.example/platform/fleet.git",
    base: { ref: "main", commit: OLDER },
    head: { ref: "upgrade-1.22", commit: COMMIT },
    source: "offline",
    files: PLACEMENTS.map(({ path }) => ({ path, change: "modified" as const })),
    diagnostics: [],
    omittedDiagnostics: 0,
    prune: { state: "none" },
    clusters: clusterPlans,
    placements: {
      inventory: "snapshot",
      placements: PLACEMENTS.map(({ kind, placement, path }) => ({
        placement: `${kind}Placement ${NAMESPACE}/${placement}`,
        path,
        before: keys(all.filter((i) => !joining.has(i))),
        after: selected(clusters, (i) => templateSpec(i, "1.22"), placement).filter(
          (c) => !leaving.has(clusterIndex(`fleet-system/${c.name}`)),
        ),
        added: keys([...joining]),
        removed: keys([...leaving]),
        skipped: [],
      })),
    },
    rollout: {
      policy: "rollout.yaml:1",
      failedPaths: [],
      allAtOnce: false,
      paused: false,
      inventory: "known",
      outsideWindows: [],
      waves,
    },
    findings: [],
    changes: resources.length,
    errors,
    warnings: resources.flatMap((r) => r.findings).length - errors,
  };
}

/** The number in a cluster's name. */
const clusterIndex = (cluster: string): number => Number(cluster.slice(-4));

/** One placement of `clusters` clusters before and after a merge: the last three join, the two before them leave. */
export function bigPlacement(clusters: number): {
  before: PlacementSelection[];
  after: PlacementSelection[];
} {
  const joining = new Set([1, 2, 3].map((back) => clusterName(clusters - back)));
  const leaving = new Set([4, 5].map((back) => clusterName(clusters - back)));
  const selection = (left: ReadonlySet<string>): PlacementSelection => ({
    path: "placements/serving.yaml",
    line: 1,
    kind: "KnativeServingPlacement",
    namespace: NAMESPACE,
    name: "serving",
    clusters: selected(clusters, (i) => templateSpec(i, "1.22"), "serving").filter((c) => !left.has(c.name)),
    skipped: [],
  });
  return { before: [selection(joining)], after: [selection(leaving)] };
}

/** `crs` CRs of a plan, every one on the upgrade chain 1.20 -> 1.22 (the step 1.21 under way), in one order. */
export function chainedCrs(crs: number): { plans: ResourcePlan[]; upgrades: ChainedCr[] } {
  const plans = Array.from(
    { length: crs },
    (_, i): ResourcePlan => ({
      kind: "KnativeServing",
      namespace: NAMESPACE,
      name: `serving-${clusterName(i)}`,
      cluster: `fleet-system/${clusterName(i)}`,
      path: "placements/serving.yaml",
      action: "update",
      objects: { created: [], changed: [], deleted: [] },
      findings: [],
    }),
  );
  const upgrades = plans.map(
    (plan): ChainedCr => ({
      key: `${plan.kind} ${plan.namespace}/${plan.name}`,
      path: plan.path,
      cluster: plan.cluster,
      chain: "KnativeServing 1.22",
      from: "1.20",
      step: "1.21",
      target: "1.22",
      minors: ["1.20", "1.21", "1.22"],
    }),
  );
  return { plans, upgrades };
}
