import { writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccessError } from "../../../src/access/errors.ts";
import { ExecAuthenticator } from "../../../src/access/exec-authenticator.ts";
import type { EnvVar } from "../../../src/access/provider-config.ts";
import { SpokeConnection } from "../../../src/access/spoke-connection.ts";
import { spokeEndpoint } from "../../../src/access/spoke-endpoint.ts";
import type { ClusterConnection } from "../../../src/api/clusterprofile.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { fixturePlugin } from "../../fixtures/plugins/index.ts";
import {
  startBadPortForwarder,
  startClusterProxy,
  startConnectProxy,
} from "../../support/loopback-proxies.ts";
import { base64, clusterProfile, provider, providerConfig, scratchDir, testdata } from "./support.ts";

const scratch = scratchDir();

// A loopback HTTPS stand-in for a spoke's API server: it serves /version, records what it was sent, and
// answers 401 to the next `rejectNext` requests.
interface Seen {
  path: string | undefined;
  authorization: string | undefined;
  userAgent: string | undefined;
  acceptEncoding: string | undefined;
  clientCertificate: string | undefined;
}
const seen: Seen[] = [];
let tlsConnections = 0;
let rejectNext = 0;
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer(
    {
      key: testdata("server.key"),
      cert: testdata("server.crt"),
      ca: testdata("ca.crt"),
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req: IncomingMessage, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      seen.push({
        path: req.url,
        authorization: req.headers.authorization,
        userAgent: req.headers["user-agent"],
        acceptEncoding: req.headers["accept-encoding"] as string | undefined,
        clientCertificate: peer.subject?.CN as string | undefined,
      });
      if (rejectNext > 0) {
        rejectNext--;
        res.writeHead(401, { "content-type": "application/json" }).end('{"kind":"Status","code":401}');
        return;
      }
      res
        .writeHead(200, { "content-type": "application/json" })
        .end('{"major":"1","minor":"35","gitVersion":"v1.35.4"}');
    },
  );
  server.on("secureConnection", () => tlsConnections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function spoke(cluster: Partial<ClusterConnection> = {}, env: EnvVar[] = []): SpokeConnection {
  const profile = clusterProfile("spoke", {
    accessProviders: [
      {
        name: "fixture",
        cluster: { server: url, "certificate-authority-data": base64(testdata("ca.crt")), ...cluster },
      },
    ],
  });
  const endpoint = spokeEndpoint(
    profile,
    providerConfig(
      provider("fixture", {
        execConfig: { ...provider("fixture").execConfig, command: fixturePlugin("token"), env },
      }),
    ),
  );
  const authenticator = new ExecAuthenticator(endpoint.plugin, endpoint.execCluster, {
    pluginTimeoutMs: 5_000,
    refreshBeforeExpiryMs: 60_000,
    logger: silentLogger,
  });
  return new SpokeConnection(endpoint, authenticator);
}

function reset(): void {
  seen.length = 0;
  tlsConnections = 0;
  rejectNext = 0;
}

/** An OCM cluster-proxy stand-in routing `/spoke-a/...` to the spoke's server. */
const clusterProxy = (options: { http2?: boolean } = {}) =>
  startClusterProxy({
    key: testdata("server.key"),
    cert: testdata("server.crt"),
    routes: { "spoke-a": url },
    upstreamCa: testdata("ca.crt"),
    ...options,
  });

const getVersion = async (connection: SpokeConnection) =>
  (await connection.rest.request<{ gitVersion: string }>({ method: "GET", path: "/version" })).body;

describe("SpokeConnection", () => {
  it("sends the plugin's token with every request, reusing connections", async () => {
    reset();
    const connection = spoke({}, [{ name: "FIXTURE_TOKEN", value: "tok-1" }]);
    for (let i = 0; i < 5; i++) expect((await getVersion(connection)).gitVersion).toBe("v1.35.4");
    expect(seen).toHaveLength(5);
    expect(seen.every((s) => s.authorization === "Bearer tok-1" && s.userAgent === "knative-fleet")).toBe(
      true,
    );
    // undici may open a second connection while the first is being released; never one per request.
    expect(tlsConnections).toBeLessThanOrEqual(2);
    expect(connection.authenticator.pluginRuns).toBe(1);
  });

  it("answers a 401 by running the plugin again and resending the request once", async () => {
    reset();
    const connection = spoke();
    await getVersion(connection);
    rejectNext = 1;
    expect((await getVersion(connection)).gitVersion).toBe("v1.35.4");
    expect(seen.map((s) => s.authorization)).toEqual([
      "Bearer fixture-token",
      "Bearer fixture-token",
      "Bearer fixture-token",
    ]);
    expect(connection.authenticator.pluginRuns).toBe(2);
  });

  it("probes /version, and calls a credential refused twice an AccessProviderFailed", async () => {
    reset();
    const connection = spoke();
    const probe = await connection.probe(5_000);
    expect(probe.kubernetesVersion).toBe("v1.35.4");
    rejectNext = 2;
    const err = await connection.probe(5_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AccessError);
    expect((err as AccessError).reason).toBe("AccessProviderFailed");
    expect((err as AccessError).message).toBe(
      `the spoke ${url} refused the bearer token from access provider "fixture" (401 Unauthorized), also after ` +
        "the plugin ran again; the plugin returns a credential for another cluster or one the spoke does not trust",
    );
  });

  it("presents a client certificate from the plugin", async () => {
    reset();
    const credentialFile = join(scratch, "credential.json");
    writeFileSync(
      credentialFile,
      JSON.stringify({
        apiVersion: "client.authentication.k8s.io/v1",
        kind: "ExecCredential",
        status: { clientCertificateData: testdata("client.crt"), clientKeyData: testdata("client.key") },
      }),
    );
    const connection = spoke({}, [{ name: "FIXTURE_CREDENTIAL_FILE", value: credentialFile }]);
    await connection.probe(5_000);
    expect(seen[0]).toMatchObject({ authorization: undefined, clientCertificate: "fixture-client" });
  });

  it("sends Accept-Encoding: identity when the profile disables compression", async () => {
    reset();
    await spoke({ "disable-compression": true }).probe(5_000);
    expect(seen[0]?.acceptEncoding).toBe("identity");
  });

  it("checks the serving certificate against tls-server-name", async () => {
    reset();
    await expect(spoke({ "tls-server-name": "spoke.fixture.invalid" }).probe(5_000)).resolves.toBeDefined();
    const err = (await spoke({ "tls-server-name": "wrong.fixture.invalid" })
      .probe(5_000)
      .catch((e) => e)) as AccessError;
    expect(err.reason).toBe("RemoteClientCreationFailed");
    expect(err.message).toContain(`TLS: the serving certificate of ${url} is not valid for the name used`);
    expect(err.message).toContain("ERR_TLS_CERT_ALTNAME_INVALID");
  });

  it("names a wrong CA as a TLS trust failure and the field to fix", async () => {
    const err = (await spoke({ "certificate-authority-data": base64(testdata("other-ca.crt")) })
      .probe(5_000)
      .catch((e) => e)) as AccessError;
    expect(err.reason).toBe("RemoteClientCreationFailed");
    expect(err.message).toMatch(
      new RegExp(
        `^TLS: the serving certificate of ${url} is not signed by the CA in ClusterProfile fleet-system/spoke ` +
          "status.accessProviders\\[fixture\\].cluster.certificate-authority-data \\((UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN)",
      ),
    );
  });

  it("names a refused connection", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = (await spoke({ server: `https://127.0.0.1:${port}` })
      .probe(5_000)
      .catch((e) => e)) as AccessError;
    expect(err.message).toBe(
      `cannot connect to https://127.0.0.1:${port}: connection refused; check ClusterProfile fleet-system/spoke ` +
        "status.accessProviders[fixture].cluster.server",
    );
  });

  it("refuses requests once closed, with the reason it was closed", async () => {
    const connection = spoke();
    await connection.probe(5_000);
    await connection.close(new AccessError("RemoteClusterStale", "replaced"), "drain");
    await expect(getVersion(connection)).rejects.toMatchObject({
      reason: "RemoteClusterStale",
    });
  });

  it("sends every request under the server's path prefix, as OCM cluster-proxy publishes it", async () => {
    reset();
    const proxy = await clusterProxy();
    try {
      const connection = spoke({ server: `${proxy.url}/spoke-a` });
      expect((await connection.probe(5_000)).kubernetesVersion).toBe("v1.35.4");
      expect((await getVersion(connection)).gitVersion).toBe("v1.35.4");
      expect(proxy.handled).toEqual(["GET /spoke-a/version", "GET /spoke-a/version"]);
      expect(seen.map((s) => s.path)).toEqual(["/version", "/version"]);
    } finally {
      await proxy.close();
    }
  });

  it("sends its requests in flight over one HTTP/2 connection when the server offers it, as an API server does", async () => {
    reset();
    const proxy = await clusterProxy({ http2: true });
    try {
      const connection = spoke({ server: `${proxy.url}/spoke-a` });
      const versions = await Promise.all(Array.from({ length: 8 }, () => getVersion(connection)));
      expect(versions.map((v) => v.gitVersion)).toEqual(Array(8).fill("v1.35.4"));
      expect(proxy.handled).toHaveLength(8);
      // Over HTTP/1.1 each request in flight takes a connection of its own: 8 TLS handshakes, 8 sockets.
      expect(proxy.connectionsAccepted()).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it("reaches a server on a port WHATWG fetch refuses", async () => {
    reset();
    const forwarder = await startBadPortForwarder({ host: "127.0.0.1", port: Number(new URL(url).port) });
    try {
      const probe = await spoke({ server: forwarder.url }).probe(5_000);
      expect(probe.kubernetesVersion).toBe("v1.35.4");
      expect(forwarder.handled.length).toBeGreaterThan(0);
    } finally {
      await forwarder.close();
    }
  });

  it("tunnels through the proxy-url with CONNECT", async () => {
    reset();
    const proxy = await startConnectProxy();
    try {
      const connection = spoke({ "proxy-url": proxy.url });
      expect((await connection.probe(5_000)).kubernetesVersion).toBe("v1.35.4");
      expect(proxy.handled).toEqual([`CONNECT ${new URL(url).host}`]);
    } finally {
      await proxy.close();
    }
  });
});
