import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ApiException, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { type AccessPolicy, SAFE_ACCESS_POLICY } from "../../../src/access/policy.ts";
import type { AccessProviderConfig, ProviderConfigState } from "../../../src/access/provider-config.ts";
import { parseProviderConfig } from "../../../src/access/provider-config.ts";
import type { SpokeConnection } from "../../../src/access/spoke-connection.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type FixturePlugin, fixturePlugin } from "../../fixtures/plugins/index.ts";
import { loadSandbox, type Sandbox, type SandboxCluster } from "../../sandbox/index.ts";
import { adminClient } from "../../support/hub.ts";
import { scratchDir } from "../../support/scratch-dir.ts";

export const sandbox: Sandbox = loadSandbox();
export const NAMESPACE = sandbox.clusterProfileNamespace;
const scratch = scratchDir();

/** The product's hub client, as the sandbox's admin: what ClusterAccess reads ClusterProfiles with. */
export const hubClient = (): KubeClient => adminClient(sandbox.hub);

export function hubKubeConfig(): KubeConfig {
  const hub = new KubeConfig();
  hub.loadFromFile(sandbox.hub.adminKubeconfig);
  return hub;
}

const customObjects = hubKubeConfig().makeApiClient(CustomObjectsApi);
const resource = { group: "multicluster.x-k8s.io", version: "v1alpha1", plural: "clusterprofiles" };

/** The sandbox's provider file, as the reconciler would load it. */
export const sandboxProviders = (): ProviderConfigState => ({
  enabled: true,
  config: parseProviderConfig(readFileSync(sandbox.providerFile, "utf8"), sandbox.providerFile),
});

/** The sandbox's provider named `real`, with its execConfig changed: e.g. a fixture plugin wrapping it. */
export function sandboxProvider(real: "secretreader" | "kubeconfig-secretreader"): AccessProviderConfig {
  const state = sandboxProviders();
  if (!state.enabled) throw new Error("unreachable");
  return state.config.providers.find((p) => p.name === real)!;
}

/**
 * A provider named `name` that runs fixture plugin `plugin` with `env` (plus the sandbox plugin's own env),
 * counting its runs in the returned file.
 */
export function fixtureProvider(
  name: string,
  plugin: FixturePlugin,
  env: Record<string, string> = {},
): { provider: AccessProviderConfig; runs: () => number } {
  const runLog = join(mkdtempSync(join(scratch, "provider-")), "runs");
  writeFileSync(runLog, "");
  const base = sandboxProvider("secretreader");
  const provider: AccessProviderConfig = {
    ...base,
    name,
    execConfig: {
      ...base.execConfig,
      command: fixturePlugin(plugin),
      env: [
        ...base.execConfig.env,
        { name: "FIXTURE_RUN_LOG", value: runLog },
        ...Object.entries(env).map(([n, value]) => ({ name: n, value })),
      ],
    },
  };
  return { provider, runs: () => readFileSync(runLog, "utf8").split("\n").filter(Boolean).length };
}

export const providersOf = (...providers: AccessProviderConfig[]): ProviderConfigState => ({
  enabled: true,
  config: { path: "test-providers.json", providers },
});

/** A status like the sandbox's own for `spoke`, offering `providerName` with `extension` (default: secretreader's). */
export function profileStatus(
  spoke: SandboxCluster,
  options: {
    providerName?: string;
    extension?: object;
    caData?: string;
    healthy?: "True" | "False";
    message?: string;
  } = {},
): object {
  return {
    accessProviders: [
      {
        name: options.providerName ?? "secretreader",
        cluster: {
          server: spoke.server,
          "certificate-authority-data": options.caData ?? spoke.caData,
          extensions: [
            {
              name: "client.authentication.k8s.io/exec",
              extension: options.extension ?? { clusterName: spoke.name },
            },
          ],
        },
      },
    ],
    conditions: [
      {
        type: "ControlPlaneHealthy",
        status: options.healthy ?? "True",
        reason: options.healthy === "False" ? "Unreachable" : "Healthy",
        message: options.message ?? "set by the access integration tests",
        lastTransitionTime: "2026-01-01T00:00:00Z",
      },
    ],
  };
}

/** Creates or updates ClusterProfile fleet-system/<name> and writes its status. */
export async function putProfile(name: string, status: object, namespace = NAMESPACE): Promise<void> {
  let existing: { metadata: object };
  try {
    existing = (await customObjects.getNamespacedCustomObject({ ...resource, namespace, name })) as {
      metadata: object;
    };
  } catch (err) {
    if (!(err instanceof ApiException && err.code === 404)) throw err;
    existing = (await customObjects.createNamespacedCustomObject({
      ...resource,
      namespace,
      body: {
        apiVersion: "multicluster.x-k8s.io/v1alpha1",
        kind: "ClusterProfile",
        metadata: { name, namespace },
        spec: { displayName: name, clusterManager: { name: "access-tests" } },
      },
    })) as { metadata: object };
  }
  await customObjects.replaceNamespacedCustomObjectStatus({
    ...resource,
    namespace,
    name,
    body: {
      apiVersion: "multicluster.x-k8s.io/v1alpha1",
      kind: "ClusterProfile",
      metadata: existing.metadata,
      status,
    },
  });
}

export async function deleteProfile(name: string, namespace = NAMESPACE): Promise<void> {
  try {
    await customObjects.deleteNamespacedCustomObject({ ...resource, namespace, name });
  } catch (err) {
    if (!(err instanceof ApiException && err.code === 404)) throw err;
  }
}

/** The spoke's namespace names, read through the connection's transport. */
export async function listNamespaces(connection: SpokeConnection): Promise<string[]> {
  const list = await connection.rest.request<{ items: { metadata: { name: string } }[] }>({
    method: "GET",
    path: "/api/v1/namespaces",
  });
  return list.body.items.map((n) => n.metadata.name);
}

/**
 * The test ClusterProfiles here borrow the sandbox spokes' Secrets under names of their own, which the safe
 * default refuses (a ClusterProfile may only name its own credential); tests of other behaviour allow it.
 */
export const BORROWED_CREDENTIALS: AccessPolicy = {
  ...SAFE_ACCESS_POLICY,
  allowForeignCredentialNames: true,
};
