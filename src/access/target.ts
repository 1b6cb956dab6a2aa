import type { TargetClusterReason } from "../api/conditions.ts";
import type { ClusterProfileRef } from "../api/knative.ts";
import { KubeClient } from "../kube/client.ts";
import type { ClusterAccess } from "./cluster-access.ts";
import type { SpokeConnection } from "./spoke-connection.ts";

/** The cluster a CR installs onto, or why it cannot be reached. */
export type TargetResolution =
  | {
      ok: true;
      client: KubeClient /** "hub" or `namespace/name` of the ClusterProfile. */;
      cluster: string;
      local: boolean;
    }
  | { ok: false; reason: TargetClusterReason; message: string };

export interface TargetResolver {
  resolve(ref: ClusterProfileRef | undefined): Promise<TargetResolution>;
}

/** `namespace/name` of the ClusterProfile, or "hub" for a local install. */
export const clusterLabel = (ref: ClusterProfileRef | undefined): string =>
  ref ? `${ref.namespace}/${ref.name}` : "hub";

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
  const clients = new WeakMap<SpokeConnection, KubeClient>();
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
      if (!ref) return { ok: true, client: hub, cluster: "hub", local: true };
      const result = await access.resolve(ref);
      if (!result.ok) return result;
      const connection = result.spoke.connection;
      let client = clients.get(connection);
      if (!client) {
        // Every request to a spoke goes through the access module's one transport (src/kube/transport.ts).
        client = new KubeClient(connection.rest);
        clients.set(connection, client);
      }
      return { ok: true, client, cluster: clusterLabel(ref), local: false };
    },
  };
}
