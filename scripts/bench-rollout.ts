// Measures what the rollout gate costs the hub: on a real sandbox hub (KNATIVE_FLEET_SANDBOX=<state dir>),
// N KnativeServing CRs (one per cluster) under a policy of a canary, a ring and the remaining wave, with a
// version bump rolled out through the service's path (RolloutStage + mirror). Each sync's hub requests are
// counted (the stage's state read and write, the waiting-annotation patches, Events, and the mirror's own
// lists and applies) and compared with a sync of the same fleet without a policy. The bench plays the hub
// controller: after each sync it reports every changed CR healthy (a status write it does not count).
// Usage: node scripts/bench-rollout.ts [crs=20]
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../src/api/knative.ts";
import type { FleetFile } from "../src/fleet/model.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../src/kube/kubeconfig.ts";
import { EventRecorder } from "../src/observability/events.ts";
import { silentLogger } from "../src/observability/log.ts";
import { RolloutStage } from "../src/rollout/stage.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { readSandbox } from "../test/sandbox/sandbox.ts";
import { resetRolloutState } from "../test/support/hub.ts";
import { syncInto } from "../test/support/sync.ts";

const crCount = Number(process.argv[2] ?? 20);
const NS = "bench-rollout";
const REPOSITORY = "https://git.example/bench/rollout.git";
const stateDir = process.env[SANDBOX_ENV];
if (!stateDir) {
  console.log(`set ${SANDBOX_ENV}=<sandbox state dir>: the bench counts requests to a real hub`);
  process.exit(0);
}
const sandbox = readSandbox(stateDir);
if (!sandbox) throw new Error(`no sandbox in ${stateDir}`);
const hubConfig = loadKubeConfig(sandbox.hub.adminKubeconfig);

const clusters = Array.from({ length: crCount }, (_, i) => `c-${String(i).padStart(3, "0")}`);
const ringSize = Math.max(1, Math.floor(crCount / 4));
const POLICY = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata: { name: bench }
spec:
  maxUnavailable: 100%
  soak: 0s
  waves:
  - name: canary
    clusterProfiles: [{ namespace: fleet-system, name: ${clusters[0]} }]
  - name: ring
    clusterProfiles: [${clusters
      .slice(1, 1 + ringSize)
      .map((name) => `{ namespace: fleet-system, name: ${name} }`)
      .join(", ")}]
`;
const files = (version: string, policy: boolean): FleetFile[] => [
  ...clusters.map((cluster) => ({
    path: `clusters/${cluster}.yaml`,
    text: `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata: { name: serving-${cluster}, namespace: ${NS} }
spec:
  version: "${version}"
  clusterProfileRef: { namespace: fleet-system, name: ${cluster} }
`,
  })),
  ...(policy ? [{ path: "clusters/rollout.yaml", text: POLICY }] : []),
];

/** The real hub client, counting its requests by method. */
function countingClient() {
  const client = clientFromKubeConfig(hubConfig);
  const sent: Record<string, number> = {};
  const request = client.rest.request.bind(client.rest);
  client.rest.request = ((req) => {
    sent[req.method] = (sent[req.method] ?? 0) + 1;
    return request(req);
  }) as typeof client.rest.request;
  return {
    client,
    take: () => {
      const counts = { ...sent };
      for (const key of Object.keys(sent)) delete sent[key];
      return counts;
    },
  };
}

const admin = clientFromKubeConfig(hubConfig);
await admin.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
for (const kind of KNATIVE_KINDS) {
  for (const cr of (await admin.list(OPERATOR_API_VERSION, kind, { namespace: NS })).items) {
    await admin.delete(OPERATOR_API_VERSION, kind, NS, cr.metadata.name!);
  }
}
await resetRolloutState(admin, NS);

const counted = countingClient();
const events = new EventRecorder({ client: counted.client, component: "bench-rollout", log: silentLogger });
const stage = new RolloutStage({
  hub: counted.client,
  namespace: NS,
  source: { repository: REPOSITORY, branch: "main" },
  // Nothing fails in this benchmark, so nothing is reverted and no earlier commit is read.
  modelAt: (commit) => Promise.reject(new Error(`bench-rollout keeps no commit ${commit}`)),
  inventory: () =>
    clusters.map((name) => ({ namespace: "fleet-system", name, labels: {}, properties: new Map() })),
  events,
  log: silentLogger,
  checkIntervalMs: 60_000,
  onDue: () => {},
});

/** The hub controller's part: every CR reports healthy on its current generation. */
async function reportHealthy(hub: KubeClient) {
  for (const cr of (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items) {
    const condition = (type: string) => ({
      type,
      status: "True",
      lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    });
    await hub.apply(
      {
        apiVersion: OPERATOR_API_VERSION,
        kind: "KnativeServing",
        metadata: { name: cr.metadata.name, namespace: NS },
        status: {
          observedGeneration: cr.metadata.generation,
          conditions: ["InstallSucceeded", "DeploymentsAvailable", "DependenciesInstalled", "Ready"].map(
            condition,
          ),
        },
      },
      { subresource: "status" },
    );
  }
}

async function sync(fleet: FleetFile[], commit: string, gated: boolean) {
  // Without the stage at all: the sync alone, the baseline the gate is measured against.
  const result = await syncInto(counted.client, {
    files: fleet,
    namespace: NS,
    commit,
    repository: REPOSITORY,
    ...(gated && { rollout: stage }),
  });
  const report = result.rollout;
  await new Promise((resolve) => setTimeout(resolve, 50)); // the stage's Events are sent without waiting
  const requests = counted.take();
  const applied = result.resources.filter((r) => r.action === "create" || r.action === "update").length;
  return { requests, applied, wave: report?.wave ?? report?.phase ?? "-" };
}

const total = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
const show = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort()
    .map(([method, n]) => `${method} ${n}`)
    .join(", ");

await sync(files("1.21", false), "c1", false);
await reportHealthy(admin);
const baseline = await sync(files("1.21", false), "c1", false);
console.log(`${crCount} CRs; waves: canary 1, ring ${ringSize}, remaining ${crCount - 1 - ringSize}`);
console.log(
  `sync without a policy, nothing to change: ${total(baseline.requests)} requests (${show(baseline.requests)})`,
);
const adopted = await sync(files("1.21", true), "c2", true);
console.log(`policy added, no CR changes: ${total(adopted.requests)} requests (${show(adopted.requests)})`);
const idle = await sync(files("1.21", true), "c2", true);
console.log(
  `sync with the policy, nothing to change: ${total(idle.requests)} requests (${show(idle.requests)})`,
);

console.log("\nversion bump 1.21 -> 1.22, the controller reporting healthy after each sync:");
console.log("| sync | open wave after | CRs applied | hub requests | extra over the mirror's | by method |");
console.log("| --- | --- | --- | --- | --- | --- |");
const bumped = files("1.22", true);
for (let i = 1; i <= 6; i++) {
  const step = await sync(bumped, "c3", true);
  const extra = total(step.requests) - total(baseline.requests) - step.applied;
  console.log(
    `| ${i} | ${step.wave} | ${step.applied} | ${total(step.requests)} | ${extra} | ${show(step.requests)} |`,
  );
  await reportHealthy(admin);
  if (step.wave === "Complete") break;
}
stage.stop();
for (const cr of (await admin.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NS })).items) {
  await admin.delete(OPERATOR_API_VERSION, "KnativeServing", NS, cr.metadata.name!);
}
