import type { TargetClusterReason } from "../api/conditions.ts";
import { type ClusterRef, clusterLabel } from "../fleet/identity.ts";
import { KubeClient } from "../kube/client.ts";
import { KubeApiError } from "../kube/rest.ts";
import type { ClusterAccess } from "./cluster-access.ts";
import { requestKubernetesVersion, type SpokeConnection } from "./spoke-connection.ts";

/** The cluster a CR installs onto, or why it cannot be reached. */
export type TargetResolution =
  | {
      ok: true;
      client: KubeClient /** "hub" or `namespace/name` of the ClusterProfile. */;
      cluster: string;
      local: boolean;
      /**
       * The cluster's Kubernetes version (GET /version's gitVersion), kept with the client: read once, again
       * with `fresh`. Undefined when /version answers with an error status (a 403, say).
       */
      kubernetesVersion(options?: { fresh?: boolean }): Promise<string | undefined>;
    }
  | { ok: false; reason: TargetClusterReason; message: string };

export interface TargetResolver {
  resolve(ref: ClusterRef | undefined): Promise<TargetResolution>;
}

/** A client and its cluster's Kubernetes version, read at most once unless asked afresh. */
interface VersionedClient {
  client: KubeClient;
  version: Promise<string | undefined> | undefined;
}

/**
 * Targets: the hub itself for a CR without clusterProfileRef (only with `hubInstall`, off by default: it
 * takes cluster-admin on the hub), else the spoke its ClusterProfile names,
 * through the access module (which caches one client per ClusterProfile and replaces it when the
 * ClusterProfile's connection changes; the KubeClient here follows that replacement).
 */
export function createTargetResolver(
  hub: KubeClient,
  access: ClusterAccess,
  options: { hubInstall: boolean } = { hubInstall: false },
): TargetResolver {
  const spokes = new WeakMap<SpokeConnection, VersionedClient>();
  const local: VersionedClient = { client: hub, version: undefined };
  return {
    async resolve(ref) {
      if (!ref && !options.hubInstall) {
        return {
          ok: false,
          reason: "HubInstallDisabled",
          message:
            "installing on the hub itself is disabled (hubInstall.enabled=false); set spec.clusterProfileRef",
        };
      }
      if (!ref) return resolved(local, "hub", true);
      const result = await access.resolve(ref);
      if (!result.ok) return result;
      const { connection, kubernetesVersion } = result.spoke;
      let spoke = spokes.get(connection);
      if (!spoke) {
        // Every request to a spoke goes through the access module's one transport (src/kube/transport.ts);
        // its first GET /version, made when the connection was checked, is the version until asked afresh.
        spoke = { client: new KubeClient(connection.rest), version: Promise.resolve(kubernetesVersion) };
        spokes.set(connection, spoke);
      }
      return resolved(spoke, clusterLabel(ref), false);
    },
  };
}

function resolved(target: VersionedClient, cluster: string, local: boolean): TargetResolution {
  return {
    ok: true,
    client: target.client,
    cluster,
    local,
    kubernetesVersion({ fresh = false } = {}) {
      if (fresh || target.version === undefined) {
        const reading = readKubernetesVersion(target.client);
        target.version = reading;
        // A failed read (the cluster unreachable) is not kept: the next one asks again.
        reading.catch(() => {
          if (target.version === reading) target.version = undefined;
        });
      }
      return target.version;
    },
  };
}

/** The cluster's Kubernetes version (GET /version); undefined when it answers without one. */
export async function readKubernetesVersion(client: KubeClient): Promise<string | undefined> {
  try {
    return await requestKubernetesVersion(client.rest);
  } catch (err) {
    // The cluster answered, but not with its version: unknown, not a failure.
    if (err instanceof KubeApiError) return undefined;
    throw err;
  }
}
