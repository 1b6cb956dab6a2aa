import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { inventoryClusterOf } from "../../../src/placement/inventory.ts";
import { clusterWindowClosed } from "../../../src/rollout/windows.ts";
import { rolloutText } from "../../support/fleet-files.ts";

// Per-cluster windows chosen over ClusterProfiles as cluster managers publish them, read through the same
// inventory reading the service uses: OCM (cluster claims as status.properties, the cluster-manager label),
// GKE Fleet (its namespace and label, no properties), KubeFleet (its properties), and a hostile one.

const profiles = parse(`
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata:
    name: ocm-tokyo
    namespace: open-cluster-management
    labels: { x-k8s.io/cluster-manager: open-cluster-management, open-cluster-management.io/cluster-name: ocm-tokyo }
  spec: { displayName: ocm-tokyo, clusterManager: { name: open-cluster-management } }
  status:
    properties:
      - { name: region.open-cluster-management.io, value: apac }
      - { name: time-zone.example.com, value: Asia/Tokyo }
      - { name: time-zone.example.com, value: Europe/Paris }
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata:
    name: gke-eu
    namespace: fleet-cluster-inventory
    labels: { x-k8s.io/cluster-manager: gke-fleet, fleet.gke.io/project: example }
  spec: { displayName: gke-eu, clusterManager: { name: gke-fleet } }
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata:
    name: member-1
    namespace: fleet-system
    labels: { x-k8s.io/cluster-manager: kubefleet }
  spec: { displayName: member-1, clusterManager: { name: kubefleet } }
  status:
    properties:
      - { name: kubernetes-fleet.io/node-count, value: "3" }
      - { name: region.open-cluster-management.io, value: apac }
      - { name: time-zone.example.com, value: ${"x".repeat(5000)} }
      - { name: 7, value: Asia/Tokyo }
      - null
`) as KubeObject[];
const clusters = profiles.map((p) => inventoryClusterOf(p)!);

// APAC clusters (by a property) change 01:00-05:00 in their own zone; GKE's (by the manager label) on
// Saturdays in UTC.
const spec = buildFleetModel(
  [
    {
      path: "clusters/rollout.yaml",
      text: rolloutText({
        waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "member-1" }] }],
        clusterWindows: [
          {
            name: "apac-nights",
            clusterSelectorTerms: [
              {
                propertySelector: {
                  matchExpressions: [
                    { name: "region.open-cluster-management.io", operator: "In", values: ["apac"] },
                  ],
                },
              },
            ],
            timeZoneProperty: "time-zone.example.com",
            windows: [{ start: "01:00", end: "05:00" }],
          },
          {
            name: "gke-saturdays",
            clusterSelectorTerms: [
              { labelSelector: { matchLabels: { "x-k8s.io/cluster-manager": "gke-fleet" } } },
            ],
            windows: [{ days: ["Sat"], start: "00:00", end: "23:59" }],
          },
        ],
      }),
    },
  ],
  { defaultNamespace: "knative-fleet" },
).rollout.policy!.rollout.spec;

const closed = (name: string, at: string) => {
  const cluster = clusters.find((c) => c.name === name)!;
  return clusterWindowClosed(spec, cluster, cluster, new Date(at));
};

describe("per-cluster windows over published ClusterProfiles", () => {
  it("reads OCM's cluster claims: the region selects, the first time-zone claim is the zone", () => {
    // 17:30 UTC is 02:30 in Tokyo (the first claim), 18:30 in Paris (the second, ignored).
    expect(closed("ocm-tokyo", "2026-03-02T17:30:00Z")).toBeUndefined();
    expect(closed("ocm-tokyo", "2026-03-02T10:00:00Z")).toBe(
      "outside its maintenance windows apac-nights (daily 01:00-05:00 Asia/Tokyo)",
    );
  });

  it("selects GKE Fleet's by its manager label; without properties its windows are read in UTC", () => {
    expect(closed("gke-eu", "2026-03-07T12:00:00Z")).toBeUndefined();
    expect(closed("gke-eu", "2026-03-06T12:00:00Z")).toBe(
      "outside its maintenance windows gke-saturdays (Sat 00:00-23:59 UTC)",
    );
  });

  it("a KubeFleet member whose zone property is hostile reads closed at every hour, saying so briefly", () => {
    for (let hour = 0; hour < 24; hour++) {
      const why = closed("member-1", `2026-03-02T${String(hour).padStart(2, "0")}:00:00Z`);
      expect(why).toMatch(/^its time zone property time-zone\.example\.com is "x{64}", no IANA time zone/);
      expect(why!.length).toBeLessThan(220);
    }
  });
});
