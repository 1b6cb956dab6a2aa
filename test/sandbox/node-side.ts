import { join } from "node:path";
import { type AdminEndpoint, apply, getJson } from "./kube-http.ts";
import type { ClusterPki } from "./pki.ts";
import { startOnFreePort, waitFor } from "./processes.ts";
import { kwokStagesPath, toolPath } from "./tools.ts";

// What runs beside each cluster's kube-apiserver: the processes that make Deployments roll out and
// Services get endpoints, so an install really becomes Ready.

/**
 * The hub and default spokes run every controller; "light" spokes only those an install needs (20 spokes on
 * a small machine); "bare" spokes none: kwok's stages (kwok-bare-stages.yaml) bring Deployments to Available
 * and give every Service with a selector a ready endpoint, for 50 or more spokes (issue #44's big fleet).
 * A bare spoke has no pods, nodes, garbage collector or namespace controller: a deleted namespace stays
 * Terminating, so it serves installs and upgrades, not removals.
 */
export type ClusterKind = "full" | "light" | "bare";

const FAKE_NODES = 2;

/** The processes beside a cluster's API server, by the names the sandbox keeps their pids under. */
export const nodeSideProcesses = (kind: ClusterKind): string[] =>
  kind === "bare" ? ["kwok"] : ["kube-controller-manager", "kube-scheduler", "kwok"];

/**
 * A bare spoke's API server serves only the groups a Knative install (Serving, Eventing, their ingresses)
 * and knative-fleet's checks use: each group left out is storage and a watch cache less (measured: 195
 * against 254 MiB of resident memory for an idle API server).
 */
const BARE_API_GROUPS = [
  "api/v1",
  "apps/v1",
  "apiextensions.k8s.io/v1",
  "admissionregistration.k8s.io/v1",
  "apiregistration.k8s.io/v1",
  "authentication.k8s.io/v1",
  "authorization.k8s.io/v1",
  "autoscaling/v1",
  "autoscaling/v2",
  "batch/v1",
  "certificates.k8s.io/v1",
  "coordination.k8s.io/v1",
  "discovery.k8s.io/v1",
  "events.k8s.io/v1",
  "networking.k8s.io/v1",
  "node.k8s.io/v1",
  "policy/v1",
  "rbac.authorization.k8s.io/v1",
  "resource.k8s.io/v1",
  "scheduling.k8s.io/v1",
  "storage.k8s.io/v1",
];

/** The kube-apiserver flags of a cluster of this kind beside the sandbox's common ones. */
export const apiserverFlags = (kind: ClusterKind): string[] =>
  kind === "bare"
    ? [`--runtime-config=api/all=false,${BARE_API_GROUPS.map((g) => `${g}=true`).join(",")}`]
    : [];

/** What the node side needs of a cluster. */
export interface NodeSideCluster {
  name: string;
  /** Its admin kubeconfig. */
  kubeconfig: string;
  dir: string;
  pki: ClusterPki;
  admin: AdminEndpoint;
}

/** Starts what runs beside a cluster's API server (nodeSideProcesses) and waits until it serves. */
export async function startNodeSide(
  stateDir: string,
  binDir: string,
  c: NodeSideCluster,
  kind: ClusterKind,
  readyTimeoutMs: number,
): Promise<void> {
  if (kind === "bare") {
    await startOnFreePort(stateDir, `${c.name}-kwok`, toolPath(binDir, "kwok"), (port) => [
      `--kubeconfig=${c.kubeconfig}`,
      `--config=${BARE_STAGES}`,
      "--manage-all-nodes=false",
      "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
      `--server-address=127.0.0.1:${port}`,
    ]);
    return;
  }
  await startControllersAndNodes(
    stateDir,
    binDir,
    c,
    kind === "light" ? LIGHT_SPOKE_CONTROLLERS : undefined,
    readyTimeoutMs,
  );
}

const BARE_STAGES = join(import.meta.dirname, "kwok-bare-stages.yaml");

/**
 * What a light spoke's controller-manager runs: Deployments roll out (deployment, replicaset), namespaces
 * are deleted (namespace, garbage collector), pods get their ServiceAccount and the fleet its token
 * (serviceaccount, serviceaccount-token, root CA), Jobs run, kwok's nodes lose their not-ready taint
 * (node lifecycle), webhook Services get their endpoints (endpointslice: an install is Ready only then),
 * aggregated ClusterRoles get their rules (clusterrole-aggregation: the upstream operator reads them back
 * and fails an install whose aggregated role has none, in bench-versus).
 * Left out: endpoints, quotas, HPA, PV, disruption, TTL and the rest, which an install does not wait on.
 */
const LIGHT_SPOKE_CONTROLLERS = [
  "deployment-controller",
  "replicaset-controller",
  "namespace-controller",
  "garbage-collector-controller",
  "serviceaccount-controller",
  "serviceaccount-token-controller",
  "root-ca-certificate-publisher-controller",
  "job-controller",
  "node-lifecycle-controller",
  "endpointslice-controller",
  "clusterrole-aggregation-controller",
];

const ALL_CONTROLLERS = "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller";

/** Controller-manager, scheduler, kwok and the fake nodes they schedule onto. */
async function startControllersAndNodes(
  stateDir: string,
  binDir: string,
  c: NodeSideCluster,
  controllers: readonly string[] | undefined,
  readyTimeoutMs: number,
): Promise<void> {
  const { kubeconfig } = c;
  // What the controller-manager and the scheduler both take: the admin kubeconfig, their port, certificates.
  const served = (port: number, certDir: string) => [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${port}`,
    `--cert-dir=${join(c.dir, certDir)}`,
    "--leader-elect=false",
  ];
  // Each on a port of its own, started again on another should someone take it first (startOnFreePort).
  const controllerManager = startOnFreePort(
    stateDir,
    `${c.name}-kube-controller-manager`,
    toolPath(binDir, "kube-controller-manager"),
    (port) => [
      ...served(port, "kcm"),
      `--cluster-name=${c.name}`,
      `--root-ca-file=${c.pki.caCert}`,
      `--service-account-private-key-file=${c.pki.serviceAccountKey}`,
      "--use-service-account-credentials=false",
      `--controllers=${controllers?.join(",") ?? ALL_CONTROLLERS}`,
      // An API server restarted as a fault (the soak) stalls kwok's node heartbeats for about the default
      // 50 s: the node controller then marks every pod Ready=False, and kwok never sets it back.
      "--node-monitor-grace-period=5m",
    ],
  );
  const scheduler = startOnFreePort(
    stateDir,
    `${c.name}-kube-scheduler`,
    toolPath(binDir, "kube-scheduler"),
    (port) => served(port, "scheduler"),
  );
  const kwok = startOnFreePort(stateDir, `${c.name}-kwok`, toolPath(binDir, "kwok"), (port) => [
    `--kubeconfig=${kubeconfig}`,
    `--config=${kwokStagesPath(binDir)}`,
    "--node-lease-duration-seconds=40",
    "--manage-all-nodes=false",
    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
    // Fake addresses never reach a private range: nothing may dial one from this machine. Nodes stay on
    // loopback; pods take 198.18.0.0/16 (RFC 2544's benchmarking range, routed nowhere and dialled by
    // nothing here: admission webhooks are off), because the API server refuses a loopback address in an
    // EndpointSlice, and an install is Ready only once its webhook Services have endpoints.
    "--cidr=198.18.0.0/16",
    "--node-ip=127.63.0.1",
    `--server-address=127.0.0.1:${port}`,
  ]);
  await Promise.all([controllerManager, scheduler, kwok]);
  for (let i = 0; i < FAKE_NODES; i++) {
    const name = `${c.name}-node-${i}`;
    await apply(c.admin, `/api/v1/nodes/${name}`, {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name,
        annotations: { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
        labels: {
          "kubernetes.io/hostname": name,
          "kubernetes.io/os": "linux",
          "kubernetes.io/arch": "amd64",
          type: "kwok",
        },
      },
    });
  }
  await waitFor(
    `${c.name} fake nodes Ready`,
    async () => {
      const list = (await getJson(c.admin, "/api/v1/nodes")) as { items: NodeLike[] };
      return list.items.filter(isReadyNode).length >= FAKE_NODES;
    },
    readyTimeoutMs,
  );
}

interface NodeLike {
  status?: { conditions?: { type: string; status: string }[] };
}
const isReadyNode = (n: NodeLike): boolean =>
  (n.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
