// Measures `knative-fleet plan` on a real Git repository with branches against the real releases of
// ../shared: offline for a change to 1 of N clusters and to all N, cold (the release manifests parsed
// first, as in a CI job) and warm; then, with a sandbox (KNATIVE_FLEET_SANDBOX=<state dir>), live against
// its spokes: reads and server-side dry runs against whatever the spokes hold. With --placement, one
// placement file selecting N clusters (by label, from a snapshot inventory) whose template goes from 1.21 to
// 1.22: N CRs upgraded, offline, with the process's peak RSS (run alone, so the figure is this case's).
// Usage: node scripts/bench-plan.ts [clusters=20] [runs=5]
//        node scripts/bench-plan.ts --placement [clusters=100] [runs=3]
import { rm } from "node:fs/promises";
import { ClusterAccess } from "../src/access/cluster-access.ts";
import { loadProviderConfig } from "../src/access/provider-config.ts";
import { createTargetResolver } from "../src/access/target.ts";
import { DEFAULT_FILE_SELECTION } from "../src/fleet/select.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../src/kube/kubeconfig.ts";
import { buildPlan, type LiveClusters, type PlanInventory, readRevisions } from "../src/plan/index.ts";
import { createKodataSource, ReleaseLoader } from "../src/render/index.ts";
import { DEFAULT_FLEET_SETTINGS } from "../src/sync/settings.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { readSandbox } from "../test/sandbox/sandbox.ts";
import { crText, placementText } from "../test/support/fleet-files.ts";
import { createFleetRepo } from "../test/support/fleet-repo.ts";
import { knativeReleasesDir } from "../test/support/shared.ts";

const placementCase = process.argv[2] === "--placement";
const args = process.argv.slice(placementCase ? 3 : 2);
const clusterCount = Number(args[0] ?? (placementCase ? 100 : 20));
const runs = Number(args[1] ?? (placementCase ? 3 : 5));

const servingFile = (cluster: string) => `clusters/${cluster}/knative-serving.yaml`;
const serving = (cluster: string, scaleToZero: boolean) =>
  crText({
    name: `${cluster}-serving`,
    cluster,
    spec: {
      ingress: { kourier: { enabled: true } },
      config: { autoscaler: { "enable-scale-to-zero": String(scaleToZero) } },
    },
  });

/** A repository with one Serving per cluster on main, branch `one` changing the first, `all` every one. */
async function fleetOf(clusters: readonly string[]) {
  const repo = await createFleetRepo();
  const files = (changed: readonly string[]) =>
    Object.fromEntries(clusters.map((c) => [servingFile(c), serving(c, !changed.includes(c))]));
  await repo.commit("main", files([]));
  await repo.commit("one", files(clusters.slice(0, 1)));
  await repo.commit("all", files(clusters));
  return repo;
}

const newLoader = () => new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** A repository with one placement selecting every cluster labelled env=prod; branch `upgrade` bumps it. */
async function placementFleet() {
  const repo = await createFleetRepo();
  const placement = (version: string) =>
    placementText({
      name: "serving",
      spec: {
        clusterSelectorTerms: [{ labelSelector: { matchLabels: { env: "prod" } } }],
        template: { spec: { version, ingress: { kourier: { enabled: true } } } },
      },
    });
  await repo.commit("main", { "clusters/placements/serving.yaml": placement("1.21") });
  await repo.commit("upgrade", { "clusters/placements/serving.yaml": placement("1.22") });
  return repo;
}

async function bench(
  label: string,
  dir: string,
  head: string,
  clusters?: LiveClusters,
  inventory?: PlanInventory,
): Promise<void> {
  const plan = async (releases: ReleaseLoader) => {
    const started = performance.now();
    const revisions = await readRevisions(dir, { base: "main", head }, DEFAULT_FILE_SELECTION);
    const result = await buildPlan(revisions, {
      releases,
      settings: DEFAULT_FLEET_SETTINGS,
      ...(clusters && { clusters }),
      ...(inventory && { inventory }),
    });
    return { ms: performance.now() - started, result };
  };
  const cold = await plan(newLoader());
  const warmLoader = newLoader();
  await plan(warmLoader);
  const warm: number[] = [];
  for (let run = 0; run < runs; run++) warm.push((await plan(warmLoader)).ms);
  const resources = cold.result.clusters.flatMap((cluster) => cluster.resources);
  const changed = resources.reduce((sum, r) => sum + r.objects.changed.length, 0);
  const sources = [...new Set(resources.map((r) => r.source))].join("+");
  console.log(
    `${label}: ${resources.length} CRs (${sources}), ${changed} objects changed; ` +
      `cold ${cold.ms.toFixed(0)} ms, warm median ${median(warm).toFixed(0)} ms (${runs} runs)`,
  );
}

if (placementCase) {
  const repo = await placementFleet();
  const inventory: PlanInventory = {
    source: "snapshot",
    inventory: {
      clusters: Array.from({ length: clusterCount }, (_, i) => ({
        namespace: "fleet-system",
        name: `cluster-${i + 1}`,
        labels: { env: "prod" },
        properties: new Map<string, string>(),
      })),
      decisions: [],
    },
    kubernetesVersions: new Map(),
  };
  try {
    await bench(
      `offline, a placement over ${clusterCount} clusters, 1.21 -> 1.22`,
      repo.dir,
      "upgrade",
      undefined,
      inventory,
    );
  } finally {
    await rm(repo.dir, { recursive: true, force: true });
  }
  console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MiB`);
  process.exit(0);
}

const offline = await fleetOf(Array.from({ length: clusterCount }, (_, i) => `cluster-${i + 1}`));
try {
  await bench(`offline, 1 of ${clusterCount} clusters changed`, offline.dir, "one");
  await bench(`offline, all ${clusterCount} clusters changed`, offline.dir, "all");
} finally {
  await rm(offline.dir, { recursive: true, force: true });
}

const stateDir = process.env[SANDBOX_ENV];
const sandbox = stateDir ? readSandbox(stateDir) : undefined;
if (!sandbox) {
  console.log(`live: skipped (set ${SANDBOX_ENV} to a running sandbox's state dir)`);
} else {
  const hubConfig = loadKubeConfig(sandbox.hub.adminKubeconfig);
  const hub = clientFromKubeConfig(hubConfig);
  const access = new ClusterAccess({
    hub,
    providers: await loadProviderConfig(sandbox.providerFile),
    namespaces: [sandbox.clusterProfileNamespace],
  });
  const live = await fleetOf(sandbox.spokes.map((spoke) => spoke.name));
  try {
    const clusters = { hub, targets: createTargetResolver(hub, access) };
    await bench("live, 1 sandbox spoke changed", live.dir, "one", clusters);
    await bench(`live, all ${sandbox.spokes.length} sandbox spokes changed`, live.dir, "all", clusters);
  } finally {
    await access.close();
    await rm(live.dir, { recursive: true, force: true });
  }
}
