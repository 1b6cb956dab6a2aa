import { describe, expect, it } from "vitest";
import { AccessError } from "../../../src/access/errors.ts";
import { SAFE_ACCESS_POLICY } from "../../../src/access/policy.ts";
import {
  ADDITIONAL_ARGS_EXTENSION,
  ADDITIONAL_ENVS_EXTENSION,
  endpointFingerprint,
  profileHealth,
  spokeEndpoint,
} from "../../../src/access/spoke-endpoint.ts";
import type { AccessProvider } from "../../../src/api/clusterprofile.ts";
import { base64, clusterProfile, provider, providerConfig, testdata } from "./support.ts";

const CA = base64(testdata("ca.crt"));

function accessError(fn: () => unknown): AccessError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AccessError) return err;
    throw err;
  }
  throw new Error("expected an AccessError");
}

const offering = (...names: string[]): AccessProvider[] =>
  names.map((name) => ({ name, cluster: { server: `https://${name}.example:6443` } }));

describe("spokeEndpoint: choosing the provider", () => {
  it("takes the first provider of the file that the profile offers, not the profile's first", () => {
    const profile = clusterProfile("spoke", {
      accessProviders: offering("kubeconfig-secretreader", "secretreader"),
    });
    const endpoint = spokeEndpoint(
      profile,
      providerConfig(provider("secretreader"), provider("kubeconfig-secretreader")),
    );
    expect(endpoint.providerName).toBe("secretreader");
    expect(endpoint.server).toBe("https://secretreader.example:6443");
    expect(endpoint.plugin.command).toBe("/plugins/secretreader");
  });

  it("reads the deprecated credentialProviders too; accessProviders wins on a shared name", () => {
    const profile = clusterProfile("spoke", {
      accessProviders: [{ name: "secretreader", cluster: { server: "https://current:6443" } }],
      credentialProviders: [
        { name: "secretreader", cluster: { server: "https://deprecated:6443" } },
        { name: "token", cluster: { server: "https://token:6443" } },
      ],
    });
    expect(spokeEndpoint(profile, providerConfig(provider("secretreader"))).server).toBe(
      "https://current:6443",
    );
    expect(spokeEndpoint(profile, providerConfig(provider("token"))).server).toBe("https://token:6443");
  });

  it("fails with AccessProviderFailed naming both sides when nothing matches", () => {
    const profile = clusterProfile("spoke", { accessProviders: offering("oidc", "aws") });
    const err = accessError(() => spokeEndpoint(profile, providerConfig(provider("secretreader"))));
    expect(err.reason).toBe("AccessProviderFailed");
    expect(err.message).toBe(
      "no access provider matches ClusterProfile fleet-system/spoke: it offers oidc, aws, the access-provider " +
        "file /etc/fleet/providers.json configures secretreader; add a provider for one of the offered names",
    );
  });

  it("says when the profile offers no providers at all", () => {
    const err = accessError(() =>
      spokeEndpoint(
        clusterProfile("spoke", { accessProviders: [] }),
        providerConfig(provider("secretreader")),
      ),
    );
    expect(err.reason).toBe("AccessProviderFailed");
    expect(err.message).toContain("offers no access providers");
  });

  it("fails with AccessProviderNotConfigured when the file configures no provider", () => {
    const err = accessError(() => spokeEndpoint(clusterProfile("spoke"), providerConfig()));
    expect(err.reason).toBe("AccessProviderNotConfigured");
    expect(err.message).toContain(
      "configures no providers; add the ones ClusterProfile fleet-system/spoke offers (secretreader)",
    );
  });
});

describe("spokeEndpoint: connection details", () => {
  it("carries every connection field, to the client and to the plugin's ExecCredential", () => {
    const profile = clusterProfile("spoke", {
      accessProviders: [
        {
          name: "secretreader",
          cluster: {
            server: "https://10.0.0.1:6443/",
            "certificate-authority-data": CA,
            "tls-server-name": "spoke.internal",
            "proxy-url": "http://proxy.example:3128",
            "disable-compression": true,
            extensions: [{ name: "client.authentication.k8s.io/exec", extension: { clusterName: "spoke" } }],
          },
        },
      ],
    });
    const endpoint = spokeEndpoint(profile, providerConfig(provider("secretreader")));
    expect(endpoint).toMatchObject({
      profile: { namespace: "fleet-system", name: "spoke" },
      server: "https://10.0.0.1:6443",
      caData: CA,
      tlsServerName: "spoke.internal",
      insecureSkipTlsVerify: false,
      proxyUrl: "http://proxy.example:3128",
      disableCompression: true,
    });
    expect(endpoint.execCluster).toEqual({
      server: "https://10.0.0.1:6443",
      "certificate-authority-data": CA,
      "tls-server-name": "spoke.internal",
      "proxy-url": "http://proxy.example:3128",
      "disable-compression": true,
      config: { clusterName: "spoke" },
    });
  });

  it("refuses insecure-skip-tls-verify unless the operator allows it, then passes it on", () => {
    const profile = clusterProfile("spoke", {
      accessProviders: [
        { name: "secretreader", cluster: { server: "https://s:6443", "insecure-skip-tls-verify": true } },
      ],
    });
    const err = accessError(() => spokeEndpoint(profile, providerConfig(provider("secretreader"))));
    expect(err.reason).toBe("RemoteClientCreationFailed");
    expect(err.message).toBe(
      "ClusterProfile fleet-system/spoke status.accessProviders[secretreader].cluster sets insecure-skip-tls-verify, " +
        "which would send the credential to whoever answers; set certificate-authority-data instead (an operator can " +
        "allow it with access.allowInsecureServers)",
    );
    const endpoint = spokeEndpoint(profile, providerConfig(provider("secretreader")), {
      ...SAFE_ACCESS_POLICY,
      allowInsecureServers: true,
    });
    expect(endpoint.insecureSkipTlsVerify).toBe(true);
    expect(endpoint.execCluster).toEqual({ server: "https://s:6443", "insecure-skip-tls-verify": true });
  });

  it.each([
    [{ server: "" }, "cluster.server is empty"],
    [{ server: "spoke:6443" }, 'cluster.server "spoke:6443" must be an https:// URL'],
    [
      { server: "http://127.0.0.1:8080" },
      'cluster.server "http://127.0.0.1:8080" is plain http://: the credential would cross the network in clear text',
    ],
    [{ server: "not a url" }, 'cluster.server "not a url" is not a URL'],
    [
      { server: "https://s", "certificate-authority-data": base64("hello") },
      "certificate-authority-data holds no PEM certificate",
    ],
    [
      {
        server: "https://s",
        "certificate-authority-data": base64("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"),
      },
      "certificate-authority-data certificate 1 cannot be parsed",
    ],
    [
      { server: "https://s", "certificate-authority-data": CA, "insecure-skip-tls-verify": true },
      "sets both certificate-authority-data and insecure-skip-tls-verify",
    ],
    [
      { server: "https://s", "proxy-url": "socks5://proxy:1080" },
      "only http:// and https:// proxies are supported",
    ],
  ])("refuses unusable details with RemoteClientCreationFailed: %j", (cluster, message) => {
    const profile = clusterProfile("spoke", { accessProviders: [{ name: "secretreader", cluster }] });
    const err = accessError(() => spokeEndpoint(profile, providerConfig(provider("secretreader"))));
    expect(err.reason).toBe("RemoteClientCreationFailed");
    expect(err.message).toContain(
      "ClusterProfile fleet-system/spoke status.accessProviders[secretreader].cluster",
    );
    expect(err.message).toContain(message);
  });
});

describe("spokeEndpoint: profile-sourced args and env (KEP 5339)", () => {
  // The extension payload of the additional-args extension is a list, which ClusterProfileSchema's
  // record-typed `extension` does not describe; these tests build the profile directly.
  const withExtensions = (extensions: { name: string; extension: unknown }[]) =>
    clusterProfile("spoke", {
      accessProviders: [
        {
          name: "p",
          cluster: {
            server: "https://s:6443",
            extensions: extensions as { name: string; extension: Record<string, unknown> }[],
          },
        },
      ],
    });
  const extensions = [
    { name: ADDITIONAL_ARGS_EXTENSION, extension: ["--region", "eu"] },
    { name: ADDITIONAL_ENVS_EXTENSION, extension: { REGION: "eu", SHARED: "from-profile" } },
  ];
  const base = {
    apiVersion: "client.authentication.k8s.io/v1" as const,
    command: "/p",
    args: ["--base"],
    env: [{ name: "SHARED", value: "from-file" }],
    provideClusterInfo: true,
  };

  it("ignores them by default", () => {
    const endpoint = spokeEndpoint(
      withExtensions(extensions),
      providerConfig(provider("p", { execConfig: base })),
    );
    expect(endpoint.plugin.args).toEqual(["--base"]);
    expect(endpoint.plugin.env).toEqual([{ name: "SHARED", value: "from-file" }]);
  });

  it("appends args and adds env without overriding the file (AppendIfNotExists)", () => {
    const config = providerConfig(
      provider("p", {
        execConfig: base,
        profileSourcedCLIArgsPolicy: "Append",
        profileSourcedEnvVarsPolicy: "AppendIfNotExists",
      }),
    );
    const endpoint = spokeEndpoint(withExtensions(extensions), config);
    expect(endpoint.plugin.args).toEqual(["--base", "--region", "eu"]);
    expect(endpoint.plugin.env).toEqual([
      { name: "SHARED", value: "from-file" },
      { name: "REGION", value: "eu" },
    ]);
  });

  it("lets the profile's env win under Replace", () => {
    const config = providerConfig(
      provider("p", { execConfig: base, profileSourcedEnvVarsPolicy: "Replace" }),
    );
    expect(spokeEndpoint(withExtensions(extensions), config).plugin.env).toEqual([
      { name: "SHARED", value: "from-profile" },
      { name: "REGION", value: "eu" },
    ]);
  });

  it("never changes the shared provider config, however many clusters use it", () => {
    const shared = provider("p", {
      execConfig: base,
      profileSourcedCLIArgsPolicy: "Append",
      profileSourcedEnvVarsPolicy: "Replace",
    });
    const config = providerConfig(shared);
    spokeEndpoint(withExtensions(extensions), config);
    const second = spokeEndpoint(withExtensions(extensions), config);
    expect(second.plugin.args).toEqual(["--base", "--region", "eu"]);
    expect(shared.execConfig.args).toEqual(["--base"]);
    expect(shared.execConfig.env).toEqual([{ name: "SHARED", value: "from-file" }]);
  });

  it("rejects payloads of the wrong shape with AccessProviderFailed", () => {
    const config = providerConfig(
      provider("p", {
        execConfig: base,
        profileSourcedCLIArgsPolicy: "Append",
        profileSourcedEnvVarsPolicy: "Replace",
      }),
    );
    const badArgs = accessError(() =>
      spokeEndpoint(
        withExtensions([{ name: ADDITIONAL_ARGS_EXTENSION, extension: { region: "eu" } }]),
        config,
      ),
    );
    expect(badArgs.reason).toBe("AccessProviderFailed");
    expect(badArgs.message).toContain(`extensions[${ADDITIONAL_ARGS_EXTENSION}] must be a list of strings`);
    const badEnv = accessError(() =>
      spokeEndpoint(withExtensions([{ name: ADDITIONAL_ENVS_EXTENSION, extension: ["REGION=eu"] }]), config),
    );
    expect(badEnv.message).toContain("must be a map of names to values");
  });
});

describe("spokeEndpoint: credentials a ClusterProfile author cannot steer", () => {
  const execExtension = (extension: object) =>
    clusterProfile("team-a", {
      accessProviders: [
        {
          name: "secretreader",
          cluster: {
            server: "https://attacker.example:6443",
            extensions: [{ name: "client.authentication.k8s.io/exec", extension }],
          },
        },
      ],
    });
  const config = providerConfig(provider("secretreader"));

  it.each([
    ["clusterName", { clusterName: "knative-fleet-git" }, '"team-a"'],
    ["clusterName", { clusterName: "team-b" }, '"team-a"'],
    ["name", { name: "team-b-kubeconfig", key: "kubeconfig" }, '"team-a" or "team-a-kubeconfig"'],
  ])("refuses an exec extension whose %s names another credential: %j", (key, extension, allowed) => {
    const err = accessError(() => spokeEndpoint(execExtension(extension), config));
    expect(err.reason).toBe("AccessProviderFailed");
    expect(err.message).toBe(
      `ClusterProfile fleet-system/team-a status.accessProviders[secretreader].cluster.extensions[client.authentication.k8s.io/exec].${key} ` +
        `is ${JSON.stringify(Object.values(extension)[0])}, but a ClusterProfile may only name its own credential (${allowed}); ` +
        "rename the credential Secret after the ClusterProfile (an operator can lift this with access.allowForeignCredentialNames)",
    );
  });

  it("accepts the ClusterProfile's own names, and foreign ones when the operator allows them", () => {
    expect(spokeEndpoint(execExtension({ clusterName: "team-a" }), config).execCluster.config).toEqual({
      clusterName: "team-a",
    });
    expect(
      spokeEndpoint(execExtension({ name: "team-a-kubeconfig", key: "kubeconfig" }), config).profile.name,
    ).toBe("team-a");
    const open = { ...SAFE_ACCESS_POLICY, allowForeignCredentialNames: true };
    expect(spokeEndpoint(execExtension({ clusterName: "team-b" }), config, open).execCluster.config).toEqual({
      clusterName: "team-b",
    });
  });
});

describe("endpointFingerprint", () => {
  const config = providerConfig(provider("secretreader"), provider("kubeconfig-secretreader"));
  const fingerprint = (profile: ReturnType<typeof clusterProfile>) =>
    endpointFingerprint(spokeEndpoint(profile, config));
  const base = clusterProfile("spoke");
  const cluster = base.status!.accessProviders![0]!.cluster!;
  const withCluster = (changes: object) =>
    clusterProfile("spoke", {
      accessProviders: [{ name: "secretreader", cluster: { ...cluster, ...changes } }],
    });

  it("stays the same across status-only changes such as a heartbeat", () => {
    const heartbeat = clusterProfile("spoke", {
      conditions: [
        {
          type: "ControlPlaneHealthy",
          status: "True",
          reason: "Healthy",
          message: "still ok",
          lastTransitionTime: "2026-02-02T00:00:00Z",
        },
      ],
      version: { kubernetes: "v1.35.5" },
      properties: [{ name: "region", value: "eu", lastObservedTime: "2026-02-02T00:00:00Z" }],
    });
    expect(fingerprint(heartbeat)).toBe(fingerprint(base));
  });

  it.each([
    ["server", { server: "https://moved.example:6443" }],
    ["CA", { "certificate-authority-data": base64(testdata("other-ca.crt")) }],
    ["TLS server name", { "tls-server-name": "other" }],
    ["proxy", { "proxy-url": "http://proxy:3128" }],
    ["compression", { "disable-compression": true }],
    [
      "extension payload",
      {
        extensions: [
          { name: "client.authentication.k8s.io/exec", extension: { clusterName: "spoke", x: 1 } },
        ],
      },
    ],
  ])("changes with the %s", (_what, changes) => {
    expect(fingerprint(withCluster(changes))).not.toBe(fingerprint(base));
  });

  it("changes with the chosen provider", () => {
    const other = clusterProfile("spoke", {
      accessProviders: [{ name: "kubeconfig-secretreader", cluster: { ...cluster } }],
    });
    expect(fingerprint(other)).not.toBe(fingerprint(base));
  });
});

describe("profileHealth", () => {
  const condition = (status: "True" | "False" | "Unknown") => ({
    type: "ControlPlaneHealthy",
    status,
    reason: "APIServerDown",
    message: "no answer on /readyz",
    lastTransitionTime: "2026-01-01T00:00:00Z",
  });

  it("is healthy only with ControlPlaneHealthy=True", () => {
    expect(profileHealth(clusterProfile("spoke"))).toEqual({ healthy: true });
    expect(profileHealth(clusterProfile("spoke", { conditions: [condition("False")] }))).toEqual({
      healthy: false,
      message:
        "ClusterProfile fleet-system/spoke is not healthy: ControlPlaneHealthy=False (APIServerDown: no answer on /readyz) since 2026-01-01T00:00:00Z",
    });
    expect(profileHealth(clusterProfile("spoke", { conditions: [condition("Unknown")] })).healthy).toBe(
      false,
    );
  });

  it("says when health has not been reported", () => {
    const health = profileHealth(clusterProfile("spoke", { conditions: [] }));
    expect(health.healthy === false && health.message).toContain("has no ControlPlaneHealthy condition");
  });
});
