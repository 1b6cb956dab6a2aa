// Measures reaching a sandbox spoke through src/access: time to the first request on a cold cluster (plugin
// run, TLS handshake, /version probe, first API call) and the per-request cost once warm, next to a stock
// @kubernetes/client-node KubeConfig (fetch) and to bare undici with one kept-alive pool, all with the same token.
// Usage: KNATIVE_FLEET_SANDBOX=<state dir> node scripts/bench-access.ts [--requests N] [--cold-runs N]
import { parseArgs } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { Agent } from "undici";
import { ClusterAccess } from "../src/access/cluster-access.ts";
import { runExecPlugin } from "../src/access/exec-plugin.ts";
import { loadProviderConfig } from "../src/access/provider-config.ts";
import type { SpokeConnection } from "../src/access/spoke-connection.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../src/kube/kubeconfig.ts";
import { loadSandbox } from "../test/sandbox/index.ts";

const { values } = parseArgs({ options: { requests: { type: "string" }, "cold-runs": { type: "string" } } });
const requests = Number(values.requests ?? "300");
const coldRuns = Number(values["cold-runs"] ?? "5");

const sandbox = loadSandbox();
const spoke = sandbox.spokes[0]!;
const ref = { namespace: sandbox.clusterProfileNamespace, name: spoke.name };
const hub = clientFromKubeConfig(loadKubeConfig(sandbox.hub.adminKubeconfig));
const providers = await loadProviderConfig(sandbox.providerFile);
const namespaces = [sandbox.clusterProfileNamespace];

const readDefault = (connection: SpokeConnection) =>
  connection.rest.request({ method: "GET", path: "/api/v1/namespaces/default" });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => `${x.toFixed(2)} ms`;

console.log(`spoke ${spoke.name} (${spoke.server}), provider file ${sandbox.providerFile}\n`);

console.log(
  `cold cluster, ${coldRuns} runs (new ClusterAccess each: plugin + TLS + /version probe, then GET /api/v1/namespaces/default):`,
);
const resolveTimes: number[] = [];
const firstRequestTimes: number[] = [];
const pluginTimes: number[] = [];
for (let run = 0; run < coldRuns; run++) {
  const access = new ClusterAccess({ hub, providers, namespaces });
  const started = performance.now();
  const result = await access.resolve(ref);
  if (!result.ok) throw new Error(`${result.reason}: ${result.message}`);
  const resolved = performance.now();
  await readDefault(result.spoke.connection);
  resolveTimes.push(resolved - started);
  firstRequestTimes.push(performance.now() - started);
  const { plugin, execCluster } = result.spoke.connection.endpoint;
  const pluginStarted = performance.now();
  await runExecPlugin(plugin, execCluster, { timeoutMs: 10_000, logger: pino({ level: "silent" }) });
  pluginTimes.push(performance.now() - pluginStarted);
  await access.close();
}
console.log(`  resolve (ClusterProfile GET, plugin, probe)   median ${ms(median(resolveTimes))}`);
console.log(`    of which the plugin run alone               median ${ms(median(pluginTimes))}`);
console.log(`  time to first request                         median ${ms(median(firstRequestTimes))}\n`);

console.log(`warm, ${requests} rounds of GET /api/v1/namespaces/default, the clients taking turns:`);
const access = new ClusterAccess({ hub, providers, namespaces });
const watched = new ClusterAccess({ hub, providers, namespaces });
await watched.watch();
const result = await access.resolve(ref);
if (!result.ok) throw new Error(`${result.reason}: ${result.message}`);
// All three send the same bearer token over TLS with the same CA: only the client library differs.
const { token } = await result.spoke.connection.authenticator.credential();
const stock = new KubeConfig();
stock.loadFromClusterAndUser(
  { name: spoke.name, server: spoke.server, caData: spoke.caData, skipTLSVerify: false },
  { name: "bench", token },
);
const pool = new Agent({ connect: { ca: Buffer.from(spoke.caData, "base64").toString("utf8") } });
const ours = result.spoke.connection;
const stockApi = stock.makeApiClient(CoreV1Api);
const contenders: [string, () => Promise<unknown>][] = [
  ["one spoke transport (exec plugin credential)", () => readDefault(ours)],
  ["stock client-node KubeConfig (same token)", () => stockApi.readNamespace({ name: "default" })],
  [
    "bare undici, one kept-alive pool",
    async () => {
      const response = await pool.request({
        origin: spoke.server,
        path: "/api/v1/namespaces/default",
        method: "GET",
        headers: { authorization: `Bearer ${token}`, accept: "application/json" },
      });
      await response.body.json();
    },
  ],
  ["resolve() of a cached client, watching", () => watched.resolve(ref)],
  ["resolve() of a cached client, no watch", () => access.resolve(ref)],
];
const samples = contenders.map((): number[] => []);
for (let round = -20; round < requests; round++) {
  for (const [index, [, request]] of contenders.entries()) {
    const started = performance.now();
    await request();
    if (round >= 0) samples[index]!.push(performance.now() - started); // the first 20 rounds warm up
  }
}
const medians = samples.map(median);
for (const [index, [label]] of contenders.entries()) {
  const sorted = [...samples[index]!].sort((a, b) => a - b);
  console.log(
    `  ${label.padEnd(44)} median ${ms(medians[index]!)}  p90 ${ms(sorted[Math.floor(sorted.length * 0.9)]!)}`,
  );
}
console.log(
  `\nper-request overhead over bare undici: one spoke transport ${ms(medians[0]! - medians[2]!)}, ` +
    `stock KubeConfig ${ms(medians[1]! - medians[2]!)}`,
);
await Promise.all([access.close(), watched.close(), pool.close()]);
