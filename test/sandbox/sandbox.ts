import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { clusterProfileCrdPath } from "../support/shared.ts";
import { type AdminEndpoint, apply, getJson, kubeRequest } from "./kube-http.ts";
import { apiserverFlags, type ClusterKind, nodeSideProcesses, startNodeSide } from "./node-side.ts";
import { base64File, type ClusterPki, createClusterPki } from "./pki.ts";
import {
  freePort,
  isRunning,
  setNiceness,
  signalProcess,
  startProcess,
  stopAll,
  waitFor,
} from "./processes.ts";
import { stopNodes } from "./real-node.ts";
import { ensureTools, toolPath } from "./tools.ts";

/** One cluster of the sandbox, as tests and the demo see it. */
export interface SandboxCluster {
  name: string;
  server: string;
  /** base64 of the CA certificate PEM, as `certificate-authority-data` carries it. */
  caData: string;
  caFile: string;
  /** kubeconfig path with a system:masters client certificate. */
  adminKubeconfig: string;
}

export interface Sandbox {
  stateDir: string;
  hub: SandboxCluster;
  spokes: SandboxCluster[];
  /** Access-provider config (cluster-inventory-api pkg/access JSON) pointing at the built plugins. */
  providerFile: string;
  /** Hub kubeconfig the exec plugins read Secrets with (context namespace = clusterProfileNamespace). */
  pluginKubeconfig: string;
  binDir: string;
  clusterProfileNamespace: string;
  /** What runs beside each spoke's API server (absent: every controller). */
  spokeKind?: ClusterKind;
}

export const CLUSTER_PROFILE_NAMESPACE = "fleet-system";
const SERVICE_ACCOUNT_NAMESPACE = "kube-system";
const SERVICE_ACCOUNT = "knative-fleet";
const INFO_FILE = "sandbox.json";
const STARTING_AT_ONCE = 12;

interface ClusterRuntime {
  info: SandboxCluster;
  pki: ClusterPki;
  admin: AdminEndpoint;
  dir: string;
}

export function readSandbox(stateDir: string): Sandbox | undefined {
  const file = join(stateDir, INFO_FILE);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as Sandbox) : undefined;
}

/** True when every server of the sandbox in stateDir is still running. */
export function isUp(stateDir: string): boolean {
  const info = readSandbox(stateDir);
  if (!info) return false;
  return processNames(info).every((n) => isRunning(stateDir, n));
}

const processNames = (info: Sandbox): string[] => [
  "etcd",
  ...[info.hub, ...info.spokes].flatMap((c) =>
    ["kube-apiserver", ...nodeSideProcesses(c === info.hub ? "full" : (info.spokeKind ?? "full"))].map(
      (s) => `${c.name}-${s}`,
    ),
  ),
];

export interface UpOptions {
  stateDir: string;
  spokes: number;
  /** What runs beside each spoke's API server (node-side.ts ClusterKind; default "full"). The hub runs all. */
  spokeKind?: ClusterKind;
  log?: (message: string) => void;
}

/**
 * Starts a hub and N spokes on loopback: one etcd (each apiserver under its own key prefix), and per
 * cluster a kube-apiserver with its own CA, RBAC and ServiceAccount tokens, a controller-manager, a
 * scheduler and kwok with fake nodes, so Deployments really become Available and garbage collection runs.
 * Idempotent: a sandbox already up in stateDir is returned as it is; a crashed one is cleaned first.
 */
export async function up(options: UpOptions): Promise<Sandbox> {
  const log = options.log ?? ((m: string) => process.stderr.write(`sandbox: ${m}\n`));
  const { stateDir } = options;
  const existing = readSandbox(stateDir);
  const spokeKind = options.spokeKind ?? "full";
  if (
    existing &&
    existing.spokes.length === options.spokes &&
    (existing.spokeKind ?? "full") === spokeKind &&
    isUp(stateDir)
  ) {
    log(`already up in ${stateDir}`);
    return existing;
  }
  await down(stateDir);
  mkdirSync(stateDir, { recursive: true });

  const binDir = ensureTools();
  const started = Date.now();

  const etcdPort = await freePort();
  const etcdPeerPort = await freePort();
  const etcdUrl = `http://127.0.0.1:${etcdPort}`;
  startProcess(stateDir, "etcd", toolPath(binDir, "etcd"), [
    `--name=sandbox`,
    `--data-dir=${join(stateDir, "etcd")}`,
    `--listen-client-urls=${etcdUrl}`,
    `--advertise-client-urls=${etcdUrl}`,
    `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
    `--initial-cluster=sandbox=http://127.0.0.1:${etcdPeerPort}`,
    "--unsafe-no-fsync", // a throwaway store: durability buys nothing, fsync costs seconds
    "--quota-backend-bytes=4294967296",
    "--log-level=warn",
  ]);
  await waitFor("etcd", async () => (await fetch(`${etcdUrl}/health`)).ok, 30_000);

  const names = ["hub", ...Array.from({ length: options.spokes }, (_, i) => `spoke-${i + 1}`)];
  const kindOf = (name: string): ClusterKind => (name === "hub" ? "full" : spokeKind);
  // API servers start STARTING_AT_ONCE at a time: each takes seconds of CPU to start, and 51 at once on 2
  // cores left some unready after 90 s.
  const clusters: ClusterRuntime[] = [];
  for (let i = 0; i < names.length; i += STARTING_AT_ONCE) {
    const batch = names.slice(i, i + STARTING_AT_ONCE);
    clusters.push(
      ...(await Promise.all(
        batch.map((name) => startCluster(stateDir, binDir, name, etcdUrl, kindOf(name))),
      )),
    );
  }
  log(`apiservers ready after ${((Date.now() - started) / 1000).toFixed(1)}s`);
  await Promise.all(
    clusters.map((c) =>
      startNodeSide(
        stateDir,
        binDir,
        { name: c.info.name, kubeconfig: c.info.adminKubeconfig, dir: c.dir, pki: c.pki, admin: c.admin },
        kindOf(c.info.name),
        // Every cluster's controllers and kwok start at once: 21 of them take longer than 60 s on 2 cores.
        60_000 + 3_000 * clusters.length,
      ),
    ),
  );

  const [hub, ...spokes] = clusters as [ClusterRuntime, ...ClusterRuntime[]];
  const pluginKubeconfig = join(stateDir, "plugin.kubeconfig");
  writeKubeconfig(pluginKubeconfig, hub, hub.pki.adminCert, hub.pki.adminKey, CLUSTER_PROFILE_NAMESPACE);
  const spokeCredentials = await Promise.all(spokes.map((s) => createSpokeCredentials(s, spokeKind)));
  await setUpHub(hub, spokes, spokeCredentials);

  const providerFile = join(stateDir, "provider-config.json");
  writeFileSync(providerFile, `${JSON.stringify(providerConfig(binDir, pluginKubeconfig), null, 2)}\n`);

  const sandbox: Sandbox = {
    stateDir,
    hub: hub.info,
    spokes: spokes.map((s) => s.info),
    providerFile,
    pluginKubeconfig,
    binDir,
    clusterProfileNamespace: CLUSTER_PROFILE_NAMESPACE,
    spokeKind,
  };
  writeFileSync(join(stateDir, INFO_FILE), `${JSON.stringify(sandbox, null, 2)}\n`);
  log(
    `hub + ${spokes.length} spokes up in ${((Date.now() - started) / 1000).toFixed(1)}s (state: ${stateDir})`,
  );
  return sandbox;
}

/** Stops the processes this state dir started and removes the state. */
export async function down(stateDir: string): Promise<string[]> {
  await stopNodes(stateDir);
  const stopped = await stopAll(stateDir);
  rmSync(stateDir, { recursive: true, force: true });
  return stopped;
}

async function startCluster(
  stateDir: string,
  binDir: string,
  name: string,
  etcdUrl: string,
  kind: ClusterKind,
): Promise<ClusterRuntime> {
  const dir = join(stateDir, "clusters", name);
  mkdirSync(dir, { recursive: true });
  const pki = createClusterPki(dir, name);
  const port = await freePort();
  const server = `https://127.0.0.1:${port}`;
  startProcess(stateDir, `${name}-kube-apiserver`, toolPath(binDir, "kube-apiserver"), [
    `--etcd-servers=${etcdUrl}`,
    `--etcd-prefix=/sandbox/${name}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${port}`,
    `--cert-dir=${dir}`,
    `--tls-cert-file=${pki.serverCert}`,
    `--tls-private-key-file=${pki.serverKey}`,
    `--client-ca-file=${pki.caCert}`,
    `--service-account-issuer=https://${name}.sandbox.knative-fleet.invalid`,
    `--service-account-key-file=${pki.serviceAccountPub}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    "--service-cluster-ip-range=10.96.0.0/16",
    "--authorization-mode=Node,RBAC",
    // Webhook pods are fake (kwok): calling them would hang every write they intercept, so admission
    // webhooks are off. Nothing else of the apiserver dials a pod or service address.
    "--disable-admission-plugins=ValidatingAdmissionWebhook,MutatingAdmissionWebhook",
    "--enable-priority-and-fairness=false",
    "--profiling=false",
    "--allow-privileged=true",
    ...apiserverFlags(kind),
  ]);
  const admin: AdminEndpoint = { server, caFile: pki.caCert, certFile: pki.adminCert, keyFile: pki.adminKey };
  await waitFor(
    `${name} kube-apiserver /readyz`,
    async () => (await kubeRequest(admin, "GET", "/readyz")).status === 200,
    90_000,
  );
  const adminKubeconfig = join(dir, "admin.kubeconfig");
  const runtime: ClusterRuntime = {
    info: { name, server, caData: base64File(pki.caCert), caFile: pki.caCert, adminKubeconfig },
    pki,
    admin,
    dir,
  };
  writeKubeconfig(adminKubeconfig, runtime, pki.adminCert, pki.adminKey);
  return runtime;
}

interface SpokeCredentials {
  token: string;
  kubeconfig: string;
}

/**
 * On a spoke: a ServiceAccount with cluster-admin whose token the controller-manager issues (the
 * secretreader credential), and a client-certificate kubeconfig (the kubeconfig-secretreader credential).
 * A bare spoke has no controller-manager: its token comes from the TokenRequest API instead, for a year.
 */
async function createSpokeCredentials(spoke: ClusterRuntime, kind: ClusterKind): Promise<SpokeCredentials> {
  const ns = SERVICE_ACCOUNT_NAMESPACE;
  const base = `/api/v1/namespaces/${ns}`;
  await apply(spoke.admin, `${base}/serviceaccounts/${SERVICE_ACCOUNT}`, {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: SERVICE_ACCOUNT, namespace: ns },
  });
  const binding = (name: string, subject: object) => ({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    subjects: [subject],
  });
  const rbac = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
  await apply(
    spoke.admin,
    `${rbac}/knative-fleet-sa`,
    binding("knative-fleet-sa", { kind: "ServiceAccount", name: SERVICE_ACCOUNT, namespace: ns }),
  );
  await apply(
    spoke.admin,
    `${rbac}/knative-fleet-cert`,
    binding("knative-fleet-cert", {
      apiGroup: "rbac.authorization.k8s.io",
      kind: "User",
      name: "knative-fleet-cert",
    }),
  );
  const token = kind === "bare" ? await requestToken(spoke) : await legacyToken(spoke);
  const kubeconfigPath = join(spoke.dir, "fleet-cert.kubeconfig");
  writeKubeconfig(kubeconfigPath, spoke, spoke.pki.fleetCert, spoke.pki.fleetKey);
  return { token, kubeconfig: readFileSync(kubeconfigPath, "utf8") };
}

async function requestToken(spoke: ClusterRuntime): Promise<string> {
  const path = `/api/v1/namespaces/${SERVICE_ACCOUNT_NAMESPACE}/serviceaccounts/${SERVICE_ACCOUNT}/token`;
  const response = await kubeRequest(spoke.admin, "POST", path, {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: { expirationSeconds: 365 * 24 * 3600 },
  });
  const token = (response.body as { status?: { token?: string } } | undefined)?.status?.token;
  if (response.status !== 201 || !token)
    throw new Error(`${spoke.info.name}: TokenRequest answered ${response.status}`);
  return token;
}

/** The token the controller-manager writes into a service-account-token Secret. */
async function legacyToken(spoke: ClusterRuntime): Promise<string> {
  const ns = SERVICE_ACCOUNT_NAMESPACE;
  const base = `/api/v1/namespaces/${ns}`;
  const secretName = `${SERVICE_ACCOUNT}-token`;
  await apply(spoke.admin, `${base}/secrets/${secretName}`, {
    apiVersion: "v1",
    kind: "Secret",
    type: "kubernetes.io/service-account-token",
    metadata: {
      name: secretName,
      namespace: ns,
      annotations: { "kubernetes.io/service-account.name": SERVICE_ACCOUNT },
    },
  });
  let token = "";
  await waitFor(
    `${spoke.info.name} ServiceAccount token`,
    async () => {
      const secret = (await getJson(spoke.admin, `${base}/secrets/${secretName}`)) as {
        data?: { token?: string };
      };
      token = secret?.data?.token ? Buffer.from(secret.data.token, "base64").toString("utf8") : "";
      return token !== "";
    },
    60_000,
  );
  return token;
}

async function setUpHub(
  hub: ClusterRuntime,
  spokes: ClusterRuntime[],
  creds: SpokeCredentials[],
): Promise<void> {
  const crd = parseAllDocuments(readFileSync(clusterProfileCrdPath(), "utf8"))[0]!.toJSON() as {
    metadata: { name: string };
  };
  const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`;
  await apply(hub.admin, crdPath, crd);
  await waitFor(
    "ClusterProfile CRD Established",
    async () => {
      const got = (await getJson(hub.admin, crdPath)) as {
        status?: { conditions?: { type: string; status: string }[] };
      };
      return (got?.status?.conditions ?? []).some((c) => c.type === "Established" && c.status === "True");
    },
    30_000,
  );
  const ns = CLUSTER_PROFILE_NAMESPACE;
  await apply(hub.admin, `/api/v1/namespaces/${ns}`, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: ns },
  });
  for (const [i, spoke] of spokes.entries()) {
    const name = spoke.info.name;
    const secret = (secretName: string, data: Record<string, string>) =>
      apply(hub.admin, `/api/v1/namespaces/${ns}/secrets/${secretName}`, {
        apiVersion: "v1",
        kind: "Secret",
        type: "Opaque",
        metadata: { name: secretName, namespace: ns },
        stringData: data,
      });
    await secret(name, { token: creds[i]!.token });
    await secret(`${name}-kubeconfig`, { kubeconfig: creds[i]!.kubeconfig });
    await putClusterProfile(hub.admin, ns, name, clusterProfileStatus(spoke.info));
  }
}

/** The ClusterProfile status the sandbox publishes for a spoke: both official plugins, healthy. */
export function clusterProfileStatus(spoke: SandboxCluster): object {
  const cluster = (extension: object) => ({
    server: spoke.server,
    "certificate-authority-data": spoke.caData,
    extensions: [{ name: "client.authentication.k8s.io/exec", extension }],
  });
  return {
    accessProviders: [
      { name: "secretreader", cluster: cluster({ clusterName: spoke.name }) },
      {
        name: "kubeconfig-secretreader",
        cluster: cluster({ name: `${spoke.name}-kubeconfig`, key: "kubeconfig" }),
      },
    ],
    conditions: [
      {
        type: "ControlPlaneHealthy",
        status: "True",
        reason: "Healthy",
        message: "the sandbox apiserver answers /readyz",
        lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      },
    ],
  };
}

/** Creates or replaces a ClusterProfile and writes its status through the /status subresource. */
export async function putClusterProfile(hub: AdminEndpoint, namespace: string, name: string, status: object) {
  const path = `/apis/multicluster.x-k8s.io/v1alpha1/namespaces/${namespace}/clusterprofiles/${name}`;
  await apply(hub, path, {
    apiVersion: "multicluster.x-k8s.io/v1alpha1",
    kind: "ClusterProfile",
    metadata: { name, namespace, labels: { "x-k8s.io/cluster-manager": "knative-fleet-sandbox" } },
    spec: { displayName: name, clusterManager: { name: "knative-fleet-sandbox" } },
  });
  await apply(hub, `${path}/status`, {
    apiVersion: "multicluster.x-k8s.io/v1alpha1",
    kind: "ClusterProfile",
    metadata: { name, namespace },
    status,
  });
}

function providerConfig(binDir: string, pluginKubeconfig: string): object {
  const provider = (name: "secretreader" | "kubeconfig-secretreader") => ({
    name,
    execConfig: {
      apiVersion: "client.authentication.k8s.io/v1",
      command: toolPath(binDir, name),
      env: [{ name: "KUBECONFIG", value: pluginKubeconfig }],
      provideClusterInfo: true,
      interactiveMode: "Never",
    },
  });
  return { providers: [provider("secretreader"), provider("kubeconfig-secretreader")] };
}

function writeKubeconfig(
  path: string,
  c: ClusterRuntime,
  certFile: string,
  keyFile: string,
  namespace?: string,
) {
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: c.info.name, cluster: { server: c.info.server, "certificate-authority-data": c.info.caData } },
    ],
    users: [
      {
        name: c.info.name,
        user: { "client-certificate-data": base64File(certFile), "client-key-data": base64File(keyFile) },
      },
    ],
    contexts: [
      {
        name: c.info.name,
        context: { cluster: c.info.name, user: c.info.name, ...(namespace ? { namespace } : {}) },
      },
    ],
    "current-context": c.info.name,
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
}

/**
 * Freezes a cluster's kube-apiserver (SIGSTOP): connections to it are accepted and then hang, the worst
 * case for a client (a refused connection fails at once). `resumeApiserver` thaws it.
 */
export function stopApiserver(stateDir: string, cluster: string): void {
  signalProcess(stateDir, `${cluster}-kube-apiserver`, "SIGSTOP");
}

export function resumeApiserver(stateDir: string, cluster: string): void {
  signalProcess(stateDir, `${cluster}-kube-apiserver`, "SIGCONT");
}

/**
 * Sets the nice value of every spoke process (API servers, kwok, controllers). A benchmark of the hub puts
 * the spokes, other machines in a real fleet, behind the hub and its replicas on this machine's CPU; 0 puts
 * them back.
 */
export function setSpokesNiceness(stateDir: string, niceness: number): void {
  const info = readSandbox(stateDir);
  if (!info) throw new Error(`no sandbox in ${stateDir}`);
  for (const name of processNames(info)) {
    if (info.spokes.some((s) => name.startsWith(`${s.name}-`))) setNiceness(stateDir, name, niceness);
  }
}

/** Resident memory (kB) of every sandbox process, summed, for the notes. */
export function memoryKb(stateDir: string): number {
  const info = readSandbox(stateDir);
  if (!info) return 0;
  let total = 0;
  for (const name of processNames(info)) {
    try {
      const { pid } = JSON.parse(readFileSync(join(stateDir, "pids", `${name}.json`), "utf8")) as {
        pid: number;
      };
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      total += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    } catch {
      // exited
    }
  }
  return total;
}
