import { X509Certificate } from "node:crypto";
import {
  type AccessProvider,
  accessProvidersOf,
  type ClusterConnection,
  type ClusterProfile,
  CONTROL_PLANE_HEALTHY,
} from "../api/clusterprofile.ts";
import { TargetClusterReason } from "../api/conditions.ts";
import { ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, EXEC_EXTENSION } from "../api/labels.ts";
import { type ClusterRef, clusterKey } from "../fleet/identity.ts";
import { boundCredentialsNamespace } from "./credential-binding.ts";
import { AccessError, accessProviderFailed, remoteClientCreationFailed } from "./errors.ts";
import type { ExecClusterInfo } from "./exec-credential.ts";
import type { ExecPlugin } from "./exec-plugin.ts";
import { type AccessPolicy, SAFE_ACCESS_POLICY } from "./policy.ts";
import type { AccessProviderConfig, EnvVar, ProviderConfig } from "./provider-config.ts";

/**
 * How to reach one spoke, worked out from its ClusterProfile and the provider file. Pure: everything a
 * client needs, and nothing else, so two endpoints with the same fingerprint are interchangeable.
 */
export interface SpokeEndpoint {
  profile: ClusterRef;
  providerName: string;
  server: string;
  /** Base64 of the PEM CA bundle that signs the spoke's serving certificate; system roots when unset. */
  caData: string | undefined;
  tlsServerName: string | undefined;
  insecureSkipTlsVerify: boolean;
  proxyUrl: string | undefined;
  disableCompression: boolean;
  plugin: ExecPlugin;
  /** spec.cluster of the ExecCredential the plugin gets when execConfig.provideClusterInfo is true. */
  execCluster: ExecClusterInfo;
}

/** What the operator allows: the policy, and the namespaces ClusterProfiles are read from (undefined: all). */
interface EndpointAccess {
  policy: AccessPolicy;
  namespaces: readonly string[] | undefined;
}

/** Where a chosen provider's connection details live, for messages that say which field to fix. */
export const connectionField = (ref: ClusterRef, providerName: string): string =>
  `ClusterProfile ${clusterKey(ref)} status.accessProviders[${providerName}].cluster`;

type ProfileHealth = { healthy: true } | { healthy: false; message: string };

/** Whether the cluster manager reports the control plane healthy (ControlPlaneHealthy=True). */
export function profileHealth(profile: ClusterProfile): ProfileHealth {
  const name = `ClusterProfile ${clusterKey(refOf(profile))}`;
  const condition = profile.status?.conditions?.find((c) => c.type === CONTROL_PLANE_HEALTHY);
  if (condition === undefined) {
    return {
      healthy: false,
      message: `${name} has no ${CONTROL_PLANE_HEALTHY} condition: its cluster manager has not reported the cluster healthy yet`,
    };
  }
  if (condition.status === "True") return { healthy: true };
  const detail = [condition.reason, condition.message].filter((s) => s !== "").join(": ");
  return {
    healthy: false,
    message:
      `${name} is not healthy: ${CONTROL_PLANE_HEALTHY}=${condition.status}` +
      `${detail === "" ? "" : ` (${detail})`} since ${condition.lastTransitionTime}`,
  };
}

function refOf(profile: ClusterProfile): ClusterRef {
  return { namespace: profile.metadata.namespace ?? "", name: profile.metadata.name };
}

/**
 * Picks the first provider of the provider file (file order) that the profile offers and builds the
 * endpoint; the credential the plugin reads is bound to the ClusterProfile (credential-binding.ts). The provider's exec config is copied, never changed: upstream appends profile-sourced args to
 * the shared config, so they pile up across clusters. Throws an AccessError saying what to change.
 */
export function spokeEndpoint(
  profile: ClusterProfile,
  providers: ProviderConfig,
  { policy, namespaces }: EndpointAccess = {
    policy: SAFE_ACCESS_POLICY,
    namespaces: [profile.metadata.namespace ?? ""],
  },
): SpokeEndpoint {
  const ref = refOf(profile);
  const name = `ClusterProfile ${clusterKey(ref)}`;
  if (providers.providers.length === 0) {
    throw new AccessError(
      TargetClusterReason.AccessProviderNotConfigured,
      `the access-provider file ${providers.path} configures no providers; add the ones ${name} offers (${offeredNames(profile)})`,
    );
  }
  const offered = accessProvidersOf(profile);
  let provider: AccessProviderConfig | undefined;
  let access: AccessProvider | undefined;
  for (const candidate of providers.providers) {
    access = offered.find((o) => o.name === candidate.name);
    if (access) {
      provider = candidate;
      break;
    }
  }
  if (provider === undefined || access === undefined) {
    const configured = providers.providers.map((p) => p.name).join(", ");
    throw accessProviderFailed(
      offered.length === 0
        ? `${name} offers no access providers (status.accessProviders is empty); its cluster manager has not published how to reach the cluster`
        : `no access provider matches ${name}: it offers ${offeredNames(profile)}, the access-provider file ${providers.path} configures ${configured}; add a provider for one of the offered names`,
    );
  }
  const field = connectionField(ref, provider.name);
  const cluster: ClusterConnection = access.cluster ?? { server: "" };
  const server = checkedServer(cluster.server, field, policy);
  const caData = emptyToUndefined(cluster["certificate-authority-data"]);
  const insecureSkipTlsVerify = cluster["insecure-skip-tls-verify"] ?? false;
  if (caData !== undefined) {
    checkCaBundle(caData, field);
    if (insecureSkipTlsVerify) {
      // client-go refuses this pair too: a CA that is never checked is a configuration mistake.
      throw remoteClientCreationFailed(
        `${field} sets both certificate-authority-data and insecure-skip-tls-verify; use one of them`,
      );
    }
  }
  if (insecureSkipTlsVerify && !policy.allowInsecureServers) {
    throw remoteClientCreationFailed(
      `${field} sets insecure-skip-tls-verify, which would send the credential to whoever answers; ` +
        "set certificate-authority-data instead (an operator can allow it with access.allowInsecureServers)",
    );
  }
  const tlsServerName = emptyToUndefined(cluster["tls-server-name"]);
  const proxyUrl = checkedProxyUrl(emptyToUndefined(cluster["proxy-url"]), field);
  const disableCompression = cluster["disable-compression"] ?? false;
  const extensions = new Map((cluster.extensions ?? []).map((e) => [e.name, e.extension as unknown]));
  const execConfig = extensions.get(EXEC_EXTENSION);
  const credentialsNamespace = boundCredentialsNamespace(execConfig, ref, field, policy, namespaces);

  return {
    profile: ref,
    providerName: provider.name,
    server,
    caData,
    tlsServerName,
    insecureSkipTlsVerify,
    proxyUrl,
    disableCompression,
    plugin: {
      providerName: provider.name,
      apiVersion: provider.execConfig.apiVersion,
      command: provider.execConfig.command,
      args: withProfileArgs(provider, extensions.get(ADDITIONAL_ARGS_EXTENSION), field),
      env: withProfileEnv(provider, extensions.get(ADDITIONAL_ENVS_EXTENSION), field),
      provideClusterInfo: provider.execConfig.provideClusterInfo,
      installHint: provider.execConfig.installHint,
      ...(credentialsNamespace === undefined ? {} : { credentialsNamespace }),
    },
    execCluster: {
      server,
      ...(caData === undefined ? {} : { "certificate-authority-data": caData }),
      ...(tlsServerName === undefined ? {} : { "tls-server-name": tlsServerName }),
      ...(insecureSkipTlsVerify ? { "insecure-skip-tls-verify": true } : {}),
      ...(proxyUrl === undefined ? {} : { "proxy-url": proxyUrl }),
      ...(disableCompression ? { "disable-compression": true } : {}),
      ...(execConfig === undefined ? {} : { config: execConfig }),
    },
  };
}

/**
 * Everything about an endpoint that a client depends on, as one string: a ClusterProfile update that leaves
 * it unchanged (a heartbeat, a condition's time) keeps the client; any other update replaces it.
 */
export function endpointFingerprint(endpoint: SpokeEndpoint): string {
  return JSON.stringify(endpoint);
}

function offeredNames(profile: ClusterProfile): string {
  const names = accessProvidersOf(profile).map((p) => p.name);
  return names.length === 0 ? "none" : names.join(", ");
}

const emptyToUndefined = (value: string | undefined): string | undefined =>
  value === "" ? undefined : value;

function checkedServer(server: string, field: string, policy: AccessPolicy): string {
  if (server === "") throw remoteClientCreationFailed(`${field}.server is empty`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw remoteClientCreationFailed(`${field}.server "${server}" is not a URL`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw remoteClientCreationFailed(`${field}.server "${server}" must be an https:// URL`);
  }
  if (url.protocol === "http:" && !policy.allowInsecureServers) {
    throw remoteClientCreationFailed(
      `${field}.server "${server}" is plain http://: the credential would cross the network in clear text; ` +
        "use https:// (an operator can allow it with access.allowInsecureServers)",
    );
  }
  // Request paths are appended to it: "https://host/" + "/api" would be "//api".
  return server.replace(/\/+$/, "");
}

function checkedProxyUrl(proxyUrl: string | undefined, field: string): string | undefined {
  if (proxyUrl === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(proxyUrl);
  } catch {
    throw remoteClientCreationFailed(`${field}.proxy-url "${proxyUrl}" is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw remoteClientCreationFailed(
      `${field}.proxy-url "${proxyUrl}": only http:// and https:// proxies are supported, not ${url.protocol}`,
    );
  }
  return proxyUrl;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

// Node's TLS layer ignores a CA bundle it cannot parse and falls back to nothing trusted, which would only
// surface later as an unhelpful "unable to verify" error; checking here names the field instead.
function checkCaBundle(caData: string, field: string): void {
  const pem = Buffer.from(caData, "base64").toString("utf8");
  const certificates = pem.match(PEM_CERTIFICATE) ?? [];
  const problem =
    certificates.length === 0
      ? "holds no PEM certificate (it must be base64 of PEM CA certificates)"
      : certificates
          .map((certificate, index) => {
            try {
              new X509Certificate(certificate);
              return undefined;
            } catch (err) {
              return `certificate ${index + 1} cannot be parsed (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
            }
          })
          .find((p) => p !== undefined);
  if (problem !== undefined)
    throw remoteClientCreationFailed(`${field}.certificate-authority-data ${problem}`);
}

function withProfileArgs(provider: AccessProviderConfig, extension: unknown, field: string): string[] {
  const args = [...provider.execConfig.args];
  if (extension === undefined || provider.profileSourcedCLIArgsPolicy === "Ignore") return args;
  if (!Array.isArray(extension) || !extension.every((a) => typeof a === "string")) {
    throw accessProviderFailed(`${field}.extensions[${ADDITIONAL_ARGS_EXTENSION}] must be a list of strings`);
  }
  return [...args, ...extension];
}

/** Where a plugin reads its credential (the credential binding's), never the ClusterProfile's to choose. */
const BOUND_BY_FLEET = ["NAMESPACE", "KUBECONFIG", "KUBERNETES_EXEC_INFO"];

/**
 * execConfig.env with the profile's variables: AppendIfNotExists keeps the provider file's value on a clash,
 * Replace takes the profile's. Order is stable (file first), unlike upstream's map iteration.
 */
function withProfileEnv(provider: AccessProviderConfig, extension: unknown, field: string): EnvVar[] {
  const env = provider.execConfig.env.map((e) => ({ ...e }));
  const policy = provider.profileSourcedEnvVarsPolicy;
  if (extension === undefined || policy === "Ignore") return env;
  if (extension === null || typeof extension !== "object" || Array.isArray(extension)) {
    throw accessProviderFailed(
      `${field}.extensions[${ADDITIONAL_ENVS_EXTENSION}] must be a map of names to values`,
    );
  }
  for (const [name, value] of Object.entries(extension)) {
    if (BOUND_BY_FLEET.includes(name)) {
      throw accessProviderFailed(
        `${field}.extensions[${ADDITIONAL_ENVS_EXTENSION}].${name}: a ClusterProfile may not set ${name}, which ` +
          "chooses where its plugin reads credentials; knative-fleet and the provider file set it",
      );
    }
    if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
      throw accessProviderFailed(
        `${field}.extensions[${ADDITIONAL_ENVS_EXTENSION}].${name} must be a string`,
      );
    }
    const existing = env.find((e) => e.name === name);
    if (existing === undefined) env.push({ name, value: String(value) });
    else if (policy === "Replace") existing.value = String(value);
  }
  return env;
}
