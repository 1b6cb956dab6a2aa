// Measures placement expansion: 1,000 ClusterProfiles x 4 placements (two Serving, two Eventing, with
// label, property and override selectors), expanded and checked for conflicts, time (median of runs) and
// heap; then, with a sandbox (KNATIVE_FLEET_SANDBOX=<state dir>), the hub requests of the service's path:
// the same 1,000 ClusterProfiles on the real hub, watched by the placement stage, mirrored once, then one
// re-expansion with nothing changed, one after a relabel (watch event to re-expansion), and a status
// heartbeat (which must not re-expand at all).
// Usage: node --expose-gc scripts/bench-placement.ts [clusters=1000] [runs=5]
import { setTimeout as sleep } from "node:timers/promises";
import { CLUSTER_PROFILE_GROUP } from "../src/api/clusterprofile.ts";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { buildFleetModel, type FleetModel } from "../src/fleet/model.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../src/kube/kubeconfig.ts";
import { silentLogger } from "../src/observability/log.ts";
import { withPlacements } from "../src/placement/combine.ts";
import { expandPlacements } from "../src/placement/expand.ts";
import type { InventoryCluster } from "../src/placement/inventory.ts";
import { PlacementStage } from "../src/placement/stage.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { readSandbox } from "../test/sandbox/sandbox.ts";
import { syncInto } from "../test/support/sync.ts";

const clusterCount = Number(process.argv[2] ?? 1000);
const runs = Number(process.argv[3] ?? 5);
const PROFILES_NS = "bench-placement-profiles";
const CR_NS = "bench-placement";
const ENVS = ["prod", "staging", "dev", "test"];
const LOCATIONS = ["eu-west", "eu-north", "us-east", "ap-south"];

const identity = (i: number) => ({
  name: `cluster-${String(i).padStart(4, "0")}`,
  labels: { env: ENVS[i % 4]!, team: `team-${i % 7}` },
  properties: { location: LOCATIONS[Math.floor(i / 4) % 4]!, nodes: String((i * 37) % 200) },
});

const placement = (
  kind: string,
  name: string,
  selection: string,
  overrides = "",
) => `apiVersion: fleet.knative.dev/v1alpha1
kind: ${kind}
metadata:
  name: ${name}
  namespace: ${CR_NS}
spec:
${selection}
  template:
    spec:
      version: "1.21"
      config:
        autoscaler: { enable-scale-to-zero: "true" }
${overrides}`;

const FILES = {
  "clusters/serving-prod.yaml": placement(
    "KnativeServingPlacement",
    "serving-prod",
    "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
    `  overrides:
  - clusterSelector:
      propertySelector: { matchExpressions: [{ name: location, operator: In, values: [eu-west, eu-north] }] }
    patch: { config: { autoscaler: { enable-scale-to-zero: "false" } } }
  - clusterSelector:
      propertySelector: { matchExpressions: [{ name: nodes, operator: Gt, values: ["150"] }] }
    patch: { high-availability: { replicas: 3 } }
`,
  ),
  "clusters/serving-staging.yaml": placement(
    "KnativeServingPlacement",
    "serving-staging",
    "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: staging } }\n    propertySelector:\n      matchExpressions: [{ name: location, operator: NotIn, values: [ap-south] }]",
  ),
  "clusters/eventing-test.yaml": placement(
    "KnativeEventingPlacement",
    "eventing-test",
    "  clusterSelectorTerms:\n  - labelSelector: { matchExpressions: [{ key: env, operator: In, values: [test] }] }",
    `  overrides:
  - clusters: [{ namespace: ${PROFILES_NS}, name: cluster-0003 }]
    patch: { version: "1.20" }
`,
  ),
  "clusters/eventing-big.yaml": placement(
    "KnativeEventingPlacement",
    "eventing-big",
    "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: dev } }\n    propertySelector:\n      matchExpressions: [{ name: nodes, operator: Gt, values: ['100'] }]",
  ),
};

const files = Object.entries(FILES).map(([path, text]) => ({ path, text }));
const model: FleetModel = buildFleetModel(files, { defaultNamespace: CR_NS });
if (model.diagnostics.length > 0) throw new Error(JSON.stringify(model.diagnostics));

const gc = (globalThis as { gc?: () => void }).gc;
const heapMiB = () => {
  gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
};
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

// --- offline: pure expansion -------------------------------------------------------------------------
const clusters: InventoryCluster[] = Array.from({ length: clusterCount }, (_, i) => {
  const { name, labels, properties } = identity(i);
  return { namespace: PROFILES_NS, name, labels, properties: new Map(Object.entries(properties)) };
});
const inventory = { clusters, decisions: [] };
const times: number[] = [];
const heapBefore = heapMiB();
let kept: FleetModel | undefined;
for (let run = 0; run < runs; run++) {
  const started = performance.now();
  kept = withPlacements(model, expandPlacements(model.placements, inventory));
  times.push(performance.now() - started);
}
const heapAfter = heapMiB();
console.log(
  `expansion: ${clusterCount} ClusterProfiles x ${model.placements.length} placements -> ${kept!.resources.length} CRs, ` +
    `${kept!.diagnostics.length} errors; median ${median(times).toFixed(1)} ms, first ${times[0]!.toFixed(1)} ms ` +
    `(${runs} runs); heap held by one expansion ${(heapAfter - heapBefore).toFixed(1)} MiB` +
    `${gc ? "" : " (run with --expose-gc for an exact figure)"}; rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`,
);

// --- live: hub requests per re-expansion -------------------------------------------------------------
const stateDir = process.env[SANDBOX_ENV];
if (!stateDir) {
  console.log(`hub requests: set ${SANDBOX_ENV}=<sandbox state dir> to measure them on a real hub`);
  process.exit(0);
}
const sandbox = readSandbox(stateDir);
if (!sandbox) throw new Error(`no sandbox in ${stateDir}`);
const hubConfig = loadKubeConfig(sandbox.hub.adminKubeconfig);

/** The real hub client, counting the requests it sends. */
function countingClient(): { client: KubeClient; count: () => number; reset: () => void } {
  const client = clientFromKubeConfig(hubConfig);
  let sent = 0;
  const request = client.rest.request.bind(client.rest);
  client.rest.request = ((req) => {
    sent++;
    return request(req);
  }) as typeof client.rest.request;
  return { client, count: () => sent, reset: () => (sent = 0) };
}

const admin = clientFromKubeConfig(hubConfig);
const profilePath = (name: string) =>
  `/apis/multicluster.x-k8s.io/v1alpha1/namespaces/${PROFILES_NS}/clusterprofiles/${name}`;
async function putProfile(i: number, labels = identity(i).labels, properties = identity(i).properties) {
  const { name } = identity(i);
  await admin.apply({
    apiVersion: `${CLUSTER_PROFILE_GROUP}/v1alpha1`,
    kind: "ClusterProfile",
    metadata: { name, namespace: PROFILES_NS, labels },
    spec: { clusterManager: { name: "bench" } },
  });
  await admin.rest.request({
    method: "PATCH",
    path: `${profilePath(name)}/status`,
    contentType: "application/merge-patch+json",
    body: {
      status: {
        properties: Object.entries(properties).map(([n, value]) => ({ name: n, value })),
        conditions: [
          {
            type: "ControlPlaneHealthy",
            status: "True",
            reason: "Bench",
            message: `heartbeat ${Date.now()}`,
            lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
          },
        ],
      },
    },
  });
}
async function inParallel(count: number, work: (i: number) => Promise<unknown>, width = 16) {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

for (const ns of [PROFILES_NS, CR_NS])
  await admin.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
const started = performance.now();
await inParallel(clusterCount, (i) => putProfile(i));
console.log(
  `hub: ${clusterCount} ClusterProfiles written in ${((performance.now() - started) / 1000).toFixed(1)} s`,
);

const counted = countingClient();
let reexpansions = 0;
let changedAt = 0;
let onChangeLatency = 0;
const stage = new PlacementStage({
  hub: clientFromKubeConfig(hubConfig),
  allowedNamespaces: [PROFILES_NS],
  clusterProfileApiVersion: `${CLUSTER_PROFILE_GROUP}/v1alpha1`,
  departureGracePeriodMs: 300_000,
  log: silentLogger,
  onChange: () => {
    reexpansions++;
    if (changedAt > 0 && onChangeLatency === 0) onChangeLatency = performance.now() - changedAt;
  },
});
stage.start();
while (stage.inventory().clusters?.length !== clusterCount) await sleep(100);
const sync = async () => {
  counted.reset();
  const started = performance.now();
  const result = await syncInto(counted.client, {
    files,
    namespace: CR_NS,
    commit: "0".repeat(40),
    repository: "bench://placement",
    placements: stage,
  });
  const writes = result.resources.filter((r) => r.action === "create" || r.action === "update").length;
  return { requests: counted.count(), writes, ms: performance.now() - started };
};

try {
  const first = await sync();
  console.log(
    `first sync: ${first.writes} CRs created, ${first.requests} hub requests, ${(first.ms / 1000).toFixed(1)} s`,
  );
  const idle = await sync();
  console.log(
    `re-expansion, nothing changed: ${idle.requests} hub requests (${idle.writes} writes), ${idle.ms.toFixed(0)} ms`,
  );

  // A status heartbeat on 50 profiles: selection reads none of it, so nothing re-expands.
  await sleep(1000);
  reexpansions = 0;
  await inParallel(50, (i) => putProfile(i));
  await sleep(2000);
  console.log(`status heartbeats on 50 ClusterProfiles: ${reexpansions} re-expansions`);

  // cluster-0002 (dev) becomes prod: it joins serving-prod (and leaves nothing it was in, nodes 74).
  reexpansions = 0;
  changedAt = performance.now();
  await putProfile(2, { env: "prod", team: "team-2" });
  while (reexpansions === 0) await sleep(10);
  const relabel = await sync();
  console.log(
    `relabel one ClusterProfile: watch event to re-expansion ${onChangeLatency.toFixed(0)} ms (incl. ${200} ms debounce); ` +
      `${relabel.requests} hub requests (${relabel.writes} writes), ${relabel.ms.toFixed(0)} ms`,
  );
} finally {
  stage.stop();
  // The CRs have no finalizer (no engine ran): deleting the namespaces removes everything.
  for (const ns of [CR_NS, PROFILES_NS]) await admin.delete("v1", "Namespace", undefined, ns);
  console.log(
    `cleanup: namespaces ${CR_NS} and ${PROFILES_NS} deleted (${KNATIVE_KINDS.join(", ")} of ${OPERATOR_API_VERSION} inside)`,
  );
}
