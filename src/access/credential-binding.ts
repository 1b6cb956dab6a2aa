import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { EXEC_EXTENSION } from "../api/labels.ts";
import { type ClusterRef, clusterKey } from "../fleet/identity.ts";
import { accessProviderFailed } from "./errors.ts";
import type { AccessPolicy } from "./policy.ts";

// The bundled credential plugins (cluster-inventory-api's secretreader and kubeconfig-secretreader) read
// the Secret the ClusterProfile's exec extension names (`clusterName`; `name`, `key`, `namespace`), in the
// namespace of their kubeconfig's context unless `namespace` says another, and the credential then goes to
// the server the same ClusterProfile names. Nothing in the exchange carries the ClusterProfile's namespace,
// so a name alone is ambiguous as soon as ClusterProfiles come from two namespaces. Here the credential is
// bound to the whole identity: the name to the ClusterProfile's name, the namespace to one of the
// ClusterProfile namespace's own (access.credentialNamespaces), which the plugin is pointed at.

/**
 * Checks the exec extension against the ClusterProfile it came from and says where the plugin must read:
 * the credentials namespace of the ClusterProfile's namespace, or undefined for its kubeconfig's own when
 * only one ClusterProfile namespace is read (no other ClusterProfile can have the same name). Throws an
 * AccessError (AccessProviderFailed) naming the field to fix. `allowForeignCredentialNames` turns it off.
 */
export function boundCredentialsNamespace(
  execConfig: unknown,
  ref: ClusterRef,
  field: string,
  policy: AccessPolicy,
  profileNamespaces: readonly string[] | undefined,
): string | undefined {
  if (policy.allowForeignCredentialNames) return undefined;
  const config =
    execConfig !== null && typeof execConfig === "object" ? (execConfig as Record<string, unknown>) : {};
  const extension = `${field}.extensions[${EXEC_EXTENSION}]`;
  const own = { clusterName: [ref.name], name: [ref.name, `${ref.name}-kubeconfig`] };
  for (const key of ["clusterName", "name"] as const) {
    const value = config[key];
    if (value === undefined) continue;
    if (typeof value !== "string" || !own[key].includes(value)) {
      throw accessProviderFailed(
        `${extension}.${key} is ${JSON.stringify(value)}, but a ClusterProfile may only name its own credential ` +
          `(${own[key].map((a) => JSON.stringify(a)).join(" or ")}); rename the credential Secret after the ` +
          "ClusterProfile (an operator can lift this with access.allowForeignCredentialNames)",
      );
    }
  }
  const mapped = policy.credentialNamespaces[ref.namespace];
  const single = profileNamespaces?.length === 1 && profileNamespaces[0] === ref.namespace;
  // A plugin that picks no credential by name (a cloud's own) has nothing to mix up.
  const namesOne = ["clusterName", "name", "namespace"].some((key) => config[key] !== undefined);
  if (mapped === undefined && !single && namesOne) {
    throw accessProviderFailed(
      `ClusterProfiles are read from ${profileNamespaces === undefined ? "every namespace" : profileNamespaces.join(", ")}, ` +
        `so a credential named after ClusterProfile ${clusterKey(ref)} could be another namespace's ` +
        `${ref.name}: give namespace ${ref.namespace} a credentials namespace of its own in ` +
        "access.credentialNamespaces (chart: multicluster.access.credentialNamespaces)",
    );
  }
  const named = config.namespace;
  if (named !== undefined && named !== mapped) {
    throw accessProviderFailed(
      `${extension}.namespace is ${JSON.stringify(named)}, but a ClusterProfile's credential is read from ` +
        (mapped === undefined
          ? "the credentials namespace of the plugin's kubeconfig; leave namespace out"
          : `${mapped}, the credentials namespace of ${ref.namespace} (access.credentialNamespaces)`),
    );
  }
  return mapped;
}

interface PluginKubeconfig {
  "current-context"?: string;
  contexts?: { name: string; context?: { namespace?: string } }[];
  clusters?: { cluster?: Record<string, unknown> }[];
  users?: { user?: Record<string, unknown> }[];
}

type PluginContext = NonNullable<PluginKubeconfig["contexts"]>[number];

async function readPluginKubeconfig(
  path: string,
): Promise<{ config: PluginKubeconfig | null; current: PluginContext | undefined }> {
  let parsed: unknown;
  try {
    parsed = parse(await readFile(path, "utf8"));
  } catch (err) {
    throw accessProviderFailed(`cannot read the plugin's kubeconfig ${path}: ${(err as Error).message}`);
  }
  const config = parsed as PluginKubeconfig | null;
  return { config, current: config?.contexts?.find((c) => c.name === config?.["current-context"]) };
}

/** The namespace the current context of the plugin's kubeconfig names, where it reads Secrets; or none. */
export async function kubeconfigNamespace(path: string): Promise<string | undefined> {
  return (await readPluginKubeconfig(path)).current?.context?.namespace || undefined;
}

/**
 * The environment a plugin run reads its credential with: NAMESPACE set to where the binding says, since
 * some plugins (OCM's cp-creds) read `$NAMESPACE` before their kubeconfig, and fall back to the Pod's own
 * namespace. A NAMESPACE the provider file sets to another namespace would undo the binding: refused.
 */
export function withBoundNamespace(
  env: NodeJS.ProcessEnv,
  readsIn: string | undefined,
  subject: string,
): NodeJS.ProcessEnv {
  if (readsIn === undefined) return env;
  if (env.NAMESPACE !== undefined && env.NAMESPACE !== readsIn) {
    throw accessProviderFailed(
      `${subject} has NAMESPACE=${JSON.stringify(env.NAMESPACE)} in execConfig.env, but its credentials are read ` +
        `in ${readsIn}; leave NAMESPACE out: knative-fleet sets it on every run to where the credential binding reads`,
    );
  }
  return { ...env, NAMESPACE: readsIn };
}

let privateDir: Promise<string> | undefined;

/** This process's folder for kubeconfig copies: made on first use, removed with what is in it at exit. */
function copiesDir(): Promise<string> {
  privateDir ??= mkdtemp(join(tmpdir(), "knative-fleet-plugin-kubeconfigs-")).then((dir) => {
    // Synchronous, as an exit handler must be: the copies of plugins still running go too.
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    return dir;
  });
  return privateDir;
}

/**
 * Runs `use` with a copy of the kubeconfig at `path` pointed at `namespace` (kubeconfigInNamespace), and
 * removes the copy when `use` settles: a copy names the hub user's credential files or holds its keys, so
 * it lives only as long as the plugin run that reads it, never as long as a client or the process.
 */
export async function withKubeconfigInNamespace<T>(
  path: string,
  namespace: string,
  use: (copy: string) => Promise<T>,
): Promise<T> {
  const copy = await kubeconfigInNamespace(path, namespace);
  try {
    return await use(copy);
  } finally {
    await rm(copy, { force: true });
  }
}

/**
 * A copy of the kubeconfig at `path` whose current context names `namespace`, for a plugin that reads its
 * Secrets in its kubeconfig's namespace: the same cluster and user, file references made absolute (they
 * are relative to the original's folder), written 0600 under a new name into a folder only this process
 * uses. The caller removes it (withKubeconfigInNamespace); what is left goes at exit.
 */
export async function kubeconfigInNamespace(path: string, namespace: string): Promise<string> {
  const { config, current } = await readPluginKubeconfig(path);
  if (!config || !current) {
    throw accessProviderFailed(
      `the plugin's kubeconfig ${path} has no current context, so it cannot be pointed at the credentials namespace ${namespace}`,
    );
  }
  current.context = { ...current.context, namespace };
  const absolute = (entry: Record<string, unknown> | undefined, keys: readonly string[]) => {
    for (const key of keys) {
      const value = entry?.[key];
      if (typeof value === "string" && value !== "" && !isAbsolute(value))
        entry![key] = resolve(dirname(path), value);
    }
  };
  for (const { cluster } of config.clusters ?? []) absolute(cluster, ["certificate-authority"]);
  for (const { user } of config.users ?? [])
    absolute(user, ["client-certificate", "client-key", "tokenFile"]);
  // A name per run: two runs at once each remove their own copy.
  const copy = join(await copiesDir(), `${randomUUID()}.yaml`);
  await writeFile(copy, stringify(config), { mode: 0o600 });
  return copy;
}
