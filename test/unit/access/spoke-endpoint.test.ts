import { mkdtemp, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { kubeconfigInNamespace } from "../../../src/access/credential-binding.ts";
import { AccessError } from "../../../src/access/errors.ts";
import { AccessPolicySchema, SAFE_ACCESS_POLICY } from "../../../src/access/policy.ts";
import { endpointFingerprint, profileHealth, spokeEndpoint } from "../../../src/access/spoke-endpoint.ts";
import type { AccessProvider } from "../../../src/api/clusterprofile.ts";
import { ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION } from "../../../src/api/labels.ts";
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
      policy: { ...SAFE_ACCESS_POLICY, allowInsecureServers: true },
      namespaces: ["fleet-system"],
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

  it("refuses a ClusterProfile that sets where its plugin reads (NAMESPACE, KUBECONFIG), under either policy", () => {
    // Issue #43: OCM's cp-creds reads $NAMESPACE first; a profile that sets it chose the credential it gets.
    for (const policy of ["AppendIfNotExists", "Replace"] as const) {
      const config = providerConfig(provider("p", { execConfig: base, profileSourcedEnvVarsPolicy: policy }));
      for (const name of ["NAMESPACE", "KUBECONFIG"]) {
        const refused = accessError(() =>
          spokeEndpoint(
            withExtensions([{ name: ADDITIONAL_ENVS_EXTENSION, extension: { [name]: "team-b" } }]),
            config,
          ),
        );
        expect(refused.reason).toBe("AccessProviderFailed");
        expect(refused.message).toContain(
          `extensions[${ADDITIONAL_ENVS_EXTENSION}].${name}: a ClusterProfile may not set ${name}`,
        );
      }
    }
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
    expect(
      spokeEndpoint(execExtension({ clusterName: "team-b" }), config, {
        policy: open,
        namespaces: ["fleet-system"],
      }).execCluster.config,
    ).toEqual({
      clusterName: "team-b",
    });
  });
});

describe("spokeEndpoint: a credential is bound to the ClusterProfile's namespace too", () => {
  const inNamespace = (namespace: string, extension: object) => {
    const profile = clusterProfile("cluster1", {
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
    return { ...profile, metadata: { ...profile.metadata, namespace } };
  };
  const config = providerConfig(provider("secretreader"));
  const twoNamespaces = ["ocm-clusters", "gke-clusters"];
  const mapped = AccessPolicySchema.parse({
    credentialNamespaces: { "ocm-clusters": "ocm-credentials", "gke-clusters": "gke-credentials" },
  });

  it("with ClusterProfiles from two namespaces, a name alone is refused: cluster1 could be the other namespace's", () => {
    const err = accessError(() =>
      spokeEndpoint(inNamespace("gke-clusters", { clusterName: "cluster1" }), config, {
        policy: SAFE_ACCESS_POLICY,
        namespaces: twoNamespaces,
      }),
    );
    expect(err.reason).toBe("AccessProviderFailed");
    expect(err.message).toBe(
      "ClusterProfiles are read from ocm-clusters, gke-clusters, so a credential named after ClusterProfile " +
        "gke-clusters/cluster1 could be another namespace's cluster1: give namespace gke-clusters a credentials " +
        "namespace of its own in access.credentialNamespaces (chart: multicluster.access.credentialNamespaces)",
    );
    // "*" is every namespace: the same.
    expect(() =>
      spokeEndpoint(inNamespace("gke-clusters", { clusterName: "cluster1" }), config, {
        policy: SAFE_ACCESS_POLICY,
        namespaces: undefined,
      }),
    ).toThrow(/give namespace gke-clusters a credentials namespace of its own/);
  });

  it("with a credentials namespace per ClusterProfile namespace, each plugin run reads its own", () => {
    const plugin = (namespace: string) =>
      spokeEndpoint(inNamespace(namespace, { clusterName: "cluster1" }), config, {
        policy: mapped,
        namespaces: twoNamespaces,
      }).plugin;
    expect(plugin("ocm-clusters").credentialsNamespace).toBe("ocm-credentials");
    expect(plugin("gke-clusters").credentialsNamespace).toBe("gke-credentials");
    // One ClusterProfile namespace: no other cluster1 can exist, the plugin's kubeconfig says where.
    expect(
      spokeEndpoint(inNamespace("ocm-clusters", { clusterName: "cluster1" }), config, {
        policy: SAFE_ACCESS_POLICY,
        namespaces: ["ocm-clusters"],
      }).plugin.credentialsNamespace,
    ).toBeUndefined();
  });

  it("kubeconfig-secretreader's namespace may only be the bound one", () => {
    const kubeconfig = (namespace?: string) =>
      inNamespace("gke-clusters", {
        name: "cluster1-kubeconfig",
        key: "kubeconfig",
        ...(namespace && { namespace }),
      });
    expect(() =>
      spokeEndpoint(kubeconfig("ocm-credentials"), config, { policy: mapped, namespaces: twoNamespaces }),
    ).toThrow(
      'extensions[client.authentication.k8s.io/exec].namespace is "ocm-credentials", but a ClusterProfile\'s ' +
        "credential is read from gke-credentials, the credentials namespace of gke-clusters (access.credentialNamespaces)",
    );
    expect(() =>
      spokeEndpoint(kubeconfig("knative-fleet"), config, {
        policy: SAFE_ACCESS_POLICY,
        namespaces: ["gke-clusters"],
      }),
    ).toThrow(
      /namespace is "knative-fleet", but a ClusterProfile's credential is read from the credentials namespace of the plugin's kubeconfig; leave namespace out/,
    );
    expect(
      spokeEndpoint(kubeconfig("gke-credentials"), config, { policy: mapped, namespaces: twoNamespaces })
        .plugin.credentialsNamespace,
    ).toBe("gke-credentials");
  });

  it("a plugin that names no credential (a cloud's own) is left alone; allowForeignCredentialNames lifts the binding", () => {
    expect(
      spokeEndpoint(inNamespace("gke-clusters", { audience: "x" }), config, {
        policy: SAFE_ACCESS_POLICY,
        namespaces: twoNamespaces,
      }).plugin.credentialsNamespace,
    ).toBeUndefined();
    const open = { ...SAFE_ACCESS_POLICY, allowForeignCredentialNames: true };
    expect(
      spokeEndpoint(inNamespace("gke-clusters", { clusterName: "cluster1", namespace: "x" }), config, {
        policy: open,
        namespaces: twoNamespaces,
      }).plugin.credentialsNamespace,
    ).toBeUndefined();
  });

  it("the config refuses two ClusterProfile namespaces sharing one credentials namespace", () => {
    expect(() =>
      AccessPolicySchema.parse({
        credentialNamespaces: { "ocm-clusters": "creds", "gke-clusters": "creds" },
      }),
    ).toThrow(/creds already holds the credentials of ClusterProfile namespace ocm-clusters/);
  });
});

describe("kubeconfigInNamespace: the plugin's kubeconfig, pointed at the bound namespace", () => {
  it("keeps cluster and user, makes file references absolute, and is readable by this process only", async () => {
    const dir = await mkdtemp(join(tmpdir(), "knative-fleet-kubeconfig-"));
    const original = join(dir, "plugin-kubeconfig");
    await writeFile(
      original,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          { name: "hub", cluster: { server: "https://hub:6443", "certificate-authority": "ca.crt" } },
        ],
        users: [{ name: "fleet", user: { tokenFile: "/var/run/token" } }],
        contexts: [
          { name: "creds", context: { cluster: "hub", user: "fleet", namespace: "shared-credentials" } },
        ],
        "current-context": "creds",
      }),
    );
    const copy = await kubeconfigInNamespace(original, "gke-credentials");
    const read = parse(await readFile(copy, "utf8"));
    expect(read.contexts).toEqual([
      { name: "creds", context: { cluster: "hub", user: "fleet", namespace: "gke-credentials" } },
    ]);
    expect(read.clusters[0].cluster["certificate-authority"]).toBe(join(dir, "ca.crt"));
    expect(read.users[0].user.tokenFile).toBe("/var/run/token");
    expect((await stat(copy)).mode & 0o777).toBe(0o600);
    expect((await stat(dirname(copy))).mode & 0o777).toBe(0o700);
    await expect(kubeconfigInNamespace(join(dir, "missing"), "x")).rejects.toThrow(
      /cannot read the plugin's kubeconfig/,
    );
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
