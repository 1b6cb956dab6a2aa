import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import {
  ClusterAccess,
  type ClusterAccessOptions,
  type ResolveResult,
} from "../../../src/access/cluster-access.ts";
import { clusterProfileResource } from "../../../src/access/clusterprofile-version.ts";
import type { ProviderConfigState } from "../../../src/access/provider-config.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  BORROWED_CREDENTIALS,
  deleteProfile,
  fixtureProvider,
  hubClient,
  listNamespaces,
  NAMESPACE,
  profileStatus,
  providersOf,
  putProfile,
  sandbox,
  sandboxProvider,
  sandboxProviders,
} from "./support.ts";

const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const opened: ClusterAccess[] = [];
const createdProfiles = new Set<string>();

function access(
  providers: ProviderConfigState = sandboxProviders(),
  options: Partial<ClusterAccessOptions> = {},
) {
  const created = new ClusterAccess({
    hub: hubClient(),
    providers,
    logger: silentLogger,
    policy: BORROWED_CREDENTIALS,
    ...options,
  });
  opened.push(created);
  return created;
}

async function profile(name: string, status: object): Promise<{ namespace: string; name: string }> {
  createdProfiles.add(name);
  await putProfile(name, status);
  return { namespace: NAMESPACE, name };
}

function failed(result: ResolveResult): { reason: string; message: string } {
  if (result.ok) throw new Error(`expected a failure, resolved ${result.spoke.server}`);
  return result;
}

afterAll(async () => {
  await Promise.all(opened.map((a) => a.close()));
  await Promise.all([...createdProfiles].map((name) => deleteProfile(name)));
});

async function whoAmI(result: ResolveResult): Promise<string | undefined> {
  if (!result.ok) throw new Error(`${result.reason}: ${result.message}`);
  const review = await result.spoke.connection.rest.request<{
    status?: { userInfo?: { username?: string } };
  }>({
    method: "POST",
    path: "/apis/authentication.k8s.io/v1/selfsubjectreviews",
    body: { apiVersion: "authentication.k8s.io/v1", kind: "SelfSubjectReview" },
  });
  return review.body.status?.userInfo?.username;
}

describe("reaching the sandbox spokes with the real plugins", () => {
  it("reads ClusterProfiles in the version the hub stores: v1alpha1 on this hub", async () => {
    expect((await clusterProfileResource(hubClient())).version).toBe("v1alpha1");
  });

  it("secretreader: a ServiceAccount token", async () => {
    const result = await access().resolve({ namespace: NAMESPACE, name: spoke1.name });
    expect(result.ok && result.spoke).toMatchObject({
      providerName: "secretreader",
      server: spoke1.server,
      kubernetesVersion: expect.stringMatching(/^v\d+\.\d+\.\d+/),
    });
    expect(await whoAmI(result)).toBe("system:serviceaccount:kube-system:knative-fleet");
    if (!result.ok) return;
    const namespaces = await listNamespaces(result.spoke.connection);
    expect(namespaces).toContain("kube-system");
  });

  it("kubeconfig-secretreader: a client certificate", async () => {
    const result = await access(providersOf(sandboxProvider("kubeconfig-secretreader"))).resolve({
      namespace: NAMESPACE,
      name: spoke2.name,
    });
    expect(result.ok && result.spoke.providerName).toBe("kubeconfig-secretreader");
    expect(await whoAmI(result)).toBe("knative-fleet-cert");
  });

  it("20 concurrent resolutions of a cold cluster run the plugin once and share one client", async () => {
    const counted = fixtureProvider("secretreader", "token", {
      FIXTURE_WRAPPED: sandboxProvider("secretreader").execConfig.command,
    });
    const cold = access(providersOf(counted.provider));
    const results = await Promise.all(
      Array.from({ length: 20 }, () => cold.resolve({ namespace: NAMESPACE, name: spoke1.name })),
    );
    expect(results.every((r) => r.ok)).toBe(true);
    expect(new Set(results.map((r) => r.ok && r.spoke.connection)).size).toBe(1);
    expect(counted.runs()).toBe(1);
  });

  it("runs the plugin again when the credential is about to expire, and the spoke accepts the new one", async () => {
    const expiring = fixtureProvider("secretreader", "token", {
      FIXTURE_WRAPPED: sandboxProvider("secretreader").execConfig.command,
      FIXTURE_TTL_SECONDS: "4",
    });
    const result = await access(providersOf(expiring.provider)).resolve({
      namespace: NAMESPACE,
      name: spoke1.name,
    });
    if (!result.ok) throw new Error(result.message);
    await listNamespaces(result.spoke.connection);
    expect(expiring.runs()).toBe(1);
    await sleep(2_500); // past half of its life: renewal is due
    await listNamespaces(result.spoke.connection);
    expect(expiring.runs()).toBe(2);
  });

  it("reports a token the spoke refuses, after asking the plugin twice", async () => {
    const wrong = fixtureProvider("secretreader", "token", { FIXTURE_TOKEN: "not-a-valid-token" });
    const result = failed(
      await access(providersOf(wrong.provider)).resolve({ namespace: NAMESPACE, name: spoke1.name }),
    );
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toContain(
      `the spoke ${spoke1.server} refused the bearer token from access provider "secretreader" (401 Unauthorized)`,
    );
    expect(wrong.runs()).toBe(2);
  });
});

describe("sharding: a cluster this replica does not own is not reached", () => {
  it("no plugin run and no client for it; a client it had is closed, its requests in flight aborted", async () => {
    const counted = fixtureProvider("secretreader", "token", {
      FIXTURE_WRAPPED: sandboxProvider("secretreader").execConfig.command,
    });
    const owned = new Set([`${NAMESPACE}/${spoke1.name}`]);
    const shard = access(providersOf(counted.provider), { owns: (cluster) => owned.has(cluster) });
    const other = failed(await shard.resolve({ namespace: NAMESPACE, name: spoke2.name }));
    expect(other).toEqual({
      ok: false,
      reason: "RemoteClusterStale",
      message: `another replica reconciles ClusterProfile ${NAMESPACE}/${spoke2.name} now (sharding); this one no longer reaches it`,
    });
    expect(counted.runs()).toBe(0);

    const mine = await shard.resolve({ namespace: NAMESPACE, name: spoke1.name });
    if (!mine.ok) throw new Error(mine.message);
    expect(counted.runs()).toBe(1);
    // A watch: a request that stays open until the client is closed.
    const watching = mine.spoke.connection.rest
      .request({ method: "GET", path: "/api/v1/namespaces?watch=1&timeoutSeconds=30" })
      .then(
        () => "answered",
        (err: Error) => err.message,
      );
    await sleep(300);
    owned.clear(); // handed on
    shard.releaseUnowned();
    expect(await watching).toContain("no longer reaches it");
    await expect(listNamespaces(mine.spoke.connection)).rejects.toThrow(/no longer reaches it/);
    expect(failed(await shard.resolve({ namespace: NAMESPACE, name: spoke1.name })).reason).toBe(
      "RemoteClusterStale",
    );
    expect(counted.runs()).toBe(1);
  });
});

describe("plugin failures are AccessProviderFailed with a message to act on", () => {
  const ref = { namespace: NAMESPACE, name: spoke1.name };

  it("a plugin that hangs is killed after the timeout", async () => {
    const started = Date.now();
    const hanging = fixtureProvider("secretreader", "hanging");
    const result = failed(
      await access(providersOf(hanging.provider), { pluginTimeoutMs: 1_000 }).resolve(ref),
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toContain("did not finish within 1s and was killed");
  });

  it("garbage output", async () => {
    const result = failed(
      await access(providersOf(fixtureProvider("secretreader", "garbage").provider)).resolve(ref),
    );
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toContain("returned an unusable answer");
    expect(result.message).not.toContain("garbage-secret-token");
  });

  it("a non-zero exit", async () => {
    const result = failed(
      await access(providersOf(fixtureProvider("secretreader", "exit-nonzero").provider)).resolve(ref),
    );
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toContain(
      "exited with code 3: [fixture] failed to get secret fleet-system/missing",
    );
  });

  it("a real plugin that cannot find its Secret says which", async () => {
    const missing = await profile(
      "access-test-no-secret",
      profileStatus(spoke1, { extension: { clusterName: "no-such-spoke" } }),
    );
    const result = failed(await access().resolve(missing));
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toMatch(
      /exited with code 1: \[secretreader\] failed to get secret fleet-system\/no-such-spoke/,
    );
  });

  it("a plugin that is not installed", async () => {
    const base = sandboxProvider("secretreader");
    const absent = {
      ...base,
      execConfig: {
        ...base.execConfig,
        command: "/nonexistent/secretreader",
        installHint: "Run npm run sandbox -- up.",
      },
    };
    const result = failed(await access(providersOf(absent)).resolve(ref));
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toBe(
      'access provider "secretreader": plugin /nonexistent/secretreader was not found; install it or fix ' +
        "execConfig.command in the provider file. Run npm run sandbox -- up.",
    );
  });
});

describe("ClusterProfile problems", () => {
  it("missing: ClusterProfileNotFound", async () => {
    const result = failed(
      await access().resolve({ namespace: NAMESPACE, name: "access-test-does-not-exist" }),
    );
    expect(result).toEqual({
      ok: false,
      reason: "ClusterProfileNotFound",
      message:
        "ClusterProfile fleet-system/access-test-does-not-exist does not exist on the hub; check " +
        "spec.clusterProfileRef or the cluster manager that registers the cluster",
    });
  });

  it("unhealthy: ClusterProfileNotReady with the cluster manager's words", async () => {
    const ref = await profile(
      "access-test-unhealthy",
      profileStatus(spoke1, { healthy: "False", message: "apiserver down" }),
    );
    const result = failed(await access().resolve(ref));
    expect(result.reason).toBe("ClusterProfileNotReady");
    expect(result.message).toBe(
      "ClusterProfile fleet-system/access-test-unhealthy is not healthy: ControlPlaneHealthy=False " +
        "(Unreachable: apiserver down) since 2026-01-01T00:00:00Z",
    );
  });

  it("without a matching provider: AccessProviderFailed naming both lists", async () => {
    const ref = await profile("access-test-oidc-only", profileStatus(spoke1, { providerName: "oidc" }));
    const result = failed(await access().resolve(ref));
    expect(result.reason).toBe("AccessProviderFailed");
    expect(result.message).toBe(
      `no access provider matches ClusterProfile fleet-system/access-test-oidc-only: it offers oidc, the access-provider file ${sandbox.providerFile} configures secretreader, kubeconfig-secretreader; add a provider for one of the offered names`,
    );
  });

  it("a wrong CA: RemoteClientCreationFailed, named as a TLS trust failure", async () => {
    const ref = await profile("access-test-wrong-ca", profileStatus(spoke1, { caData: sandbox.hub.caData }));
    const result = failed(await access().resolve(ref));
    expect(result.reason).toBe("RemoteClientCreationFailed");
    expect(result.message).toMatch(
      new RegExp(
        `^TLS: the serving certificate of ${spoke1.server} is not signed by the CA in ClusterProfile fleet-system/access-test-wrong-ca status.accessProviders\\[secretreader\\].cluster.certificate-authority-data`,
      ),
    );
  });
});
