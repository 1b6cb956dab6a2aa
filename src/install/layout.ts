import type { KnativeResource } from "../api/knative.ts";
import type { KubeClient } from "../kube/client.ts";
import { anchorName, installNamespace, ownerOf } from "./identity.ts";

/**
 * Where a CR's install lives on its spoke. Two layouts exist: the upstream Knative Operator up to 1.23
 * installs into the hub CR's namespace (a CR in `team-a` puts Knative in `team-a` on the spoke); from 1.24
 * (knative/operator#2349), and knative-fleet, into `knative-serving` / `knative-eventing`.
 *
 * An install found by its anchor in the hub CR's namespace is adopted where it is, not moved: a move would
 * run a second set of controllers and webhooks beside the first, re-point the cluster-scoped webhooks and
 * roles at half-started ones, and give the Kourier/Istio gateway Service a new address, so there is no move
 * without a window where Knative (or its ingress) is down. Adopted, nothing is recreated: the same objects
 * are applied over where they are, and the cluster keeps one install.
 */
interface InstallLocation {
  namespace: string;
  /** The install found in the older upstream layout (the hub CR's namespace) and adopted there. */
  adopted: boolean;
}

/** The install's namespace on its cluster: the canonical one, unless an older-layout install is found. */
export async function locateInstall(
  client: Pick<KubeClient, "get">,
  resource: KnativeResource,
): Promise<InstallLocation> {
  const canonical = installNamespace(resource);
  const legacy = resource.metadata.namespace;
  if (!resource.spec.clusterProfileRef || !legacy || legacy === canonical) {
    return { namespace: canonical, adopted: false };
  }
  const anchor = anchorName(ownerOf(resource));
  // The canonical namespace wins when both hold an anchor: that install is the one to keep converging.
  if (await client.get("v1", "ConfigMap", canonical, anchor)) return { namespace: canonical, adopted: false };
  if (await client.get("v1", "ConfigMap", legacy, anchor)) return { namespace: legacy, adopted: true };
  return { namespace: canonical, adopted: false };
}
