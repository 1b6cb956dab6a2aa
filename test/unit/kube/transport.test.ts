import { constants } from "node:crypto";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { RestClient } from "../../../src/kube/rest.ts";
import { KubeTransport } from "../../../src/kube/transport.ts";
import { base64, testdata } from "../../support/access-pki.ts";

// A full garbage collection on demand: what the image's 1 MiB young generation does every few milliseconds.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/**
 * A loopback HTTPS server (the test PKI's serving certificate) that asks for a client certificate, closes
 * every connection after its answer (each request needs a new one) and records, per connection, whether
 * it resumed a TLS session and which client certificate it saw.
 */
async function tlsServer(options: { port?: number; secureOptions?: number } = {}) {
  const connections: { resumed: boolean; client: string | undefined }[] = [];
  const server = createServer(
    {
      cert: testdata("server.crt"),
      key: testdata("server.key"),
      ca: testdata("ca.crt"),
      requestCert: true,
      rejectUnauthorized: false,
      ...(options.secureOptions === undefined ? {} : { secureOptions: options.secureOptions }),
    },
    (req, res) => {
      const socket = req.socket as TLSSocket;
      connections.push({
        resumed: socket.isSessionReused(),
        client: socket.getPeerCertificate().subject?.CN as string | undefined,
      });
      res.writeHead(200, { "content-type": "application/json", connection: "close" });
      res.end(JSON.stringify({ gitVersion: "v1.35.4" }));
    },
  );
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const close = () => new Promise((resolve) => server.close(resolve));
  cleanups.push(close);
  const port = (server.address() as AddressInfo).port;
  return { url: `https://127.0.0.1:${port}`, port, connections, close };
}

function transportTo(url: string, certificate?: { cert: string; key: string }) {
  const transport = new KubeTransport(
    { server: url, caData: base64(testdata("ca.crt")) },
    { credential: async () => ({ headers: {}, clientCertificate: certificate }) },
  );
  cleanups.push(() => transport.close("abort"));
  return { transport, client: new RestClient(transport) };
}

/** `count` requests one after the other, each on a new connection, a full collection between them. */
async function requestsInTurn(client: RestClient, count: number) {
  for (let i = 0; i < count; i++) {
    await client.request({ method: "GET", path: "/version" });
    // The session ticket comes after the handshake; let it arrive, then collect what nothing holds.
    await new Promise((resolve) => setTimeout(resolve, 20));
    collectGarbage();
  }
}

describe("KubeTransport's TLS sessions", () => {
  it("resumes the pool's session on each new connection, garbage collections between them", async () => {
    const server = await tlsServer();
    const { client } = transportTo(server.url);
    await requestsInTurn(client, 5);
    expect(server.connections.map((c) => c.resumed)).toEqual([false, true, true, true, true]);
  });

  it("keeps the client certificate of the session it resumes, and a new certificate starts a new session", async () => {
    const server = await tlsServer();
    const first = { cert: testdata("client.crt"), key: testdata("client.key") };
    let certificate: { cert: string; key: string } | undefined = first;
    const transport = new KubeTransport(
      { server: server.url, caData: base64(testdata("ca.crt")) },
      { credential: async () => ({ headers: {}, clientCertificate: certificate }) },
    );
    cleanups.push(() => transport.close("abort"));
    const client = new RestClient(transport);
    await requestsInTurn(client, 2);
    // Another certificate (none here): another pool, whose first connection resumes nothing of the old one.
    certificate = undefined;
    await requestsInTurn(client, 2);
    expect(server.connections).toEqual([
      { resumed: false, client: "fixture-client" },
      { resumed: true, client: "fixture-client" },
      { resumed: false, client: undefined },
      { resumed: true, client: undefined },
    ]);
  });

  it("resumes nothing of another server's session: each transport its own pool", async () => {
    const one = await tlsServer();
    const other = await tlsServer();
    await requestsInTurn(transportTo(one.url).client, 2);
    await requestsInTurn(transportTo(other.url).client, 2);
    expect(other.connections.map((c) => c.resumed)).toEqual([false, true]);
  });

  it("makes a full handshake when the server restarted and forgot its tickets, then resumes the new session", async () => {
    const before = await tlsServer();
    const { client } = transportTo(before.url);
    await requestsInTurn(client, 2);
    await before.close();
    // The same address, new ticket keys: the session held is no longer good there.
    const after = await tlsServer({ port: before.port });
    await requestsInTurn(client, 2);
    expect(before.connections.map((c) => c.resumed)).toEqual([false, true]);
    expect(after.connections.map((c) => c.resumed)).toEqual([false, true]);
  });

  it("works with a server that issues no session tickets: every connection a full handshake", async () => {
    const server = await tlsServer({ secureOptions: constants.SSL_OP_NO_TICKET });
    const { client } = transportTo(server.url);
    await requestsInTurn(client, 3);
    expect(server.connections.map((c) => c.resumed)).toEqual([false, false, false]);
  });
});
