import { type AddressInfo, createServer } from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { ClusterAccess } from "../../../src/access/cluster-access.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { clientFromKubeConfig, KubeConfig } from "../../../src/kube/kubeconfig.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { provider, providerConfig } from "./support.ts";

// The paths that decide before the hub is asked, or without its answer; the rest runs against the sandbox in
// test/integration/access. The hub here is a loopback port nothing listens on.
let hubPort = 0;
beforeAll(async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  hubPort = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function unreachableHub(): KubeClient {
  const hub = new KubeConfig();
  hub.loadFromString(
    stringify({
      clusters: [{ name: "hub", cluster: { server: `https://127.0.0.1:${hubPort}` } }],
      users: [{ name: "nobody", user: {} }],
      contexts: [{ name: "hub", context: { cluster: "hub", user: "nobody" } }],
      "current-context": "hub",
    }),
  );
  return clientFromKubeConfig(hub);
}

const ref = { namespace: "fleet-system", name: "spoke-1" };

describe("ClusterAccess without a hub round trip", () => {
  it("reports MulticlusterDisabled with the reason multicluster is off", async () => {
    const access = new ClusterAccess({
      hub: unreachableHub(),
      providers: { enabled: false, why: "--clusterprofile-provider-file is not set" },
      logger: silentLogger,
    });
    expect(await access.resolve(ref)).toEqual({
      ok: false,
      reason: "MulticlusterDisabled",
      message:
        "multicluster access is off because --clusterprofile-provider-file is not set; ClusterProfile " +
        "fleet-system/spoke-1 cannot be reached until a provider file is configured",
    });
  });

  it("does not read ClusterProfiles outside the allowed namespaces", async () => {
    const access = new ClusterAccess({
      hub: unreachableHub(),
      providers: { enabled: true, config: providerConfig(provider("secretreader")) },
      namespaces: ["fleet-a", "fleet-b"],
      logger: silentLogger,
    });
    expect(await access.resolve(ref)).toEqual({
      ok: false,
      reason: "ClusterProfileNotAllowed",
      message:
        "ClusterProfile fleet-system/spoke-1 is in namespace fleet-system, but knative-fleet only reads " +
        "ClusterProfiles in fleet-a, fleet-b (allowedClusterProfileNamespaces)",
    });
  });

  it("reports ClusterProviderClosed after close()", async () => {
    const access = new ClusterAccess({
      hub: unreachableHub(),
      providers: { enabled: true, config: providerConfig(provider("secretreader")) },
      logger: silentLogger,
    });
    await access.close();
    const result = await access.resolve(ref);
    expect(result.ok === false && result.reason).toBe("ClusterProviderClosed");
    await expect(access.watch()).rejects.toMatchObject({ reason: "ClusterProviderClosed" });
  });

  it("reports an unreachable hub as ClusterProfileUnavailable", async () => {
    const access = new ClusterAccess({
      hub: unreachableHub(),
      providers: { enabled: true, config: providerConfig(provider("secretreader")) },
      logger: silentLogger,
    });
    const result = await access.resolve(ref);
    expect(result.ok === false && result.reason).toBe("ClusterProfileUnavailable");
    expect(result.ok === false && result.message).toMatch(
      /^cannot read ClusterProfile fleet-system\/spoke-1 from the hub: ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:\d+$/,
    );
  });
});

describe("ClusterAccess.contact: reaching a cluster ahead of its reconcile", () => {
  it("runs the resolution once; its failure is what the next resolve reports, at once, and only once", async () => {
    // A hub that takes each connection and drops it: every read of the ClusterProfile fails, and is counted.
    let connections = 0;
    const server = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const hub = new KubeConfig();
    hub.loadFromString(
      stringify({
        clusters: [
          { name: "hub", cluster: { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}` } },
        ],
        users: [{ name: "nobody", user: {} }],
        contexts: [{ name: "hub", context: { cluster: "hub", user: "nobody" } }],
        "current-context": "hub",
      }),
    );
    const access = new ClusterAccess({
      hub: clientFromKubeConfig(hub),
      providers: { enabled: true, config: providerConfig(provider("secretreader")) },
      logger: silentLogger,
    });
    try {
      const contact = access.contact(ref);
      expect(contact).toBeTypeOf("function"); // no client answered yet: there is something to wait for
      await expect(contact!()).resolves.toBeUndefined(); // the failure is kept, not thrown
      const tried = connections;
      expect(tried).toBeGreaterThan(0);
      const reported = await access.resolve(ref);
      expect(reported.ok === false && reported.reason).toBe("ClusterProfileUnavailable");
      expect(connections).toBe(tried); // reported from the contact, without asking the hub again
      const again = await access.resolve(ref);
      expect(again.ok === false && again.reason).toBe("ClusterProfileUnavailable");
      expect(connections).toBeGreaterThan(tried); // reported once: the next resolution tries again
    } finally {
      await access.close();
      server.close();
    }
  });
});
