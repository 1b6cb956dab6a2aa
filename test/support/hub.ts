import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { KubeClient } from "../../src/kube/client.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../../src/kube/kubeconfig.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import { nameOf } from "../../src/kube/object.ts";
import { ROLLOUT_KEY_SECRET, ROLLOUT_STATE_CONFIGMAP } from "../../src/rollout/state.ts";
import type { Sandbox, SandboxCluster } from "../sandbox/index.ts";
import { base64, testdata } from "./access-pki.ts";
import { type LoopbackProxy, startClusterProxy } from "./loopback-proxies.ts";
import { repoRoot } from "./shared.ts";
import { waitUntil } from "./wait.ts";

/** The product's client for a sandbox cluster, as its admin. */
export const adminClient = (cluster: SandboxCluster): KubeClient =>
  clientFromKubeConfig(loadKubeConfig(cluster.adminKubeconfig));

/** Installs the chart's generated CRDs (KnativeServing, KnativeEventing) and waits until they are served. */
export async function installFleetCrds(hub: KubeClient): Promise<void> {
  const dir = join(repoRoot, "charts", "knative-fleet", "crds");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
    const crd = parseAllDocuments(readFileSync(join(dir, file), "utf8"))[0]!.toJSON() as KubeObject;
    await hub.apply(crd);
    await waitUntil(`CRD ${crd.metadata.name} Established`, async () => {
      const live = await hub.get(crd.apiVersion, crd.kind, undefined, nameOf(crd));
      const conditions = (live?.status as { conditions?: { type: string; status: string }[] } | undefined)
        ?.conditions;
      return conditions?.some((c) => c.type === "Established" && c.status === "True") ? true : undefined;
    });
  }
  hub.forgetDiscovery();
}

export async function ensureNamespace(client: KubeClient, name: string): Promise<void> {
  await client.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
}

/**
 * The sandbox's credential Secrets of a spoke (`<name>` for secretreader, `<name>-kubeconfig` for
 * kubeconfig-secretreader), copied from the ClusterProfile's namespace into `namespace`, which must exist: what
 * giving knative-fleet a cluster's credentials amounts to (docs/adding-a-cluster.md). The names copied.
 */
export async function copySpokeCredentials(
  hub: KubeClient,
  from: { namespace: string; name: string },
  namespace: string,
): Promise<string[]> {
  const copied: string[] = [];
  for (const name of [from.name, `${from.name}-kubeconfig`]) {
    const secret = await hub.get("v1", "Secret", from.namespace, name);
    if (!secret) continue;
    await hub.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace },
      data: secret.data,
    } as KubeObject);
    copied.push(name);
  }
  return copied;
}

/**
 * The sandbox's ClusterProfile for a spoke, copied into `namespace` with another server (a proxy in front of
 * the spoke) and that server's CA; the same access providers and plugins.
 */
export async function copyClusterProfile(
  hub: KubeClient,
  from: { namespace: string; name: string },
  namespace: string,
  server: { url: string; caData: string },
  /** Also copy the spoke's credential Secrets here: the copy's credentials namespace (credentialNamespaces). */
  credentialsNamespace?: string,
): Promise<void> {
  if (credentialsNamespace !== undefined) {
    await ensureNamespace(hub, credentialsNamespace);
    await copySpokeCredentials(hub, from, credentialsNamespace);
  }
  const apiVersion = "multicluster.x-k8s.io/v1alpha1";
  const original = await hub.get(apiVersion, "ClusterProfile", from.namespace, from.name);
  if (!original) throw new Error(`no ClusterProfile ${from.namespace}/${from.name} on the hub`);
  const status = original.status as { accessProviders: { cluster: Record<string, unknown> }[] };
  const metadata = { name: from.name, namespace };
  await hub.apply({
    apiVersion,
    kind: "ClusterProfile",
    metadata: { ...metadata, labels: original.metadata.labels },
    spec: original.spec,
  } as KubeObject);
  await hub.apply(
    {
      apiVersion,
      kind: "ClusterProfile",
      metadata,
      status: {
        ...status,
        accessProviders: status.accessProviders.map((p) => ({
          ...p,
          cluster: { ...p.cluster, server: server.url, "certificate-authority-data": server.caData },
        })),
      },
    } as KubeObject,
    { subresource: "status" },
  );
}

/**
 * A fresh install's rollout slate: the state ConfigMap and its key Secret both gone. Deleting the ConfigMap
 * alone is refused once a state was stored (the Secret records it), as it would be in production.
 */
export async function resetRolloutState(hub: KubeClient, namespace: string): Promise<void> {
  await hub.delete("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP).catch(() => {});
  await hub.delete("v1", "Secret", namespace, ROLLOUT_KEY_SECRET).catch(() => {});
}

/**
 * What the chart's Deployment gives a replica: a Pod named POD_NAME, running as the knative-fleet
 * ServiceAccount, in the namespace of its Leases; sharding vouches for a member by it. Returns the Pod
 * (its UID is POD_UID).
 */
export function replicaPod(hub: KubeClient, namespace: string, name: string) {
  return hub.apply({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace },
    spec: {
      serviceAccountName: "knative-fleet",
      automountServiceAccountToken: false,
      containers: [{ name: "knative-fleet", image: "knative-fleet:test" }],
    },
  });
}

/**
 * A reverse proxy in front of a sandbox spoke's API server that counts what reaches it, and a copy of the
 * spoke's ClusterProfile in `namespace` naming the proxy: a benchmark's controller reaches the spoke through
 * it, so the requests counted are that controller's own. It speaks HTTP/2 as the API server does, so each
 * controller connects as it would to the spoke itself (undici and client-go both take HTTP/2 when offered).
 */
export async function countingProxyOf(
  hub: KubeClient,
  sandbox: Sandbox,
  spoke: SandboxCluster & { name: string },
  namespace: string,
): Promise<LoopbackProxy> {
  const proxy = await startClusterProxy({
    key: testdata("server.key"),
    cert: testdata("server.crt"),
    routes: { [spoke.name]: spoke.server },
    upstreamCa: Buffer.from(spoke.caData, "base64").toString("utf8"),
    http2: true,
  });
  await copyClusterProfile(hub, { namespace: sandbox.clusterProfileNamespace, name: spoke.name }, namespace, {
    url: `${proxy.url}/${spoke.name}`,
    caData: base64(testdata("ca.crt")),
  });
  return proxy;
}
