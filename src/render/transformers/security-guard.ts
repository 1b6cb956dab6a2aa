import type { KnativeServingSpec } from "../../api/knative.ts";
import { setConfigMapData, type Transformer, unchanged, updateWhere } from "../manifest.ts";

/** The queue-proxy feature Security-Guard's gate needs: the pod's annotations mounted into the queue-proxy. */
export const QUEUE_PROXY_MOUNT_PODINFO = "queueproxy.mount-podinfo";

/**
 * With Security-Guard enabled, config-features allows mounting the pod info into the queue-proxy, whatever
 * spec.config says (upstream's securityguard.go runs after the config transformer and sets it the same way).
 */
export function allowQueueProxyPodInfo(security: KnativeServingSpec["security"]): Transformer {
  if (security?.securityGuard?.enabled !== true) return unchanged;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.kind === "ConfigMap" && manifest.metadata.name === "config-features",
      (configMap) => {
        setConfigMapData(configMap, { [QUEUE_PROXY_MOUNT_PODINFO]: "allowed" });
      },
    );
}
