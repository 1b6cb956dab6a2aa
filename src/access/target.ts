import { HttpMethod, RequestContext } from "@kubernetes/client-node";
import type { TargetClusterReason } from "../api/conditions.ts";
import type { ClusterProfileRef } from "../api/knative.ts";
import { KubeClient } from "../kube/client.ts";
import { RestClient, type RestTransport } from "../kube/rest.ts";
import type { ClusterAccess } from "./cluster-access.ts";
import type { SpokeKubeConfig } from "./spoke-kubeconfig.ts";

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
 * Targets: the hub itself for a CR without clusterProfileRef, else the spoke its ClusterProfile names,
 * through the access module (which caches one client per ClusterProfile and replaces it when the
 * ClusterProfile's connection changes; the KubeClient here follows that replacement).
 */
export function createTargetResolver(
  hub: KubeClient,
  access: ClusterAccess,
  options: { hubInstall: boolean } = { hubInstall: true },
): TargetResolver {
  const clients = new WeakMap<SpokeKubeConfig, KubeClient>();
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
      const kubeConfig = result.spoke.kubeConfig;
      let client = clients.get(kubeConfig);
      if (!client) {
        client = new KubeClient(new RestClient(spokeTransport(kubeConfig)));
        clients.set(kubeConfig, client);
      }
      return { ok: true, client, cluster: clusterLabel(ref), local: false };
    },
  };
}

/** Requests to a spoke carry the exec-plugin credential and use the access module's connection pool. */
function spokeTransport(kubeConfig: SpokeKubeConfig): RestTransport {
  return {
    server: kubeConfig.endpoint.server,
    async connect() {
      const credential = await kubeConfig.authenticator.credential();
      const context = new RequestContext(kubeConfig.endpoint.server, HttpMethod.GET);
      await kubeConfig.applySecurityAuthentication(context);
      const dispatcher = context.getDispatcher();
      if (!dispatcher) throw new Error(`no connection pool for ${kubeConfig.endpoint.server}`);
      return {
        dispatcher,
        headers: { ...context.getHeaders() },
        rejected: () => kubeConfig.authenticator.rejected(credential),
      };
    },
  };
}
