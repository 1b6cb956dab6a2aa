import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../api/knative.ts";
import type { KubeClient } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { KubeConfig } from "../kube/kubeconfig.ts";

// The hub as the service meets it: checked once at start, and in external mode its CRs watched.

/**
 * Fails fast when the hub is unreachable, naming it: the bare transport error names only an address.
 */
export async function checkHubAnswers(
  hub: Pick<KubeClient, "rest">,
  config: Pick<KubeConfig, "getCurrentCluster">,
): Promise<void> {
  await hub.rest.request({ method: "GET", path: "/version" }).catch((err: unknown) => {
    const server = config.getCurrentCluster()?.server;
    throw new Error(`the hub API server ${server} did not answer GET /version: ${err}`, { cause: err });
  });
}

/**
 * External mode (the upstream operator reconciles the hub CRs): the hub CRs of every kind watched, so what
 * the upstream operator writes is seen; started here, stopped by the caller.
 */
export function watchHubCrs(hub: KubeClient, onChange: () => void): Informer[] {
  const watches = KNATIVE_KINDS.map((kind) => new Informer(hub, OPERATOR_API_VERSION, kind));
  for (const watch of watches) {
    watch.on(() => onChange());
    watch.start();
  }
  return watches;
}
