import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { nameOf } from "../../../src/kube/object.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import {
  type Container,
  chartDir,
  type Deployment,
  type KubeObject,
  ofKind,
  only,
  type PolicyRule,
  type RbacBinding,
  type RbacRole,
  renderChart,
  renderFailure,
  runHelm,
  withValuesFile,
} from "../../support/helm.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

/** The only Secrets the reconciler may read in the key namespace, by name: the rollout state's HMAC key and the shard key. */
const ROLLOUT_KEY_RULE = {
  apiGroups: [""],
  resources: ["secrets"],
  resourceNames: ["knative-fleet-rollout-key", "knative-fleet-shard-key"],
  verbs: ["get", "patch", "create"],
};

const TWO_PLUGINS = {
  multicluster: {
    enabled: true,
    accessProvidersConfig: {
      providers: [
        {
          name: "token-reader",
          execConfig: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: "/access-plugins/token-reader/bin/token-plugin",
            provideClusterInfo: true,
            interactiveMode: "Never",
          },
        },
        {
          name: "vault",
          execConfig: {
            apiVersion: "client.authentication.k8s.io/v1beta1",
            command: "/opt/plugins/vault/vault-credential",
            args: ["--role", "fleet"],
            env: [{ name: "VAULT_ADDR", value: "https://vault.example.com" }],
          },
          profileSourcedCLIArgsPolicy: "Append",
        },
      ],
    },
    plugins: [
      {
        name: "token-reader",
        image: "registry.example.com/token-reader:v1",
        mountPath: "/access-plugins/token-reader",
      },
      {
        name: "vault",
        image: "registry.example.com/vault-plugin:v2",
        mountPath: "/opt/plugins/vault/",
        pullPolicy: "Always",
      },
    ],
    remoteDeploymentsPollInterval: "30s",
  },
};

const deploymentOf = (objects: readonly KubeObject[]) => only<Deployment>(objects, "Deployment");
const reconciler = (d: Deployment): Container =>
  d.spec.template.spec.containers.find((c) => c.name === "knative-fleet")!;
const configOf = (objects: readonly KubeObject[]): Record<string, unknown> =>
  parse(
    (only(objects, "ConfigMap", "kf-knative-fleet") as unknown as { data: Record<string, string> }).data[
      "config.yaml"
    ]!,
  );
const mountsOf = (c: Container) => Object.fromEntries((c.volumeMounts ?? []).map((m) => [m.mountPath, m]));
const rulesOf = (objects: readonly KubeObject[], kind: "ClusterRole" | "Role"): PolicyRule[] =>
  ofKind<RbacRole>(objects, kind).flatMap((r) => r.rules);

describe("helm lint", () => {
  it.each([
    ["defaults + repository url", {}],
    ["two plugins", TWO_PLUGINS],
    [
      "webhook with ingress, two replicas, hub install",
      { webhook: webhookValues(), replicas: 2, hubInstall: { enabled: true } },
    ],
  ])("passes with %s (--strict)", (_name, values) => {
    const result = withValuesFile(values, (file) =>
      runHelm([
        "lint",
        chartDir,
        "--strict",
        "--kube-version",
        "1.35.0",
        "-f",
        file,
        "--set",
        `fleet.repository.url=${TEST_REPOSITORY}`,
      ]),
    );
    expect(result.stderr + result.stdout).toContain("1 chart(s) linted, 0 chart(s) failed");
    expect(result.status).toBe(0);
  });
});

describe("helm template: defaults + repository url", () => {
  const objects = renderChart();
  const deployment = deploymentOf(objects);
  const pod = deployment.spec.template.spec;
  const container = reconciler(deployment);

  it("renders exactly the reconciler's objects", () => {
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(
      [
        "ClusterRole/kf-knative-fleet",
        "ClusterRole/kf-knative-fleet-clusterprofile-crd",
        "ClusterRoleBinding/kf-knative-fleet",
        "ClusterRoleBinding/kf-knative-fleet-clusterprofile-crd",
        "ConfigMap/kf-knative-fleet",
        "ConfigMap/kf-knative-fleet-clusterprofile-provider-file",
        "Deployment/kf-knative-fleet",
        "Namespace/kf-knative-fleet-rollout-key",
        "Role/kf-knative-fleet-clusterprofiles",
        "Role/kf-knative-fleet-plugin-secrets",
        "Role/kf-knative-fleet-prune-confirmation",
        "Role/kf-knative-fleet-rollout-key",
        "RoleBinding/kf-knative-fleet-clusterprofiles",
        "RoleBinding/kf-knative-fleet-plugin-secrets",
        "RoleBinding/kf-knative-fleet-prune-confirmation",
        "RoleBinding/kf-knative-fleet-rollout-key",
        "Service/kf-knative-fleet",
        "ServiceAccount/kf-knative-fleet",
      ].sort(),
    );
    // Each namespaced object in the release namespace, but for the read-only ClusterProfile Role (in the
    // ClusterProfile namespace), the plugins' Secret Role (in the credentials namespace) and the rollout
    // key's Role (in the key namespace).
    const elsewhere: Record<string, string> = {
      "kf-knative-fleet-clusterprofiles": "fleet-system",
      "kf-knative-fleet-plugin-secrets": "knative-fleet-spoke-credentials",
      "kf-knative-fleet-rollout-key": "kf-knative-fleet-rollout-key",
    };
    for (const o of objects) {
      if (!["ClusterRole", "ClusterRoleBinding", "Namespace"].includes(o.kind))
        expect(o.metadata.namespace).toBe(elsewhere[nameOf(o)] ?? "knative-fleet");
      expect(o.metadata.labels?.["app.kubernetes.io/instance"]).toBe("kf");
    }
  });

  it("runs the service with its config file and the provider file", () => {
    expect(container.args).toEqual([
      "run",
      "--config",
      "/etc/knative-fleet/config.yaml",
      "--clusterprofile-provider-file",
      "/etc/cluster-inventory/config.json",
    ]);
    const mounts = mountsOf(container);
    const volume = (name: string) => pod.volumes.find((v) => v.name === name)!;
    expect(volume(mounts["/etc/knative-fleet"]!.name).configMap?.name).toBe("kf-knative-fleet");
    expect(volume(mounts["/etc/cluster-inventory"]!.name).configMap?.name).toBe(
      "kf-knative-fleet-clusterprofile-provider-file",
    );
  });

  it("renders the config file the service reads, every key explicit", () => {
    expect(configOf(objects)).toEqual({
      repository: {
        url: TEST_REPOSITORY,
        branch: "main",
        pathGlob: "clusters/**/*.{yaml,yml}",
        maxFetchBytes: 33554432,
      },
      cacheDir: "/var/cache/knative-fleet",
      pollSchedule: "* * * * *",
      defaultNamespace: "knative-fleet",
      status: {
        path: "status/",
        branch: "main",
        authorName: "knative-fleet",
        authorEmail: "knative-fleet@noreply.invalid",
      },
      hubInstall: { enabled: false },
      remoteDeploymentsPollInterval: "10s",
      allowedClusterProfileNamespaces: ["fleet-system"],
      access: { allowForeignCredentialNames: false, allowInsecureServers: false, credentialNamespaces: {} },
      tenancy: { reconcileHandMadeCRs: false },
      leaderElection: { enabled: false, leaseName: "kf-knative-fleet", namespace: "knative-fleet" },
      sharding: { enabled: false },
      workers: 4,
      workersPerCluster: 1,
      metricsPort: 9090,
      logLevel: "info",
      manifestLocations: {
        allowedPrefixes: [],
        allowHttp: false,
        allowPrivateNetworks: false,
        maxBytesPerLocation: 33554432,
        maxBytesPerResource: 67108864,
      },
      placements: { departureGracePeriod: "5m" },
      rollout: { checkInterval: "5s", keyNamespace: "kf-knative-fleet-rollout-key" },
      reconciler: "knative-fleet",
    });
  });

  it("renders the access-provider file as the upstream chart does, with the official plugins", () => {
    const providerFile = JSON.parse(
      (
        only(objects, "ConfigMap", "kf-knative-fleet-clusterprofile-provider-file") as unknown as {
          data: Record<string, string>;
        }
      ).data["config.json"]!,
    ) as {
      providers: { name: string; execConfig: { command: string; env?: { name: string; value: string }[] } }[];
    };
    // The plugins read the credentials namespace through the plugin kubeconfig, nothing else of the pod's env.
    for (const provider of providerFile.providers) {
      expect(provider.execConfig.env).toEqual([
        { name: "KUBECONFIG", value: "/etc/cluster-inventory/plugin-kubeconfig" },
      ]);
    }
    const pluginKubeconfig = parse(
      (
        only(objects, "ConfigMap", "kf-knative-fleet-clusterprofile-provider-file") as unknown as {
          data: Record<string, string>;
        }
      ).data["plugin-kubeconfig"]!,
    ) as { contexts: { context: { namespace: string } }[] };
    expect(pluginKubeconfig.contexts[0]!.context.namespace).toBe("knative-fleet-spoke-credentials");
    expect(providerFile.providers.map((p) => [p.name, p.execConfig.command])).toEqual([
      ["secretreader", "/access-plugins/secretreader/bin/secretreader-plugin"],
      [
        "kubeconfig-secretreader",
        "/access-plugins/kubeconfig-secretreader/bin/kubeconfig-secretreader-plugin",
      ],
    ]);
  });

  it("runs hardened: non-root, read-only root, no capabilities, RuntimeDefault seccomp, resources", () => {
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(pod.securityContext.runAsUser).not.toBe(0);
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    });
    expect(container.resources?.requests).toMatchObject({
      cpu: expect.any(String),
      memory: expect.any(String),
    });
    expect(container.resources?.limits?.memory).toBeDefined();
  });

  it("refuses a misspelt resource under resources' requests or limits, in helm template and helm lint (#42)", () => {
    const misspelt = { resources: { limits: { memroy: "1Gi" } } };
    expect(renderFailure({ values: misspelt })).toContain("memroy");
    expect(renderFailure({ values: { resources: { request: { cpu: "1" } } } })).toContain("request");
    const lint = withValuesFile(misspelt, (file) => runHelm(["lint", chartDir, "-f", file]));
    expect(lint.status).not.toBe(0);
    expect(lint.stdout + lint.stderr).toContain("memroy");
    const resources = {
      requests: { cpu: "250m", memory: "512Mi", "ephemeral-storage": "1Gi" },
      limits: { memory: "2Gi", "ephemeral-storage": "2Gi", "hugepages-2Mi": "128Mi" },
    };
    expect(
      deploymentOf(renderChart({ values: { resources } })).spec.template.spec.containers[0]!.resources,
    ).toEqual(resources);
  });

  it("probes /healthz and /readyz on the metrics port, which the Service exposes", () => {
    expect(container.ports).toEqual([{ name: "http-metrics", containerPort: 9090, protocol: "TCP" }]);
    expect(container.livenessProbe?.httpGet).toEqual({ path: "/healthz", port: "http-metrics" });
    expect(container.startupProbe?.httpGet).toEqual({ path: "/healthz", port: "http-metrics" });
    expect(container.readinessProbe?.httpGet).toEqual({ path: "/readyz", port: "http-metrics" });
    const service = only(objects, "Service") as unknown as {
      spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] };
    };
    expect(service.spec.ports).toEqual([
      { name: "http-metrics", port: 9090, targetPort: "http-metrics", protocol: "TCP" },
    ]);
    expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
    expect(deployment.spec.template.metadata.labels).toMatchObject(deployment.spec.selector.matchLabels);
  });

  it("writes only to emptyDirs: the git cache and /tmp", () => {
    const mounts = mountsOf(container);
    for (const path of ["/var/cache/knative-fleet", "/tmp"]) {
      const volume = pod.volumes.find((v) => v.name === mounts[path]?.name);
      expect(volume?.emptyDir, path).toBeDefined();
      expect(mounts[path]?.readOnly).toBeFalsy();
    }
    const writable = (container.volumeMounts ?? []).filter((m) => !m.readOnly).map((m) => m.mountPath);
    expect(writable.sort()).toEqual(["/tmp", "/var/cache/knative-fleet"]);
  });

  it("uses one pod with the Recreate strategy and no leader election", () => {
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy.type).toBe("Recreate");
    expect(ofKind(objects, "PodDisruptionBudget")).toEqual([]);
    expect(rulesOf(objects, "Role").some((r) => r.resources.includes("leases"))).toBe(false);
  });

  it("grants least privilege: its CRs, read-only ClusterProfiles in one namespace, Events, Secrets only in the credentials namespace and the rollout key", () => {
    const all = [...rulesOf(objects, "ClusterRole"), ...rulesOf(objects, "Role")];
    for (const rule of all) {
      expect(rule.verbs, JSON.stringify(rule)).not.toContain("*");
      expect(rule.resources, JSON.stringify(rule)).not.toContain("*");
      expect(rule.apiGroups, JSON.stringify(rule)).not.toContain("*");
    }
    expect(rulesOf(objects, "ClusterRole")).toEqual([
      {
        apiGroups: ["operator.knative.dev"],
        resources: ["knativeservings", "knativeeventings"],
        verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
      },
      {
        apiGroups: ["operator.knative.dev"],
        resources: ["knativeservings/status", "knativeeventings/status"],
        verbs: ["get", "update", "patch"],
      },
      {
        apiGroups: ["operator.knative.dev"],
        resources: ["knativeservings/finalizers", "knativeeventings/finalizers"],
        verbs: ["update", "patch"],
      },
      { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
      {
        apiGroups: ["apiextensions.k8s.io"],
        resources: ["customresourcedefinitions"],
        resourceNames: ["clusterprofiles.multicluster.x-k8s.io"],
        verbs: ["get"],
      },
    ]);
    expect(only<RbacRole>(objects, "Role", "kf-knative-fleet-clusterprofiles").rules).toEqual([
      {
        apiGroups: ["multicluster.x-k8s.io"],
        resources: ["clusterprofiles", "placementdecisions"],
        verbs: ["get", "list", "watch"],
      },
    ]);
    const secretsRole = only<RbacRole>(objects, "Role", "kf-knative-fleet-plugin-secrets");
    expect(secretsRole.metadata.namespace).toBe("knative-fleet-spoke-credentials");
    expect(secretsRole.rules).toEqual([{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }]);
    // In the release namespace, where the Git credentials are, no Secret at all; the rollout state's key, by
    // name, in a namespace of its own.
    expect(
      ofKind<RbacRole>(objects, "Role")
        .filter((r) => r.metadata.namespace === "knative-fleet")
        .flatMap((r) => r.rules.filter((rule) => rule.resources.includes("secrets"))),
    ).toEqual([]);
    const keyRole = only<RbacRole>(objects, "Role", "kf-knative-fleet-rollout-key");
    expect(keyRole.metadata.namespace).toBe("kf-knative-fleet-rollout-key");
    expect(keyRole.rules).toEqual([ROLLOUT_KEY_RULE]);
    for (const binding of [
      ...ofKind<RbacBinding>(objects, "ClusterRoleBinding"),
      ...ofKind<RbacBinding>(objects, "RoleBinding"),
    ]) {
      expect(binding.subjects).toEqual([
        { kind: "ServiceAccount", name: "kf-knative-fleet", namespace: "knative-fleet" },
      ]);
      expect(
        objects.some((o) => o.kind === binding.roleRef.kind && o.metadata.name === binding.roleRef.name),
      ).toBe(true);
    }
    expect(pod.serviceAccountName).toBe("kf-knative-fleet");
  });

  it("rolls the pods when the config or the provider file changes", () => {
    const annotations = (d: Deployment) =>
      (d.spec.template.metadata as { annotations?: Record<string, string> }).annotations ?? {};
    const changed = deploymentOf(renderChart({ values: { fleet: { pollInterval: "*/5 * * * *" } } }));
    const providersChanged = deploymentOf(renderChart({ values: TWO_PLUGINS }));
    expect(annotations(changed)["checksum/config"]).not.toBe(annotations(deployment)["checksum/config"]);
    expect(annotations(providersChanged)["checksum/clusterprofile-provider-file"]).not.toBe(
      annotations(deployment)["checksum/clusterprofile-provider-file"],
    );
  });
});

describe("helm template: multicluster with two plugins", () => {
  it("mounts each plugin image as an image volume on Kubernetes 1.35+", () => {
    const objects = renderChart({ values: TWO_PLUGINS, kubeVersion: "1.35.0" });
    const deployment = deploymentOf(objects);
    const pod = deployment.spec.template.spec;
    expect(pod.initContainers).toBeUndefined();
    const mounts = mountsOf(reconciler(deployment));
    expect(mounts["/access-plugins/token-reader"]).toEqual({
      name: "plugin-token-reader",
      mountPath: "/access-plugins/token-reader",
      readOnly: true,
    });
    expect(mounts["/opt/plugins/vault"]).toEqual({
      name: "plugin-vault",
      mountPath: "/opt/plugins/vault",
      readOnly: true,
    });
    expect(pod.volumes.filter((v) => v.image)).toEqual([
      {
        name: "plugin-token-reader",
        image: { reference: "registry.example.com/token-reader:v1", pullPolicy: "IfNotPresent" },
      },
      {
        name: "plugin-vault",
        image: { reference: "registry.example.com/vault-plugin:v2", pullPolicy: "Always" },
      },
    ]);
    const config = configOf(objects);
    expect(config.remoteDeploymentsPollInterval).toBe("30s");
    const providerFile = JSON.parse(
      (
        only(objects, "ConfigMap", "kf-knative-fleet-clusterprofile-provider-file") as unknown as {
          data: Record<string, string>;
        }
      ).data["config.json"]!,
    );
    // As given, each provider's env ending with the plugin kubeconfig (the plugins get nothing else of the pod's).
    const kubeconfig = { name: "KUBECONFIG", value: "/etc/cluster-inventory/plugin-kubeconfig" };
    expect(providerFile).toEqual({
      providers: TWO_PLUGINS.multicluster.accessProvidersConfig.providers.map((p) => ({
        ...p,
        execConfig: {
          ...p.execConfig,
          env: [...((p.execConfig as { env?: object[] }).env ?? []), kubeconfig],
        },
      })),
    });
  });

  it("copies each provider command out of its plugin image with initContainers before 1.35", () => {
    const deployment = deploymentOf(renderChart({ values: TWO_PLUGINS, kubeVersion: "1.34.3" }));
    const pod = deployment.spec.template.spec;
    expect(pod.volumes.some((v) => v.image)).toBe(false);
    const init = pod.initContainers ?? [];
    expect(init.map((c) => c.name)).toEqual([
      "install-plugin-copier",
      "copy-plugin-token-reader",
      "copy-plugin-vault",
    ]);
    // A static busybox goes first, into the shared emptyDir; the plugin images themselves need no shell.
    expect(init[0]!.image).toMatch(/busybox/);
    expect(init[0]!.command).toEqual(["/bin/busybox", "cp", "/bin/busybox", "/knative-fleet-copier/busybox"]);
    const copyArgs = (c: Container) => c.command!.slice(c.command!.indexOf("copy-plugin") + 1);
    expect(init[1]!.image).toBe("registry.example.com/token-reader:v1");
    expect(init[1]!.command!.slice(0, 3)).toEqual(["/knative-fleet-copier/busybox", "sh", "-c"]);
    expect(copyArgs(init[1]!)).toEqual(["bin/token-plugin"]);
    expect(init[2]!.image).toBe("registry.example.com/vault-plugin:v2");
    expect(copyArgs(init[2]!)).toEqual(["vault-credential"]);
    for (const c of init) {
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
      });
      expect(c.securityContext?.runAsUser).toBe(65532);
    }
    // The copy lands in the emptyDir that the reconciler sees at the plugin's mountPath.
    const volumeAt = (c: Container, path: string) => c.volumeMounts!.find((m) => m.mountPath === path)!.name;
    expect(volumeAt(init[1]!, "/knative-fleet-plugin")).toBe(
      volumeAt(reconciler(deployment), "/access-plugins/token-reader"),
    );
    expect(volumeAt(init[2]!, "/knative-fleet-plugin")).toBe(
      volumeAt(reconciler(deployment), "/opt/plugins/vault"),
    );
    for (const name of ["plugin-copier", "plugin-token-reader", "plugin-vault"]) {
      expect(pod.volumes.find((v) => v.name === name)?.emptyDir, name).toBeDefined();
    }
  });

  it("honours an explicit pluginMount over the detected version", () => {
    const forced = (pluginMount: string, kubeVersion: string) =>
      deploymentOf(
        renderChart({ values: { multicluster: { ...TWO_PLUGINS.multicluster, pluginMount } }, kubeVersion }),
      ).spec.template.spec;
    expect(forced("imageVolume", "1.33.0").volumes.filter((v) => v.image)).toHaveLength(2);
    expect(forced("initContainer", "1.36.0").initContainers).toHaveLength(3);
  });

  it("reads ClusterProfiles only in the allowed namespaces when they are listed", () => {
    const objects = renderChart({
      values: { multicluster: { allowedClusterProfileNamespaces: ["fleet-system", "team-a"] } },
    });
    const roles = ofKind<RbacRole>(objects, "Role").filter(
      (r) => r.metadata.name === "kf-knative-fleet-clusterprofiles",
    );
    expect(roles.map((r) => r.metadata.namespace)).toEqual(["fleet-system", "team-a"]);
    expect(
      ofKind<RbacRole>(objects, "ClusterRole").flatMap((r) => r.rules.flatMap((rule) => rule.resources)),
    ).not.toContain("clusterprofiles");
    expect(configOf(objects).allowedClusterProfileNamespaces).toEqual(["fleet-system", "team-a"]);
  });

  it('opens ClusterProfiles in every namespace only when asked with "*", and names the Secrets when listed', () => {
    const objects = renderChart({
      values: {
        multicluster: {
          allowedClusterProfileNamespaces: ["*"],
          credentials: { namespace: "spoke-creds", secretNames: ["spoke-1", "spoke-2-kubeconfig"] },
        },
      },
    });
    expect(
      only<RbacRole>(objects, "ClusterRole", "kf-knative-fleet-clusterprofiles").rules[0]!.resources,
    ).toEqual(["clusterprofiles", "placementdecisions"]);
    expect(configOf(objects).allowedClusterProfileNamespaces).toEqual(["*"]);
    const secretsRole = only<RbacRole>(objects, "Role", "kf-knative-fleet-plugin-secrets");
    expect([secretsRole.metadata.namespace, secretsRole.rules]).toEqual([
      "spoke-creds",
      [
        {
          apiGroups: [""],
          resources: ["secrets"],
          resourceNames: ["spoke-1", "spoke-2-kubeconfig"],
          verbs: ["get"],
        },
      ],
    ]);
  });

  it("with a credentials namespace per ClusterProfile namespace: the map in the config, a Secret Role in each", () => {
    const credentialNamespaces = {
      "ocm-clusterset": "ocm-credentials",
      "fleet-cluster-inventory": "gke-credentials",
    };
    const objects = renderChart({
      values: {
        multicluster: {
          allowedClusterProfileNamespaces: ["ocm-clusterset", "fleet-cluster-inventory"],
          access: { credentialNamespaces },
        },
      },
    });
    expect(configOf(objects).access).toMatchObject({ credentialNamespaces });
    const secretRoles = objects.filter(
      (o) => o.kind === "Role" && nameOf(o) === "kf-knative-fleet-plugin-secrets",
    );
    expect(secretRoles.map((o) => o.metadata.namespace).sort()).toEqual([
      "gke-credentials",
      "knative-fleet-spoke-credentials",
      "ocm-credentials",
    ]);
    const bindings = objects.filter(
      (o) => o.kind === "RoleBinding" && nameOf(o) === "kf-knative-fleet-plugin-secrets",
    );
    expect(bindings).toHaveLength(3);
  });

  it("refuses the release namespace as the credentials namespace", () => {
    expect(
      renderFailure({ values: { multicluster: { credentials: { namespace: "knative-fleet" } } } }),
    ).toContain("multicluster.credentials.namespace must not be the release namespace knative-fleet");
    expect(
      renderFailure({
        values: { multicluster: { access: { credentialNamespaces: { "team-a": "knative-fleet" } } } },
      }),
    ).toContain(
      "multicluster.access.credentialNamespaces.team-a must not be the release namespace knative-fleet",
    );
  });

  it("without multicluster: no provider file, no ClusterProfile access, no Secret but the rollout key", () => {
    const objects = renderChart({ values: { multicluster: { enabled: false } } });
    expect(objects.map((o) => o.metadata.name)).not.toContain(
      "kf-knative-fleet-clusterprofile-provider-file",
    );
    expect(reconciler(deploymentOf(objects)).args).toEqual([
      "run",
      "--config",
      "/etc/knative-fleet/config.yaml",
    ]);
    const resources = [...rulesOf(objects, "ClusterRole"), ...rulesOf(objects, "Role")].flatMap(
      (r) => r.resources,
    );
    expect(resources).not.toContain("clusterprofiles");
    expect(
      [...rulesOf(objects, "ClusterRole"), ...rulesOf(objects, "Role")].filter((rule) =>
        rule.resources.includes("secrets"),
      ),
    ).toEqual([ROLLOUT_KEY_RULE]);
  });
});

function webhookValues() {
  return {
    enabled: true,
    secretRef: { name: "fleet-webhook", key: "hmac" },
    ingress: {
      enabled: true,
      className: "nginx",
      host: "fleet.example.com",
      annotations: { "cert-manager.io/cluster-issuer": "letsencrypt" },
      tls: [{ secretName: "fleet-webhook-tls", hosts: ["fleet.example.com"] }],
    },
  };
}

describe("helm template: webhook with ingress", () => {
  const objects = renderChart({ values: { webhook: webhookValues() } });
  const deployment = deploymentOf(objects);
  const container = reconciler(deployment);

  it("listens on the webhook port with the secret mounted as a file the config names", () => {
    expect(container.ports).toContainEqual({ name: "http-webhook", containerPort: 8080, protocol: "TCP" });
    expect(configOf(objects).webhook).toEqual({
      port: 8080,
      secretFile: "/var/run/secrets/knative-fleet/webhook/secret",
    });
    const mount = mountsOf(container)["/var/run/secrets/knative-fleet/webhook"]!;
    const volume = deployment.spec.template.spec.volumes.find((v) => v.name === mount.name)!;
    expect(volume.secret).toMatchObject({
      secretName: "fleet-webhook",
      items: [{ key: "hmac", path: "secret" }],
    });
  });

  it("routes only the webhook path of the Ingress to the Service's webhook port", () => {
    const service = only(objects, "Service") as unknown as {
      spec: { ports: { name: string; port: number; targetPort: string }[] };
    };
    expect(service.spec.ports.map((p) => p.name)).toEqual(["http-metrics", "http-webhook"]);
    const ingress = only(objects, "Ingress") as unknown as {
      metadata: { annotations: Record<string, string> };
      spec: {
        ingressClassName: string;
        tls: unknown[];
        rules: {
          host: string;
          http: { paths: { path: string; backend: { service: { name: string; port: { name: string } } } }[] };
        }[];
      };
    };
    expect(ingress.spec.ingressClassName).toBe("nginx");
    expect(ingress.metadata.annotations).toEqual({ "cert-manager.io/cluster-issuer": "letsencrypt" });
    expect(ingress.spec.tls).toEqual([{ secretName: "fleet-webhook-tls", hosts: ["fleet.example.com"] }]);
    expect(ingress.spec.rules).toHaveLength(1);
    expect(ingress.spec.rules[0]!.host).toBe("fleet.example.com");
    expect(ingress.spec.rules[0]!.http.paths).toEqual([
      {
        path: "/webhook",
        pathType: "Prefix",
        backend: { service: { name: "kf-knative-fleet", port: { name: "http-webhook" } } },
      },
    ]);
  });
});

describe("helm template: network policy and manifest locations", () => {
  const ingressPeers = [
    { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "ingress-nginx" } } },
  ];
  const prometheus = [{ podSelector: { matchLabels: { "app.kubernetes.io/name": "prometheus" } } }];
  type Policy = KubeObject & {
    spec: { policyTypes: string[]; ingress: { ports: { port: number }[]; from: unknown[] }[] | null };
  };

  it("renders no NetworkPolicy by default", () => {
    expect(ofKind(renderChart(), "NetworkPolicy")).toEqual([]);
  });

  it("lets only the given peers reach the webhook and metrics ports", () => {
    const objects = renderChart({
      values: {
        webhook: { enabled: true, secretRef: { name: "hook" } },
        networkPolicy: { enabled: true, webhookFrom: ingressPeers, metricsFrom: prometheus },
      },
    });
    const policy = only<Policy>(objects, "NetworkPolicy");
    expect(policy.spec.policyTypes).toEqual(["Ingress"]);
    expect(policy.spec.ingress).toEqual([
      { ports: [{ port: 9090, protocol: "TCP" }], from: prometheus },
      { ports: [{ port: 8080, protocol: "TCP" }], from: ingressPeers },
    ]);
  });

  it("with no peers, lets nothing in: an empty `from` would mean anyone", () => {
    const policy = only<Policy>(
      renderChart({
        values: { webhook: { enabled: true, secretRef: { name: "hook" } }, networkPolicy: { enabled: true } },
      }),
      "NetworkPolicy",
    );
    expect(policy.spec.ingress ?? []).toEqual([]);
  });

  it("renders the manifest location policy into the config, and refuses unknown keys", () => {
    const values = {
      manifestLocations: { allowedPrefixes: ["https://github.com/knative/"], allowHttp: true },
    };
    expect(configOf(renderChart({ values })).manifestLocations).toMatchObject({
      allowedPrefixes: ["https://github.com/knative/"],
      allowHttp: true,
      allowPrivateNetworks: false,
    });
    expect(renderFailure({ values: { manifestLocations: { allowedPrefix: [] } } })).toContain(
      "allowedPrefix",
    );
  });
});

describe("helm template: repository credentials, CA, status branch, replicas", () => {
  const objects = renderChart({
    values: {
      replicas: 3,
      fleet: {
        repository: {
          credentialsSecretRef: { name: "fleet-repo" },
          caSecretRef: { name: "corp-ca", key: "bundle.pem" },
        },
        status: { branch: "fleet-status" },
        defaultNamespace: "fleet-crs",
      },
    },
  });
  const deployment = deploymentOf(objects);

  it("mounts the credentials and the CA where the config says", () => {
    const config = configOf(objects) as {
      repository: Record<string, string>;
      status: Record<string, string>;
      defaultNamespace: string;
    };
    expect(config.repository.credentialsDir).toBe("/var/run/secrets/knative-fleet/repository");
    expect(config.repository.caFile).toBe("/etc/ssl/knative-fleet/ca.crt");
    expect(config.status.branch).toBe("fleet-status");
    expect(config.defaultNamespace).toBe("fleet-crs");
    const pod = deployment.spec.template.spec;
    const mounts = mountsOf(reconciler(deployment));
    const volume = (path: string) => pod.volumes.find((v) => v.name === mounts[path]?.name)!;
    expect(volume("/var/run/secrets/knative-fleet/repository").secret?.secretName).toBe("fleet-repo");
    expect(volume("/etc/ssl/knative-fleet").secret).toMatchObject({
      secretName: "corp-ca",
      items: [{ key: "bundle.pem", path: "ca.crt" }],
    });
  });

  it("elects a leader on one named Lease in the release namespace when replicas > 1", () => {
    expect(deployment.spec.strategy.type).toBe("RollingUpdate");
    const config = configOf(objects) as { leaderElection: Record<string, unknown> };
    expect(config.leaderElection).toEqual({
      enabled: true,
      leaseName: "kf-knative-fleet",
      namespace: "knative-fleet",
    });
    const role = only<RbacRole>(objects, "Role", "kf-knative-fleet-leader-election");
    expect(role.metadata.namespace).toBe("knative-fleet");
    expect(role.rules).toEqual([
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      {
        apiGroups: ["coordination.k8s.io"],
        resources: ["leases"],
        resourceNames: ["kf-knative-fleet"],
        verbs: ["get", "update", "patch"],
      },
    ]);
    expect(only(objects, "PodDisruptionBudget").spec).toMatchObject({ minAvailable: 1 });
  });
});

describe("helm template: sharding", () => {
  const leaseRules = (objects: ReturnType<typeof renderChart>) =>
    only<RbacRole>(objects, "Role", "kf-knative-fleet-leader-election").rules;

  it("with replicas > 1: sharding on in the config, the member Leases may be listed and removed, and the Pods read", () => {
    const objects = renderChart({
      values: { replicas: 3, sharding: { enabled: true }, workersPerCluster: 2 },
    });
    expect(configOf(objects)).toMatchObject({
      sharding: { enabled: true },
      leaderElection: { enabled: true },
      workersPerCluster: 2,
    });
    expect(leaseRules(objects)).toContainEqual({
      apiGroups: ["coordination.k8s.io"],
      resources: ["leases"],
      verbs: ["get", "list", "watch", "update", "delete"],
    });
    // A member counts once its Pod runs as the reconciler's ServiceAccount (src/service/sharding.ts podVoucher).
    expect(leaseRules(objects)).toContainEqual({ apiGroups: [""], resources: ["pods"], verbs: ["get"] });
  });

  it("with one replica it stays off (there is nothing to share), and grants nothing for it", () => {
    const objects = renderChart({ values: { sharding: { enabled: true } } });
    expect(configOf(objects)).toMatchObject({ sharding: { enabled: false } });
    expect(objects.some((o) => nameOf(o) === "kf-knative-fleet-leader-election")).toBe(false);
  });

  it("with replicas > 1 but sharding off, the leader-election Role is unchanged", () => {
    const rules = leaseRules(renderChart({ values: { replicas: 2 } }));
    expect(rules.some((r) => r.verbs.includes("list") || r.resources.includes("pods"))).toBe(false);
  });
});

describe("helm template: hubInstall", () => {
  const resourceOf = (kind: string) => `${kind.toLowerCase().replace(/([^aeiou])y$/, "$1ie")}s`;

  it("is off by default and grants no way to install Knative", () => {
    const names = renderChart().map((o) => o.metadata.name);
    expect(names).not.toContain("kf-knative-fleet-hub-install");
  });

  it("grants every kind of the bundled Knative releases, plus escalate/bind, and says so in the config", () => {
    const objects = renderChart({
      values: {
        hubInstall: {
          enabled: true,
          extraRules: [{ apiGroups: ["example.com"], resources: ["widgets"], verbs: ["get"] }],
        },
      },
    });
    expect(configOf(objects).hubInstall).toEqual({ enabled: true });
    const role = only<RbacRole>(objects, "ClusterRole", "kf-knative-fleet-hub-install");
    const binding = only<RbacBinding>(objects, "ClusterRoleBinding", "kf-knative-fleet-hub-install");
    expect(binding.roleRef.name).toBe(role.metadata.name);
    const allows = (group: string, resource: string, verb: string) =>
      role.rules.some(
        (r) =>
          r.apiGroups.includes(group) &&
          r.resources.includes(resource) &&
          r.verbs.includes(verb) &&
          !r.resourceNames,
      );
    const kinds = new Set<string>();
    for (const file of yamlFiles(knativeReleasesDir())) {
      for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
        const o = doc.toJSON() as { apiVersion?: string; kind?: string } | null;
        if (o?.apiVersion && o.kind) kinds.add(`${o.apiVersion}|${o.kind}`);
      }
    }
    expect(kinds.size).toBeGreaterThan(15);
    for (const entry of kinds) {
      const [apiVersion, kind] = entry.split("|") as [string, string];
      const group = apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
      for (const verb of ["get", "list", "create", "patch"]) {
        expect(allows(group, resourceOf(kind), verb), `${verb} ${kind} (${apiVersion})`).toBe(true);
      }
    }
    for (const resource of ["clusterroles", "roles"]) {
      expect(allows("rbac.authorization.k8s.io", resource, "escalate")).toBe(true);
      expect(allows("rbac.authorization.k8s.io", resource, "bind")).toBe(true);
    }
    expect(allows("", "namespaces", "delete")).toBe(false);
    expect(allows("example.com", "widgets", "get")).toBe(true);
  });
});

describe("helm template: the rollout key's namespace", () => {
  /** The key's Role and RoleBinding (their namespaces), the Namespaces rendered, and the config's keyNamespace. */
  function keyObjects(values: object) {
    const objects = renderChart({ values });
    const [role, ...moreRoles] = ofKind<RbacRole>(objects, "Role").filter((r) =>
      nameOf(r).endsWith("-rollout-key"),
    );
    const binding = only<RbacBinding>(objects, "RoleBinding", nameOf(role!));
    expect(moreRoles).toEqual([]);
    expect(role!.rules).toEqual([ROLLOUT_KEY_RULE]);
    expect(binding.roleRef).toEqual({
      apiGroup: "rbac.authorization.k8s.io",
      kind: "Role",
      name: nameOf(role!),
    });
    expect(binding.metadata.namespace).toBe(role!.metadata.namespace);
    return {
      role: role!.metadata.namespace,
      namespaces: ofKind(objects, "Namespace"),
      keyNamespace: (configOf(objects).rollout as { keyNamespace: string }).keyNamespace,
    };
  }

  it("by default, one of its own: created (kept on uninstall), the key Role there, named in the config", () => {
    const { role, namespaces, keyNamespace } = keyObjects({});
    expect(role).toBe("kf-knative-fleet-rollout-key");
    expect(keyNamespace).toBe("kf-knative-fleet-rollout-key");
    expect(namespaces).toEqual([
      expect.objectContaining({
        metadata: expect.objectContaining({
          name: "kf-knative-fleet-rollout-key",
          annotations: { "helm.sh/resource-policy": "keep" },
        }),
      }),
    ]);
  });

  it("a namespace of the user's choice, created unless told not to", () => {
    expect(keyObjects({ fleet: { rolloutKeyNamespace: "fleet-keys" } })).toMatchObject({
      role: "fleet-keys",
      keyNamespace: "fleet-keys",
      namespaces: [{ metadata: { name: "fleet-keys" } }],
    });
    expect(
      keyObjects({ fleet: { rolloutKeyNamespace: "fleet-keys", createRolloutKeyNamespace: false } }),
    ).toMatchObject({ role: "fleet-keys", keyNamespace: "fleet-keys", namespaces: [] });
  });

  it("beside the state when asked (as before), and never creates the release or the state's namespace", () => {
    expect(keyObjects({ fleet: { rolloutKeyNamespace: "knative-fleet" } })).toEqual({
      role: "knative-fleet",
      keyNamespace: "knative-fleet",
      namespaces: [],
    });
    expect(
      keyObjects({ fleet: { defaultNamespace: "fleet-crs", rolloutKeyNamespace: "fleet-crs" } }),
    ).toEqual({ role: "fleet-crs", keyNamespace: "fleet-crs", namespaces: [] });
  });

  it("is named after the release (two releases, two keys), kept a valid name when the release name is long", () => {
    const namespaces = (options: Parameters<typeof renderChart>[0]) =>
      ofKind(renderChart(options), "Namespace").map(nameOf);
    expect(namespaces({ release: "knative-fleet" })).toEqual(["knative-fleet-rollout-key"]);
    const long = `team-${"a".repeat(56)}`;
    expect(namespaces({ values: { fullnameOverride: long } })).toEqual([`${long}-r`]);
    expect(`${long}-r`).toHaveLength(63);
    expect(renderFailure({ values: { fleet: { rolloutKeyNamespace: "Keys!" } } })).toContain(
      "rolloutKeyNamespace",
    );
  });
});

describe("helm template: inconsistent values fail with the value to fix", () => {
  const providerWith = (command: string) => ({
    multicluster: {
      accessProvidersConfig: {
        providers: [{ name: "p", execConfig: { apiVersion: "client.authentication.k8s.io/v1", command } }],
      },
    },
  });

  it.each([
    ["no repository url", { withRepository: false }, "fleet.repository.url is required"],
    [
      "an ssh repository url",
      { withRepository: false, values: { fleet: { repository: { url: "git@github.com:acme/fleet.git" } } } },
      'fleet.repository.url "git@github.com:acme/fleet.git" must be an http(s) URL',
    ],
    [
      "credentials in the repository url",
      {
        withRepository: false,
        values: { fleet: { repository: { url: "https://bot:s3cret@github.com/acme/fleet.git" } } },
      },
      "fleet.repository.url must not carry credentials",
    ],
    [
      "multicluster with null accessProvidersConfig",
      { values: { multicluster: { enabled: true, accessProvidersConfig: null } } },
      "multicluster.enabled is true but multicluster.accessProvidersConfig is empty",
    ],
    [
      "multicluster with no providers",
      { values: { multicluster: { enabled: true, accessProvidersConfig: { providers: [] } } } },
      "multicluster.enabled is true but multicluster.accessProvidersConfig is empty",
    ],
    [
      "a relative plugin mountPath",
      {
        values: {
          multicluster: {
            plugins: [{ name: "secretreader", image: "r/s:1", mountPath: "access-plugins/secretreader" }],
          },
        },
      },
      'multicluster.plugins[0] (secretreader): mountPath "access-plugins/secretreader" must be an absolute path',
    ],
    [
      "a command outside every plugin mountPath",
      { values: providerWith("/usr/local/bin/credential-plugin") },
      "execConfig.command must be a file under a multicluster.plugins[].mountPath (/access-plugins/secretreader, /access-plugins/kubeconfig-secretreader), but providers[0] (p): /usr/local/bin/credential-plugin",
    ],
    [
      "a command that climbs out of a mountPath",
      { values: providerWith("/access-plugins/secretreader/../../usr/bin/env") },
      "but providers[0] (p): /access-plugins/secretreader/../../usr/bin/env",
    ],
    [
      "a command that is the mountPath itself",
      { values: providerWith("/access-plugins/secretreader") },
      "but providers[0] (p): /access-plugins/secretreader",
    ],
    [
      "a plugin mounted over the config",
      {
        values: {
          multicluster: {
            plugins: [{ name: "secretreader", image: "r/s:1", mountPath: "/etc/knative-fleet/plugins" }],
          },
        },
      },
      'mountPath "/etc/knative-fleet/plugins" overlaps "/etc/knative-fleet"',
    ],
    [
      "two plugins with one name",
      {
        values: {
          multicluster: {
            plugins: [
              { name: "secretreader", image: "a:1", mountPath: "/p/a" },
              { name: "secretreader", image: "b:1", mountPath: "/p/b" },
            ],
          },
        },
      },
      'multicluster.plugins[1]: the name "secretreader" is used twice',
    ],
    [
      "a webhook without a secret",
      { values: { webhook: { enabled: true } } },
      "webhook.enabled requires webhook.secretRef.name",
    ],
    [
      "an ingress without the webhook",
      { values: { webhook: { ingress: { enabled: true } } } },
      "webhook.ingress.enabled requires webhook.enabled",
    ],
    [
      "two CA sources",
      { values: { fleet: { repository: { caConfigMapRef: { name: "a" }, caSecretRef: { name: "b" } } } } },
      "fleet.repository.caConfigMapRef and fleet.repository.caSecretRef are both set",
    ],
  ])("%s", (_name, options, message) => {
    expect(renderFailure(options)).toContain(message);
  });

  it.each([
    ["an unknown top-level key", { replica: 2 }, "additional properties 'replica' not allowed"],
    [
      "an unknown key in fleet",
      { fleet: { pollIntervall: "* * * * *" } },
      "additional properties 'pollIntervall' not allowed",
    ],
    [
      "a typo in an execConfig (upstream would drop it silently)",
      {
        multicluster: {
          accessProvidersConfig: {
            providers: [
              {
                name: "p",
                execConfig: {
                  apiVersion: "client.authentication.k8s.io/v1",
                  command: "/access-plugins/secretreader/x",
                  provideClusterinfo: true,
                },
              },
            ],
          },
        },
      },
      "additional properties 'provideClusterinfo' not allowed",
    ],
    ["a bad log level", { logLevel: "verbose" }, "logLevel"],
    [
      "a bad poll interval",
      { multicluster: { remoteDeploymentsPollInterval: "10 seconds" } },
      "remoteDeploymentsPollInterval",
    ],
  ])("the schema rejects %s", (_name, values, message) => {
    expect(renderFailure({ values })).toContain(message);
  });
});

function yamlFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return name.endsWith(".yaml") ? [path] : [];
  });
}
