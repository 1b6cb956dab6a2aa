import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { accessProvidersOf, ClusterProfileSchema } from "../../../src/api/clusterprofile.ts";
import { readCrdSchema, sampleInstance } from "../../support/openapi-schema.ts";
import { clusterProfileCrdPath } from "../../support/shared.ts";

const profileYaml = `
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ClusterProfile
metadata:
  name: prod-eu1
  namespace: fleet
  uid: 5d3c1b7e-0a4f-4c43-8f0e-1b9a7e2c4d11
spec:
  displayName: Production EU 1
  clusterManager:
    name: ocm
status:
  version:
    kubernetes: v1.34.1
  conditions:
    - type: ControlPlaneHealthy
      status: "True"
      reason: Healthy
      message: the control plane answers
      lastTransitionTime: "2025-06-01T10:00:00Z"
  accessProviders:
    - name: secretreader
      cluster:
        server: https://prod-eu1.example.com:6443
        certificate-authority-data: ${Buffer.from("-----BEGIN CERTIFICATE-----").toString("base64")}
        extensions:
          - name: client.authentication.k8s.io/exec
            extension:
              clusterName: prod-eu1
  credentialProviders:
    - name: secretreader
      cluster:
        server: https://stale.example.com:6443
    - name: gcp
      cluster:
        server: https://prod-eu1.gke.example.com
`;

describe("ClusterProfile", () => {
  it("parses a profile with access providers, the exec extension and the health condition", () => {
    const profile = ClusterProfileSchema.parse(parse(profileYaml));
    const [secretReader] = profile.status?.accessProviders ?? [];
    expect(secretReader?.cluster?.server).toBe("https://prod-eu1.example.com:6443");
    expect(secretReader?.cluster?.extensions?.[0]?.extension).toEqual({ clusterName: "prod-eu1" });
    expect(profile.status?.conditions?.[0]?.type).toBe("ControlPlaneHealthy");
  });

  it("prefers accessProviders over the deprecated credentialProviders of the same name", () => {
    const providers = accessProvidersOf(ClusterProfileSchema.parse(parse(profileYaml)));
    expect(providers.map((provider) => [provider.name, provider.cluster?.server])).toEqual([
      ["secretreader", "https://prod-eu1.example.com:6443"],
      ["gcp", "https://prod-eu1.gke.example.com"],
    ]);
  });

  it("accepts every field of the Cluster Inventory API's CRD, and fields a newer version may add", () => {
    const sample = sampleInstance(readCrdSchema(clusterProfileCrdPath(), "v1alpha1"), {
      ".apiVersion": "multicluster.x-k8s.io/v1alpha1",
      ".kind": "ClusterProfile",
      ".metadata": { name: "prod-eu1", namespace: "fleet" },
    }) as { status: object };
    expect(ClusterProfileSchema.parse(sample)).toEqual(sample);
    const newer = { ...sample, status: { ...sample.status, newField: { any: "thing" } } };
    expect(ClusterProfileSchema.parse(newer)).toEqual(newer);
  });
});
