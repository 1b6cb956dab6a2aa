import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";
import { clusterProfileResource } from "../../../src/access/clusterprofile-version.ts";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../../src/kube/object.ts";
import { KubeApiError } from "../../../src/kube/rest.ts";
import { base64, testdata } from "../../support/access-pki.ts";
import { writeServiceConfig } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import {
  type LoopbackProxy,
  startBadPortForwarder,
  startClusterProxy,
  startConnectProxy,
} from "../../support/loopback-proxies.ts";
import { scratchDir } from "../../support/scratch-dir.ts";
import { nextMetricsPort, ServiceProcess, serviceEnv } from "../../support/service-process.ts";
import { clusterProfileCrdPath } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";
import { sandbox } from "./support.ts";

// `knative-fleet run` (a real child process) against ClusterProfiles shaped the way cluster managers publish
// them, on a hub that serves ClusterProfiles v1alpha2 (cluster-inventory-api PR #65) as its storage version:
// - OCM: provider `open-cluster-management`, labels x-k8s.io/cluster-manager and
//   open-cluster-management.io/cluster-name, the server a path under cluster-proxy's user server
//   (https://<proxy>/<cluster>), here behind a corporate CONNECT proxy too (proxy-url);
// - GKE Fleet: namespace fleet-cluster-inventory, label x-k8s.io/cluster-manager: gke-fleet, the API server
//   on a port WHATWG fetch refuses (6666 via a loopback forwarder), checked against tls-server-name.
// The credential plugin is the official secretreader in both (the real OCM and Google plugins need their
// clouds). Each CR must become Ready. As the chart README suggests for this setup, each ClusterProfile
// namespace has a credentials namespace of its own (access.credentialNamespaces). Next to them, what must not
// work: a ClusterProfile naming another credential with a server of its own (confused deputy), one in the
// GKE namespace named like the OCM namespace's spoke (its own name, so the name check passes) with a server
// of its own, an http:// server, and a hand-made CR in a foreign namespace.

const scratch = scratchDir();
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const OCM_NAMESPACE = "ocm-clusterset-default";
const GKE_NAMESPACE = "fleet-cluster-inventory";
const FLEET_NAMESPACE = "knative-fleet";
const FOREIGN_NAMESPACE = "team-b";
/** The GKE namespace's own credentials namespace; the OCM namespace's is the sandbox's (fleet-system). */
const GKE_CREDENTIALS = "gke-credentials";
const REPO = "shapes";
const GROUP = "multicluster.x-k8s.io";

/** The ClusterProfile CRD's file in ../shared/crds (v1alpha1 only), as the sandbox installs it. */
const v1alpha1Crd = (): KubeObject =>
  parseAllDocuments(readFileSync(clusterProfileCrdPath(), "utf8"))[0]!.toJSON();

/**
 * The v1alpha2 CRD, generated from the v1alpha1 one in ../shared/crds as PR #65 changed it (source:
 * kubernetes-sigs/cluster-inventory-api apis/v1alpha2/clusterprofile_types.go at 2c9add11d437): no
 * credentialProviders, at most 64 accessProviders, CEL on server and proxy-url. v1alpha2 is the storage
 * version; v1alpha1 stays served, as a hub in the middle of the upgrade has it.
 */
function v1alpha2Crd(): KubeObject {
  const crd = v1alpha1Crd() as KubeObject & {
    spec: { versions: { name: string; storage: boolean; schema: { openAPIV3Schema: Schema } }[] };
  };
  type Schema = { properties: Record<string, Schema>; items?: Schema; [key: string]: unknown };
  const v1 = crd.spec.versions.find((v) => v.name === "v1alpha1")!;
  const v2 = structuredClone(v1);
  v2.name = "v1alpha2";
  const status = v2.schema.openAPIV3Schema.properties.status!;
  delete status.properties.credentialProviders;
  const accessProviders = status.properties.accessProviders!;
  accessProviders.maxItems = 64;
  const cluster = accessProviders.items!.properties.cluster!;
  // The MaxLength markers of the Go types also keep the CEL rules within the apiserver's cost budget.
  cluster.properties.server!.maxLength = 2048;
  cluster.properties["proxy-url"]!.maxLength = 2048;
  cluster.properties["tls-server-name"]!.maxLength = 253;
  cluster.properties.server!["x-kubernetes-validations"] = [
    {
      rule: "isURL(self) && url(self).getHost() != ''",
      message: "server must be a valid absolute URL with a host",
    },
  ];
  cluster.properties["proxy-url"]!["x-kubernetes-validations"] = [
    {
      rule: "self == '' || (isURL(self) && url(self).getScheme() in ['http', 'https', 'socks5'] && url(self).getHost() != '')",
      message: "proxy-url must be a valid URL with scheme http, https, or socks5 and a host",
    },
  ];
  v1.storage = false;
  v2.storage = true;
  crd.spec.versions = [v1, v2];
  return crd;
}

/** The storage version hash discovery gives ClusterProfiles: it changes once the API server stores another version. */
async function clusterProfileStorageHash(hub: KubeClient): Promise<string | undefined> {
  const { body } = await hub.rest.request<{ resources: { name: string; storageVersionHash?: string }[] }>({
    method: "GET",
    path: `/apis/${GROUP}/v1alpha1`,
  });
  return body.resources.find((r) => r.name === "clusterprofiles")?.storageVersionHash;
}

/**
 * The hub's CRD as the sandbox had it, for the files that follow: with v1alpha2 left in
 * status.storedVersions, the README's `kubectl apply` of the v1alpha1 CRD conflicts. The way the storage
 * version migrator goes: v1alpha1 stored again, every ClusterProfile rewritten in it, v1alpha2 dropped
 * from storedVersions, then the CRD's file.
 */
async function restoreV1alpha1Crd(hub: KubeClient): Promise<void> {
  const stored = await clusterProfileStorageHash(hub);
  const restored = v1alpha2Crd() as KubeObject & { spec: { versions: { name: string; storage: boolean }[] } };
  for (const v of restored.spec.versions) v.storage = v.name === "v1alpha1";
  await hub.apply(restored);
  await waitUntil("ClusterProfiles stored as v1alpha1", async () =>
    (await clusterProfileStorageHash(hub)) !== stored ? true : undefined,
  );
  // An empty patch rewrites an object in the storage version (its stored bytes differ).
  for (const profile of (await hub.list(`${GROUP}/v1alpha1`, "ClusterProfile")).items)
    await hub
      .mergePatch(`${GROUP}/v1alpha1`, "ClusterProfile", profile.metadata.namespace, nameOf(profile), {})
      .catch((err: unknown) => {
        if (!(err instanceof KubeApiError && err.status === 404)) throw err;
      });
  await hub.apply(
    {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `clusterprofiles.${GROUP}` },
      status: { storedVersions: ["v1alpha1"] },
    } as KubeObject,
    { subresource: "status" },
  );
  await hub.apply(v1alpha1Crd());
}

const condition = {
  type: "ControlPlaneHealthy",
  status: "True",
  reason: "Healthy",
  message: "set by the published-shapes test",
  lastTransitionTime: "2026-01-01T00:00:00Z",
};
const execExtension = (clusterName: string) => [
  { name: "client.authentication.k8s.io/exec", extension: { clusterName } },
];

/** Creates a v1alpha2 ClusterProfile with its status, as a cluster manager does. */
async function putProfile(
  hub: KubeClient,
  profile: { namespace: string; name: string; labels: Record<string, string>; manager: string },
  accessProviders: object[],
): Promise<void> {
  const path = `/apis/${GROUP}/v1alpha2/namespaces/${profile.namespace}/clusterprofiles/${profile.name}`;
  const metadata = { name: profile.name, namespace: profile.namespace, labels: profile.labels };
  // The object, then its status through the /status subresource, each by server-side apply.
  for (const [at, part] of [
    [path, { spec: { displayName: profile.name, clusterManager: { name: profile.manager } } }],
    [`${path}/status`, { status: { accessProviders, conditions: [condition] } }],
  ] as const) {
    await hub.rest.request({
      method: "PATCH",
      path: at,
      query: { fieldManager: "cluster-manager", force: true },
      contentType: "application/apply-patch+yaml",
      body: { apiVersion: `${GROUP}/v1alpha2`, kind: "ClusterProfile", metadata, ...part },
    });
  }
}

const crFile = (
  kind: string,
  name: string,
  namespace: string,
  profile: { namespace: string; name: string },
) =>
  stringify({
    apiVersion: OPERATOR_API_VERSION,
    kind,
    metadata: { name, namespace },
    spec: {
      version: "1.22",
      clusterProfileRef: profile,
      ...(kind === "KnativeServing" ? { ingress: { kourier: { enabled: true } } } : {}),
    },
  });

type Conditions = { type: string; status: string; reason?: string; message?: string }[];
const conditionsOf = (cr: KubeObject | undefined): Conditions =>
  (cr?.status as { conditions?: Conditions } | undefined)?.conditions ?? [];

describe("knative-fleet run against OCM- and GKE-shaped ClusterProfiles on a v1alpha2 hub", () => {
  let hub: KubeClient;
  let git: GitServer;
  let service: ServiceProcess;
  let originalCrd: KubeObject;
  const proxies: LoopbackProxy[] = [];
  let clusterProxy: LoopbackProxy;
  let connectProxy: LoopbackProxy;
  let forwarder: LoopbackProxy;
  let attacker: Server;
  const attackerSaw: (string | undefined)[] = [];

  const hubCr = (kind: string, name: string, namespace = FLEET_NAMESPACE) =>
    hub.get(OPERATOR_API_VERSION, kind, namespace, name);
  const waitCondition = (kind: string, name: string, type: string, status: string) =>
    waitUntil(
      `${kind} ${name} ${type}=${status}`,
      async () => {
        const cr = await hubCr(kind, name);
        return conditionsOf(cr).some((c) => c.type === type && c.status === status) ? cr : undefined;
      },
      280_000,
    ).catch(async (err: Error) => {
      const log = readFileSync(service.logFile, "utf8").split("\n").slice(-15).join("\n");
      throw new Error(
        `${err.message}; conditions: ${JSON.stringify(conditionsOf(await hubCr(kind, name)))}\n${log}`,
      );
    });

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    for (const ns of [FLEET_NAMESPACE, OCM_NAMESPACE, GKE_NAMESPACE, FOREIGN_NAMESPACE, GKE_CREDENTIALS])
      await ensureNamespace(hub, ns);
    // spoke-2's credential, in the GKE namespace's credentials namespace, under the ClusterProfile's name.
    const spoke2Secret = await hub.get("v1", "Secret", sandbox.clusterProfileNamespace, spoke2.name);
    await hub.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: spoke2.name, namespace: GKE_CREDENTIALS },
      data: spoke2Secret!.data,
    } as KubeObject);

    originalCrd = (await hub.get(
      "apiextensions.k8s.io/v1",
      "CustomResourceDefinition",
      undefined,
      `clusterprofiles.${GROUP}`,
    ))!;
    await hub.apply(v1alpha2Crd());
    await waitUntil("ClusterProfile v1alpha2 served", async () => {
      const res = await hub.rest
        .request({ method: "GET", path: `/apis/${GROUP}/v1alpha2/clusterprofiles` })
        .catch(() => undefined);
      return res ? true : undefined;
    });

    clusterProxy = await startClusterProxy({
      key: testdata("server.key"),
      cert: testdata("server.crt"),
      routes: { [spoke1.name]: spoke1.server },
      upstreamCa: Buffer.from(spoke1.caData, "base64").toString("utf8"),
    });
    connectProxy = await startConnectProxy();
    const spoke2Url = new URL(spoke2.server);
    forwarder = await startBadPortForwarder({ host: spoke2Url.hostname, port: Number(spoke2Url.port) });
    proxies.push(clusterProxy, connectProxy, forwarder);

    // A server of the ClusterProfile author's choosing, recording what it is sent.
    attacker = createServer({ key: testdata("server.key"), cert: testdata("server.crt") }, (req, res) => {
      attackerSaw.push(req.headers.authorization);
      res.writeHead(200, { "content-type": "application/json" }).end('{"gitVersion":"v1.35.0"}');
    });
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
    const attackerUrl = `https://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
    // The controller's own secret, in the namespace the plugin reads, under the key the plugin returns.
    await hub.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "knative-fleet-git", namespace: sandbox.clusterProfileNamespace },
      stringData: { token: "the-fleet-repository-write-token" },
    } as KubeObject);

    await putProfile(
      hub,
      {
        namespace: OCM_NAMESPACE,
        name: spoke1.name,
        manager: "open-cluster-management",
        labels: {
          "x-k8s.io/cluster-manager": "open-cluster-management",
          "open-cluster-management.io/cluster-name": spoke1.name,
        },
      },
      [
        {
          name: "open-cluster-management",
          cluster: {
            server: `${clusterProxy.url}/${spoke1.name}`,
            "certificate-authority-data": base64(testdata("ca.crt")),
            "proxy-url": connectProxy.url,
            extensions: execExtension(spoke1.name),
          },
        },
      ],
    );
    const gke = { "x-k8s.io/cluster-manager": "gke-fleet" };
    await putProfile(
      hub,
      { namespace: GKE_NAMESPACE, name: spoke2.name, manager: "gke-fleet", labels: gke },
      [
        {
          name: "google",
          cluster: {
            server: forwarder.url,
            "certificate-authority-data": spoke2.caData,
            "tls-server-name": "kubernetes.default.svc",
            extensions: execExtension(spoke2.name),
          },
        },
      ],
    );
    await putProfile(hub, { namespace: GKE_NAMESPACE, name: "team-b", manager: "gke-fleet", labels: gke }, [
      { name: "google", cluster: { server: attackerUrl, extensions: execExtension("knative-fleet-git") } },
    ]);
    // The OCM namespace's spoke-1, again in the GKE namespace: its own name, a server of its own.
    await putProfile(
      hub,
      { namespace: GKE_NAMESPACE, name: spoke1.name, manager: "gke-fleet", labels: gke },
      [
        {
          name: "google",
          cluster: {
            server: attackerUrl,
            "certificate-authority-data": base64(testdata("ca.crt")),
            extensions: execExtension(spoke1.name),
          },
        },
      ],
    );
    await putProfile(
      hub,
      { namespace: GKE_NAMESPACE, name: "plain-http", manager: "gke-fleet", labels: gke },
      [
        {
          name: "google",
          cluster: { server: "http://127.0.0.1:1", extensions: execExtension("plain-http") },
        },
      ],
    );

    // A hand-made CR outside the fleet's namespace, aimed at a spoke the fleet may reach.
    await hub.apply({
      apiVersion: OPERATOR_API_VERSION,
      kind: "KnativeEventing",
      metadata: { name: "hand-made", namespace: FOREIGN_NAMESPACE },
      spec: { version: "1.22", clusterProfileRef: { namespace: GKE_NAMESPACE, name: spoke2.name } },
    } as KubeObject);

    git = await startGitServer();
    await git.createRepo(REPO, {
      "clusters/ocm.yaml": crFile("KnativeServing", "ocm-serving", FLEET_NAMESPACE, {
        namespace: OCM_NAMESPACE,
        name: spoke1.name,
      }),
      "clusters/gke.yaml": crFile("KnativeEventing", "gke-eventing", FLEET_NAMESPACE, {
        namespace: GKE_NAMESPACE,
        name: spoke2.name,
      }),
      "clusters/team-b.yaml": crFile("KnativeServing", "deputy", FLEET_NAMESPACE, {
        namespace: GKE_NAMESPACE,
        name: "team-b",
      }),
      "clusters/twin.yaml": crFile("KnativeEventing", "twin", FLEET_NAMESPACE, {
        namespace: GKE_NAMESPACE,
        name: spoke1.name,
      }),
      "clusters/plain-http.yaml": crFile("KnativeEventing", "plain-http", FLEET_NAMESPACE, {
        namespace: GKE_NAMESPACE,
        name: "plain-http",
      }),
    });

    // The provider file names the providers as the cluster managers publish them.
    const sandboxProviders = JSON.parse(readFileSync(sandbox.providerFile, "utf8")) as {
      providers: { name: string; execConfig: object }[];
    };
    const secretreader = sandboxProviders.providers.find((p) => p.name === "secretreader")!;
    const providerFile = join(scratch, "providers.json");
    writeFileSync(
      providerFile,
      JSON.stringify({
        providers: ["open-cluster-management", "google"].map((name) => ({ ...secretreader, name })),
      }),
    );
    const configPath = writeServiceConfig({ repositoryUrl: git.url(REPO), namespace: FLEET_NAMESPACE });
    const metricsPort = nextMetricsPort();
    const config = parse(readFileSync(configPath, "utf8")) as Record<string, unknown>;
    writeFileSync(
      configPath,
      stringify({
        ...config,
        allowedClusterProfileNamespaces: [OCM_NAMESPACE, GKE_NAMESPACE],
        access: {
          credentialNamespaces: {
            [OCM_NAMESPACE]: sandbox.clusterProfileNamespace,
            [GKE_NAMESPACE]: GKE_CREDENTIALS,
          },
        },
        logLevel: "info",
        metricsPort,
      }),
    );
    service = new ServiceProcess({
      args: ["run", "--config", configPath, "--clusterprofile-provider-file", providerFile],
      env: serviceEnv(sandbox.hub.adminKubeconfig, scratch),
      metricsPort,
      logFile: join(scratch, "service.log"),
    });
  });

  afterAll(async () => {
    await service?.stop();
    for (const [kind, namespace] of [
      ["KnativeServing", FLEET_NAMESPACE],
      ["KnativeEventing", FLEET_NAMESPACE],
      ["KnativeEventing", FOREIGN_NAMESPACE],
    ] as const) {
      for (const cr of (await hub.list(OPERATOR_API_VERSION, kind, { namespace })).items) {
        await hub
          .mergePatch(OPERATOR_API_VERSION, kind, namespace, nameOf(cr), {
            metadata: { finalizers: null },
          })
          .catch(() => {});
        await hub.delete(OPERATOR_API_VERSION, kind, namespace, nameOf(cr)).catch(() => {});
      }
    }
    for (const ns of [OCM_NAMESPACE, GKE_NAMESPACE, FOREIGN_NAMESPACE, GKE_CREDENTIALS])
      await hub.delete("v1", "Namespace", undefined, ns).catch(() => {});
    await hub.delete("v1", "Secret", sandbox.clusterProfileNamespace, "knative-fleet-git").catch(() => {});
    await Promise.all(proxies.map((p) => p.close()));
    await new Promise<void>((resolve) => (attacker ? attacker.close(() => resolve()) : resolve()));
    await git?.close();
    if (originalCrd) await restoreV1alpha1Crd(hub);
  });

  it("reads ClusterProfiles in the version the hub stores", async () => {
    expect((await clusterProfileResource(hub)).version).toBe("v1alpha2");
  });

  it("the OCM-shaped (cluster-proxy path, CONNECT proxy) and GKE-shaped (port 6666, tls-server-name) spokes become Ready", async () => {
    await Promise.all([
      waitCondition("KnativeServing", "ocm-serving", "Ready", "True"),
      waitCondition("KnativeEventing", "gke-eventing", "Ready", "True"),
    ]);
    // Every request to spoke-1 went through cluster-proxy's path and the CONNECT tunnel; spoke-2's through 6666.
    expect(clusterProxy.handled.length).toBeGreaterThan(10);
    expect(clusterProxy.handled.every((r) => r.split(" ")[1]!.startsWith(`/${spoke1.name}/`))).toBe(true);
    expect(clusterProxy.handled.some((r) => r.startsWith("PATCH "))).toBe(true);
    expect(connectProxy.handled.length).toBeGreaterThan(0);
    expect(forwarder.port).toBeGreaterThanOrEqual(6000);
    expect(forwarder.handled.length).toBeGreaterThan(0);
  });

  it("refuses a ClusterProfile that names another credential, and never sends it to its server", async () => {
    const cr = await waitCondition("KnativeServing", "deputy", "TargetClusterResolved", "False");
    expect(conditionsOf(cr).find((c) => c.type === "TargetClusterResolved")).toMatchObject({
      reason: "AccessProviderFailed",
      message: expect.stringContaining(
        `status.accessProviders[google].cluster.extensions[client.authentication.k8s.io/exec].clusterName is "knative-fleet-git", but a ClusterProfile may only name its own credential ("team-b")`,
      ),
    });
    expect(attackerSaw).toEqual([]);
  });

  it("a ClusterProfile named like another namespace's never gets that namespace's credential", async () => {
    const cr = await waitCondition("KnativeEventing", "twin", "TargetClusterResolved", "False");
    // The plugin looked in the GKE namespace's credentials namespace, where there is no spoke-1.
    expect(conditionsOf(cr).find((c) => c.type === "TargetClusterResolved")).toMatchObject({
      reason: "AccessProviderFailed",
      message: expect.stringContaining(`failed to get secret ${GKE_CREDENTIALS}/${spoke1.name}`),
    });
    expect(attackerSaw).toEqual([]);
  });

  it("refuses an http:// server", async () => {
    const cr = await waitCondition("KnativeEventing", "plain-http", "TargetClusterResolved", "False");
    expect(conditionsOf(cr).find((c) => c.type === "TargetClusterResolved")).toMatchObject({
      reason: "RemoteClientCreationFailed",
      message: expect.stringContaining('.server "http://127.0.0.1:1" is plain http://'),
    });
  });

  it("leaves a hand-made CR in a foreign namespace alone", async () => {
    const handMade = await hubCr("KnativeEventing", "hand-made", FOREIGN_NAMESPACE);
    expect(handMade?.metadata.finalizers ?? []).toEqual([]);
    expect(handMade?.status).toBeUndefined();
    expect(readFileSync(service.logFile, "utf8")).toContain("not reconciled: outside the tenancy settings");
  });
});
