import type { SandboxCluster } from "../../sandbox/index.ts";
import { kubeRequest } from "../../sandbox/kube-http.ts";

/** apiserver_request_total samples of a sandbox cluster, read as its admin. */
async function requestTotals(cluster: SandboxCluster): Promise<{ labels: string; value: number }[]> {
  const dir = cluster.caFile.replace(/ca\.crt$/, "");
  const res = await kubeRequest(
    {
      server: cluster.server,
      caFile: cluster.caFile,
      certFile: `${dir}admin.crt`,
      keyFile: `${dir}admin.key`,
    },
    "GET",
    "/metrics",
  );
  return res.text
    .split("\n")
    .filter((line) => line.startsWith("apiserver_request_total{"))
    .map((line) => {
      const close = line.lastIndexOf("}");
      return { labels: line.slice(0, close + 1), value: Number(line.slice(close + 1).trim()) };
    });
}

/** Server-side applies the spoke's API server has served (only knative-fleet uses apply on the sandbox). */
export async function applyWrites(cluster: SandboxCluster): Promise<number> {
  return (await requestTotals(cluster))
    .filter((s) => s.labels.includes('verb="APPLY"'))
    .reduce((n, s) => n + s.value, 0);
}

/**
 * Writes to the spoke that could come from knative-fleet: applies, creates, deletes and patches of
 * anything but the objects the sandbox's own controllers keep writing (leases, node and pod status,
 * events, endpoint slices, replica sets).
 */
export async function spokeWriteCount(cluster: SandboxCluster): Promise<number> {
  const background = ["leases", "nodes", "pods", "events", "endpointslices", "endpoints", "replicasets"];
  return (await requestTotals(cluster))
    .filter((s) => /verb="(APPLY|POST|PUT|PATCH|DELETE)"/.test(s.labels))
    .filter((s) => !/subresource="status"/.test(s.labels))
    .filter((s) => !background.some((r) => s.labels.includes(`resource="${r}"`)))
    .reduce((n, s) => n + s.value, 0);
}
