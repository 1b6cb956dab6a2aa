import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../src/kube/object.ts";
import { crText } from "./fleet-files.ts";
import { waitUntil } from "./wait.ts";

// The sandbox fleet of the scale and service tests and bench-scale: a Serving with Kourier per spoke, in
// knative-fleet, and how to read and drop its hub CRs.

export const FLEET_NAMESPACE = "knative-fleet";

/** A fleet file for Serving 1.22 with Kourier on a spoke (the sandbox serves no Istio), plus extra config. */
export function servingFile(cluster: string, config: Record<string, Record<string, string>> = {}) {
  return {
    [`clusters/serving-${cluster}.yaml`]: crText({
      name: `serving-${cluster}`,
      cluster,
      version: "1.22",
      spec: {
        ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
        config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" }, ...config },
      },
    }),
  };
}

/** Deletes the fleet's hub CRs without cleanup (finalizers dropped): the end of a test. */
export async function dropHubCrs(hub: KubeClient): Promise<void> {
  for (const kind of ["KnativeServing", "KnativeEventing"]) {
    // A CRD just established may answer 429 ("storage is (re)initializing") for a moment.
    const list = await waitUntil(`the ${kind} list served`, () =>
      hub.list(OPERATOR_API_VERSION, kind, { namespace: FLEET_NAMESPACE }).catch(() => undefined),
    );
    for (const cr of list.items) {
      await hub
        .mergePatch(OPERATOR_API_VERSION, kind, FLEET_NAMESPACE, nameOf(cr), {
          metadata: { finalizers: null },
        })
        .catch(() => {});
      await hub.delete(OPERATOR_API_VERSION, kind, FLEET_NAMESPACE, nameOf(cr)).catch(() => {});
    }
  }
}

export const conditionsOf = (cr: KubeObject | undefined) =>
  (cr?.status as { conditions?: { type: string; status: string; message?: string }[] } | undefined)
    ?.conditions ?? [];

/** Whether the hub CR is Ready=True. */
export async function isReady(hub: KubeClient, kind: string, name: string): Promise<boolean> {
  const cr = await hub.get(OPERATOR_API_VERSION, kind, FLEET_NAMESPACE, name);
  return conditionsOf(cr).some((c) => c.type === "Ready" && c.status === "True");
}
