import type { PruneCandidate } from "../../../src/mirror/decide.ts";
import { cluster } from "./support.ts";

// The gate tests' fleet: c1 the canary, c2 and c3 the ring-b wave (by label), c4 in the remaining wave; a
// minute's soak, five minutes to become healthy; a fixed clock.

export const INVENTORY = [
  cluster("c1"),
  cluster("c2", { ring: "b" }),
  cluster("c3", { ring: "b" }),
  cluster("c4"),
];
export const POLICY: Record<string, unknown> = {
  waves: [
    { name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] },
    { name: "ring-b", clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }] },
  ],
  soak: "1m",
  timeLimit: "5m",
};
export const T0 = Date.parse("2026-03-02T10:00:00Z");
export const at = (seconds: number) => new Date(T0 + seconds * 1000);

/** A hub CR of the fleet on `clusterName`, being deleted when `deleting`. */
export const live = (name: string, clusterName: string, deleting = false) => ({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: {
    name,
    namespace: "knative-fleet",
    labels: { "app.kubernetes.io/managed-by": "knative-fleet" },
    ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
  },
  spec: { clusterProfileRef: { namespace: "fleet-system", name: clusterName } },
});

/** The mirror's prune candidate `name`. */
export const candidate = (name: string): PruneCandidate => ({
  kind: "KnativeServing",
  namespace: "knative-fleet",
  name,
});
