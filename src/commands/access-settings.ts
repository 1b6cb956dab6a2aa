import { type AccessPolicy, SAFE_ACCESS_POLICY } from "../access/policy.ts";
import { DEFAULT_CLUSTER_PROFILE_NAMESPACE, namespaceAllowlist } from "../access/tenancy.ts";
import { ConfigError, loadServiceConfig } from "../service/config.ts";
import { UsageError } from "./command.ts";

/** Which ClusterProfiles a command may use and what they may ask for: the service's, so they agree. */
export interface AccessSettings {
  /** ClusterProfile namespaces; undefined for every namespace. */
  namespaces: readonly string[] | undefined;
  policy: AccessPolicy;
}

/**
 * The access settings of the service's config file (`run --config`), or the service's defaults without
 * one: `clusters` and `plan` then see exactly the spokes the reconcile may reach.
 */
export function accessSettings(configFile: string | undefined): AccessSettings {
  if (configFile === undefined) {
    return { namespaces: [DEFAULT_CLUSTER_PROFILE_NAMESPACE], policy: SAFE_ACCESS_POLICY };
  }
  try {
    const config = loadServiceConfig(configFile);
    return { namespaces: namespaceAllowlist(config.allowedClusterProfileNamespaces), policy: config.access };
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
}
