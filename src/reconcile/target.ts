import type { ClusterAccess } from "../access/cluster-access.ts";
import type { SpokeConnection } from "../access/spoke-connection.ts";
import type { TargetClusterReason } from "../api/conditions.ts";
import type { ClusterProfileRef, KnativeResource } from "../api/knative.ts";
import { KubeClient } from "../kube/client.ts";
import type { RestClient } from "../kube/rest.ts";

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

const REMOTE_NAMESPACE = { KnativeServing: "knative-serving", KnativeEventing: "knative-eventing" } as const;

/**
 * Where the component is installed, as upstream decides: on a spoke, the component's canonical namespace;
 * on the hub itself, the CR's own namespace.
 */
export function installNamespace(resource: KnativeResource): string {
  if (resource.spec.clusterProfileRef) return REMOTE_NAMESPACE[resource.kind];
  return resource.metadata.namespace ?? "default";
}

/** `namespace/name` of the ClusterProfile, or "hub" for a local install. */
export const clusterLabel = (ref: ClusterProfileRef | undefined): string =>
  ref ? `${ref.namespace}/${ref.name}` : "hub";

export const sameClusterProfile = (
  a: ClusterProfileRef | undefined,
  b: ClusterProfileRef | undefined,
): boolean =>
  (a === undefined && b === undefined) ||
  (a !== undefined && b !== undefined && a.name === b.name && a.namespace === b.namespace);

/**
 * Targets: the hub itself for a CR without clusterProfileRef, else the spoke its ClusterProfile names,
 * through the access module (which caches one client per ClusterProfile and replaces it when the
 * ClusterProfile's connection changes; the KubeClient here follows that replacement).
 */
export function createTargetResolver(
  hub: KubeClient,
  access: ClusterAccess,
  options: { hubInstall: boolean } = { hubInstall: true },
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
        client = new KubeClient(spokeTransport(connection));
        clients.set(connection, client);
      }
      return { ok: true, client, cluster: clusterLabel(ref), local: false };
    },
  };
}

/** Every request to a spoke goes through the access module's one transport (src/kube/transport.ts). */
const spokeTransport = (connection: SpokeConnection): RestClient => connection.rest;
