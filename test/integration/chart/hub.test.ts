import { readlinkSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSandbox } from "../../sandbox/index.ts";
import { type AdminEndpoint, apply, getJson, kubeRequest } from "../../sandbox/kube-http.ts";
import { toolPath } from "../../sandbox/tools.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import {
  chartDir,
  type Deployment,
  type KubeObject,
  renderChart,
  runHelm,
  withValuesFile,
} from "../../support/helm.ts";
import { waitUntil } from "../../support/wait.ts";

/**
 * The rendered chart on a real kube-apiserver (the sandbox hub): every object is accepted by server-side
 * apply, the pods pass the `restricted` Pod Security Standard and become Available (kwok nodes), and the
 * RBAC grants exactly what the README says, as the hub's own authorizer answers SubjectAccessReviews.
 */
describe("the chart on the sandbox hub", () => {
  const sandbox = loadSandbox();
  const hub: AdminEndpoint = {
    server: sandbox.hub.server,
    caFile: sandbox.hub.caFile,
    certFile: sandbox.hub.caFile.replace(/ca\.crt$/, "admin.crt"),
    keyFile: sandbox.hub.caFile.replace(/ca\.crt$/, "admin.key"),
  };
  const suffix = Date.now().toString(36);
  const namespace = `chart-${suffix}`;
  const profiles = sandbox.clusterProfileNamespace;
  const credentials = `creds-${suffix}`;
  const full = { release: `full-${suffix}`, fullname: `full-${suffix}-knative-fleet` };
  const fallback = { release: `copy-${suffix}`, fullname: `copy-${suffix}-knative-fleet` };
  const applied: KubeObject[] = [];
  let kubeVersion = "";

  const fullValues = {
    replicas: 2,
    fleet: {
      repository: { credentialsSecretRef: { name: "fleet-repo" }, caConfigMapRef: { name: "corp-ca" } },
    },
    multicluster: { allowedClusterProfileNamespaces: [profiles], credentials: { namespace: credentials } },
    webhook: {
      enabled: true,
      secretRef: { name: "fleet-webhook" },
      ingress: {
        enabled: true,
        host: "fleet.example.com",
        tls: [{ secretName: "fleet-tls", hosts: ["fleet.example.com"] }],
      },
    },
    hubInstall: { enabled: true },
  };

  beforeAll(async () => {
    // The sandbox's apiserver is built from source without version stamps (it reports v0.0.0-master): the
    // version it really is lives in its binary's name.
    kubeVersion = /-(v\d+\.\d+\.\d+)$/.exec(readlinkSync(toolPath(sandbox.binDir, "kube-apiserver")))![1]!;
    await put({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: namespace,
        labels: {
          "pod-security.kubernetes.io/enforce": "restricted",
          "pod-security.kubernetes.io/enforce-version": "latest",
        },
      },
    });
    await put({ apiVersion: "v1", kind: "Namespace", metadata: { name: credentials } });
    for (const [kind, name, data] of [
      ["Secret", "fleet-repo", { token: "t0ken" }],
      ["Secret", "fleet-webhook", { secret: "hmac-secret" }],
      ["ConfigMap", "corp-ca", { "ca.crt": "-----BEGIN CERTIFICATE-----\n" }],
    ] as const) {
      await put({
        apiVersion: "v1",
        kind,
        metadata: { name, namespace },
        ...(kind === "Secret" ? { stringData: data } : { data }),
      });
    }
  });

  afterAll(async () => {
    for (const o of applied.reverse()) {
      await kubeRequest(hub, "DELETE", objectPath(o));
    }
  });

  /** Server-side apply through the REST API; throws with the server's message when it is refused. */
  async function put(o: KubeObject): Promise<void> {
    await apply(hub, objectPath(o), o);
    applied.push(o);
  }

  async function install(release: string, values: object): Promise<KubeObject[]> {
    const objects = renderChart({ values, release, namespace, kubeVersion });
    for (const o of objects) await put(o);
    return objects;
  }

  async function availableReplicas(name: string, replicas: number): Promise<Deployment> {
    return waitUntil(`Deployment ${name} Available`, async () => {
      const d = (await getJson(
        hub,
        `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`,
      )) as Deployment & {
        status?: { availableReplicas?: number; conditions?: { type: string; status: string }[] };
      };
      const available = d.status?.conditions?.some((c) => c.type === "Available" && c.status === "True");
      return available && d.status?.availableReplicas === replicas ? d : undefined;
    });
  }

  it("accepts every object of a release with everything on, and its pods (image volumes) pass `restricted`", async () => {
    const objects = await install(full.release, fullValues);
    expect(objects.map((o) => o.kind)).toEqual(
      expect.arrayContaining([
        "Deployment",
        "Ingress",
        "PodDisruptionBudget",
        "ClusterRole",
        "Role",
        "Service",
      ]),
    );
    const deployment = await availableReplicas(full.fullname, 2);
    // The hub kept the image volumes: a hub without the ImageVolume feature would drop the field silently.
    const pluginVolumes = deployment.spec.template.spec.volumes.filter((v) => v.image);
    expect(pluginVolumes.map((v) => v.image?.reference)).toEqual([
      "registry.k8s.io/cluster-inventory-api/secretreader:v0.1.3",
      "registry.k8s.io/cluster-inventory-api/kubeconfig-secretreader:v0.1.3",
    ]);
  });

  it("accepts the initContainer plugin copy, which passes `restricted` as well", async () => {
    const objects = await install(fallback.release, {
      multicluster: { pluginMount: "initContainer", credentials: { namespace: credentials } },
    });
    const rendered = objects.find((o): o is Deployment => o.kind === "Deployment")!;
    expect(rendered.spec.template.spec.initContainers).toHaveLength(3);
    await availableReplicas(fallback.fullname, 1);
  });

  it("grants exactly what the README says, as the hub's authorizer sees it", async () => {
    const can = async (
      fullname: string,
      verb: string,
      resource: string,
      options: { group?: string; namespace?: string; subresource?: string; name?: string } = {},
    ): Promise<boolean> => {
      const res = await kubeRequest(hub, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: `system:serviceaccount:${namespace}:${fullname}`,
          groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
          resourceAttributes: { verb, resource, group: options.group ?? "", ...options },
        },
      });
      expect(res.status).toBe(201);
      return (res.body as { status: { allowed: boolean } }).status.allowed;
    };
    const knative = { group: "operator.knative.dev" };
    const clusterProfiles = { group: "multicluster.x-k8s.io" };

    for (const fullname of [full.fullname, fallback.fullname]) {
      expect(await can(fullname, "watch", "knativeservings", knative)).toBe(true);
      expect(
        await can(fullname, "create", "knativeeventings", { ...knative, namespace: "knative-fleet" }),
      ).toBe(true);
      expect(
        await can(fullname, "patch", "knativeservings", {
          ...knative,
          namespace: "x",
          subresource: "status",
        }),
      ).toBe(true);
      expect(await can(fullname, "create", "events", { namespace: "x" })).toBe(true);
      expect(await can(fullname, "get", "secrets", { namespace: credentials })).toBe(true);
      expect(await can(fullname, "create", "pods", { namespace })).toBe(false);
      expect(
        await can(fullname, "delete", "clusterprofiles", { ...clusterProfiles, namespace: profiles }),
      ).toBe(false);
    }

    // Without hubInstall: the plugins' Secrets in the credentials namespace, nowhere else; never the release
    // namespace's, where the Git credentials are.
    expect(await can(fallback.fullname, "get", "secrets", { namespace: "kube-system" })).toBe(false);
    expect(await can(fallback.fullname, "get", "secrets", { namespace, name: "fleet-repo" })).toBe(false);
    expect(await can(fallback.fullname, "list", "secrets", { namespace: credentials })).toBe(false);
    expect(await can(fallback.fullname, "get", "configmaps", { namespace })).toBe(false);
    // The rollout's sealed state and the prune confirmation: those two objects, by name; the state's key, by
    // name, in a namespace of its own (the chart's), and no longer beside the state.
    const keyNamespace = `${fallback.fullname}-rollout-key`;
    const key = "knative-fleet-rollout-key";
    for (const verb of ["get", "patch", "create"]) {
      for (const [resource, name, where] of [
        ["configmaps", "knative-fleet-prune", namespace],
        ["configmaps", "knative-fleet-rollout", namespace],
        ["secrets", key, keyNamespace],
      ] as const)
        expect(
          await can(fallback.fullname, verb, resource, { namespace: where, name }),
          `${verb} ${name}`,
        ).toBe(true);
    }
    for (const verb of ["delete", "update"]) {
      expect(await can(fallback.fullname, verb, "secrets", { namespace: keyNamespace, name: key })).toBe(
        false,
      );
    }
    // A POST to the collection names no Secret: not granted (knative-fleet makes the key by apply, by name).
    expect(await can(fallback.fullname, "create", "secrets", { namespace: keyNamespace })).toBe(false);
    expect(await can(fallback.fullname, "get", "secrets", { namespace: keyNamespace, name: "other" })).toBe(
      false,
    );
    expect(await can(fallback.fullname, "list", "secrets", { namespace: keyNamespace })).toBe(false);
    expect(await can(fallback.fullname, "get", "secrets", { namespace, name: key })).toBe(false);
    expect(await can(fallback.fullname, "list", "secrets", { namespace })).toBe(false);

    // allowedClusterProfileNamespaces: read in those, nowhere else.
    expect(
      await can(full.fullname, "watch", "clusterprofiles", { ...clusterProfiles, namespace: profiles }),
    ).toBe(true);
    expect(await can(full.fullname, "list", "clusterprofiles", clusterProfiles)).toBe(false);
    expect(
      await can(full.fullname, "get", "clusterprofiles", { ...clusterProfiles, namespace: "default" }),
    ).toBe(false);
    // The default: one named namespace (fleet-system), nothing cluster-wide.
    expect(await can(fallback.fullname, "list", "clusterprofiles", clusterProfiles)).toBe(false);
    expect(
      await can(fallback.fullname, "watch", "clusterprofiles", {
        ...clusterProfiles,
        namespace: "fleet-system",
      }),
    ).toBe(true);
    // The ClusterProfile CRD, to read its storage version, by name.
    const crd = { group: "apiextensions.k8s.io", name: "clusterprofiles.multicluster.x-k8s.io" };
    expect(await can(fallback.fullname, "get", "customresourcedefinitions", crd)).toBe(true);
    expect(
      await can(fallback.fullname, "get", "customresourcedefinitions", {
        ...crd,
        name: "secrets.example.com",
      }),
    ).toBe(false);

    // Leader election (replicas 2): its own Lease only.
    const leases = { group: "coordination.k8s.io", namespace };
    expect(await can(full.fullname, "create", "leases", leases)).toBe(true);
    expect(await can(full.fullname, "update", "leases", { ...leases, name: full.fullname })).toBe(true);
    expect(await can(fallback.fullname, "update", "leases", { ...leases, name: fallback.fullname })).toBe(
      false,
    );

    // hubInstall: what installing Knative takes, and nothing of it without the flag.
    for (const [verb, resource, group] of [
      ["create", "customresourcedefinitions", "apiextensions.k8s.io"],
      ["escalate", "clusterroles", "rbac.authorization.k8s.io"],
      ["bind", "clusterroles", "rbac.authorization.k8s.io"],
      ["patch", "validatingwebhookconfigurations", "admissionregistration.k8s.io"],
    ] as const) {
      expect(await can(full.fullname, verb, resource, { group }), `${verb} ${resource}`).toBe(true);
      expect(await can(fallback.fullname, verb, resource, { group }), `${verb} ${resource}`).toBe(false);
    }
    expect(await can(full.fullname, "delete", "namespaces")).toBe(false);
  });

  it("prints the next steps after a (server-side dry-run) install", () => {
    const result = withValuesFile(fullValues, (file) =>
      runHelm([
        "install",
        `notes-${suffix}`,
        chartDir,
        "--namespace",
        namespace,
        "--dry-run=server",
        "--kubeconfig",
        sandbox.hub.adminKubeconfig,
        "-f",
        file,
        "--set",
        `fleet.repository.url=${TEST_REPOSITORY}`,
      ]),
    );
    expect(result.status, result.stderr).toBe(0);
    const notes = result.stdout.slice(result.stdout.indexOf("NOTES:"));
    expect(notes).toContain(`reconciling ${TEST_REPOSITORY}`);
    expect(notes).toContain(
      "knative-fleet clusters --config /etc/knative-fleet/config.yaml --clusterprofile-provider-file /etc/cluster-inventory/config.json",
    );
    expect(notes).toContain("kind: KnativeServing");
    expect(notes).toContain("kubectl get knativeservings,knativeeventings --all-namespaces");
    expect(notes).toContain("https://fleet.example.com/webhook");
  });
});

const RESOURCES: Record<string, string> = {
  Namespace: "namespaces",
  Secret: "secrets",
  ConfigMap: "configmaps",
  ServiceAccount: "serviceaccounts",
  Service: "services",
  Deployment: "deployments",
  PodDisruptionBudget: "poddisruptionbudgets",
  Ingress: "ingresses",
  Role: "roles",
  RoleBinding: "rolebindings",
  ClusterRole: "clusterroles",
  ClusterRoleBinding: "clusterrolebindings",
};

/** The REST path of an object: the chart renders only the kinds above. */
function objectPath(o: KubeObject): string {
  const resource = RESOURCES[o.kind];
  if (!resource) throw new Error(`the chart rendered a ${o.kind}: add its resource to RESOURCES`);
  const base = o.apiVersion.includes("/") ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
  const scope = o.metadata.namespace ? `/namespaces/${o.metadata.namespace}` : "";
  return `${base}${scope}/${resource}/${o.metadata.name}`;
}
