import type { KubeClient } from "../../src/kube/client.ts";
import { field, type KubeObject, nameOf } from "../../src/kube/object.ts";
import { waitUntil } from "./wait.ts";

// Gateway API CRDs on a sandbox spoke, minimal but named as the real ones: what the preflight of a
// gateway-api ingress looks for (it reads names only), and enough for net-gateway-api's objects to apply.

const GATEWAY_API = ["gateways", "httproutes", "referencegrants"];
const KINDS: Record<string, string> = {
  gateways: "Gateway",
  httproutes: "HTTPRoute",
  referencegrants: "ReferenceGrant",
};

/** A minimal CRD named as the Gateway API's: the preflight reads names only. */
const gatewayApiCrd = (plural: string) => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: {
    name: `${plural}.gateway.networking.k8s.io`,
    // A *.k8s.io group needs it, as the real CRDs carry it.
    annotations: { "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466" },
  },
  spec: {
    group: "gateway.networking.k8s.io",
    names: { plural, singular: plural.slice(0, -1), kind: KINDS[plural]!, listKind: `${KINDS[plural]}List` },
    scope: "Namespaced",
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
});

export async function installGatewayApi(client: KubeClient): Promise<void> {
  for (const plural of GATEWAY_API) await client.apply(gatewayApiCrd(plural));
}

export async function removeGatewayApi(client: KubeClient): Promise<void> {
  for (const plural of GATEWAY_API) {
    await client.delete(
      "apiextensions.k8s.io/v1",
      "CustomResourceDefinition",
      undefined,
      `${plural}.gateway.networking.k8s.io`,
    );
  }
  let left: KubeObject[] = [];
  await waitUntil(
    "the Gateway API CRDs gone",
    async () => {
      const found = await Promise.all(
        GATEWAY_API.map((plural) =>
          client.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            undefined,
            `${plural}.gateway.networking.k8s.io`,
          ),
        ),
      );
      left = found.filter((crd) => crd !== undefined);
      return left.length === 0 ? true : undefined;
    },
    120_000,
  ).catch((err: unknown) => {
    // What holds a CRD's deletion is in its Terminating condition (the API server's CRD finalizer says why).
    const held = left.map((crd) => `${nameOf(crd)}: ${JSON.stringify(field(crd, "status", "conditions"))}`);
    throw new Error(`${(err as Error).message}; still there: ${held.join("; ")}`);
  });
}
