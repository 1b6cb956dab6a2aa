import { describe, expect, it } from "vitest";
import { admitHubCr, admitHubObject, type HubCrPolicy } from "../../../src/admission/hub-cr.ts";
import { DEFAULT_LOCATION_POLICY } from "../../../src/admission/locations.ts";

// The words of the hub CR admission's refusals, where a list is shown or a field is missing.

const policy = (over: Partial<HubCrPolicy> = {}): HubCrPolicy => ({
  crNamespaces: ["knative-fleet"],
  clusterProfileNamespaces: ["fleet-system"],
  hubInstall: false,
  locations: DEFAULT_LOCATION_POLICY,
  kodataDir: undefined,
  ...over,
});

describe("admitHubCr: refusal words", () => {
  it("lists every ClusterProfile namespace that may be targeted, comma-separated", () => {
    const cr = {
      metadata: { namespace: "knative-fleet" },
      spec: { clusterProfileRef: { name: "spoke-1", namespace: "kube-system" } },
    };
    expect(admitHubCr(cr, policy({ clusterProfileNamespaces: ["fleet-system", "team-a"] }))).toEqual({
      field: "spec.clusterProfileRef.namespace",
      message:
        "ClusterProfiles in namespace kube-system may not be targeted " +
        "(allowedClusterProfileNamespaces: fleet-system, team-a)",
    });
  });
});

describe("admitHubObject: an object without a namespace", () => {
  it("is refused for its missing namespace, whatever namespaces are reconciled", () => {
    const object = {
      metadata: {},
      spec: { clusterProfileRef: { name: "spoke-1", namespace: "fleet-system" } },
    };
    const refused = { field: "metadata.namespace", message: "is not set: a hub CR is in a namespace" };
    expect(admitHubObject(object, policy({ crNamespaces: ["knative-fleet", "team-a"] }))).toEqual(refused);
    expect(admitHubObject(object, policy({ crNamespaces: undefined }))).toEqual(refused);
  });
});
