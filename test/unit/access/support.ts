import type { AccessProviderConfig, ProviderConfig } from "../../../src/access/provider-config.ts";
import type { ClusterProfile } from "../../../src/api/clusterprofile.ts";
import { base64, testdata } from "../../support/access-pki.ts";

// The access tests' fixtures: the test PKI (test/support/access-pki.ts), providers, ClusterProfiles.
export { base64, testdata, testdataPath } from "../../support/access-pki.ts";
export { capturingLogger } from "../../support/capturing-logger.ts";
export { scratchDir } from "../../support/scratch-dir.ts";

export function provider(name: string, overrides: Partial<AccessProviderConfig> = {}): AccessProviderConfig {
  return {
    name,
    execConfig: {
      apiVersion: "client.authentication.k8s.io/v1",
      command: `/plugins/${name}`,
      args: [],
      env: [],
      provideClusterInfo: true,
    },
    profileSourcedCLIArgsPolicy: "Ignore",
    profileSourcedEnvVarsPolicy: "Ignore",
    ...overrides,
  };
}

export const providerConfig = (...providers: AccessProviderConfig[]): ProviderConfig => ({
  path: "/etc/fleet/providers.json",
  providers,
});

type ProfileStatus = NonNullable<ClusterProfile["status"]>;

/** A healthy ClusterProfile fleet-system/<name> offering `accessProviders` (default: secretreader). */
export function clusterProfile(name: string, status: Partial<ProfileStatus> = {}): ClusterProfile {
  return {
    apiVersion: "multicluster.x-k8s.io/v1alpha1",
    kind: "ClusterProfile",
    metadata: { name, namespace: "fleet-system" },
    spec: { clusterManager: { name: "test" } },
    status: {
      conditions: [
        {
          type: "ControlPlaneHealthy",
          status: "True",
          reason: "Healthy",
          message: "ok",
          lastTransitionTime: "2026-01-01T00:00:00Z",
        },
      ],
      accessProviders: [
        {
          name: "secretreader",
          cluster: {
            server: "https://spoke.example:6443",
            "certificate-authority-data": base64(testdata("ca.crt")),
            extensions: [{ name: "client.authentication.k8s.io/exec", extension: { clusterName: name } }],
          },
        },
      ],
      ...status,
    },
  };
}
