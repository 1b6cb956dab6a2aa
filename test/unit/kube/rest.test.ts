import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { KubeClient } from "../../../src/kube/client.ts";
import { isUnanswered, KubeApiError, RestClient, retryAfterMs } from "../../../src/kube/rest.ts";

/** A loopback HTTP server answering each request with the next of `answers` (the last one repeats). */
async function serve(answers: ((req: IncomingMessage, res: ServerResponse) => void)[]) {
  const seen: { method: string; body: string; at: number }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", body, at: Date.now() });
      answers[Math.min(seen.length - 1, answers.length - 1)]!(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const dispatcher = new Agent();
  const client = new RestClient({
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connect: async () => ({ dispatcher, headers: {} }),
  });
  cleanups.push(async () => {
    await dispatcher.close();
    await new Promise((resolve) => server.close(resolve));
  });
  return { client, seen };
}
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

const status =
  (code: number, reason: string, headers: Record<string, string> = {}) =>
  (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(code, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify({ kind: "Status", reason, message: `${reason} (test)` }));
  };
const ok = status(200, "");

describe("RestClient retries what the server asked to be sent again", () => {
  it("sends a write refused with 429 and Retry-After again after the wait, with the same body", async () => {
    // What kube-apiserver answers while a custom resource's storage re-initialises after its CRD changed.
    const { client, seen } = await serve([status(429, "TooManyRequests", { "retry-after": "1" }), ok]);
    const res = await client.request({ method: "POST", path: "/api/v1/namespaces", body: { a: 1 } });
    expect(res.status).toBe(200);
    expect(seen.map((s) => [s.method, s.body])).toEqual([
      ["POST", '{"a":1}'],
      ["POST", '{"a":1}'],
    ]);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it("gives up after 10 retries with the server's error", async () => {
    const { client, seen } = await serve([status(503, "ServiceUnavailable", { "retry-after": "0" })]);
    const err = await client.request({ method: "GET", path: "/api" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).status).toBe(503);
    expect(seen).toHaveLength(11);
  });

  it("does not resend a 429 or 500 without Retry-After, nor a 409", async () => {
    for (const answer of [
      status(429, "TooManyRequests"),
      status(500, "InternalError"),
      status(409, "Conflict"),
    ]) {
      const { client, seen } = await serve([answer, ok]);
      await expect(client.request({ method: "PUT", path: "/x", body: {} })).rejects.toBeInstanceOf(
        KubeApiError,
      );
      expect(seen).toHaveLength(1);
    }
  });

  it("stops waiting when the request's signal ends", async () => {
    const { client, seen } = await serve([status(429, "TooManyRequests", { "retry-after": "5" })]);
    const started = Date.now();
    const err = await client
      .request({ method: "GET", path: "/api", signal: AbortSignal.timeout(300) })
      .catch((e: unknown) => e);
    expect((err as KubeApiError).status).toBe(429);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(seen).toHaveLength(1);
  });
});

describe("retryAfterMs", () => {
  it("follows client-go: 429 or 5xx with Retry-After in seconds, capped at 10 s", () => {
    expect(retryAfterMs(429, "1")).toBe(1000);
    expect(retryAfterMs(503, "2")).toBe(2000);
    expect(retryAfterMs(429, "120")).toBe(10_000);
    expect(retryAfterMs(429, undefined)).toBeUndefined();
    expect(retryAfterMs(429, "Wed, 21 Oct 2026 07:28:00 GMT")).toBeUndefined();
    expect(retryAfterMs(404, "1")).toBeUndefined();
  });
});

describe("isUnanswered", () => {
  it("is true for a server that refuses the connection, false for any HTTP answer", async () => {
    // A port that was free a moment ago: nothing listens there any more.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const dispatcher = new Agent();
    cleanups.push(() => dispatcher.close());
    const refused = new RestClient({
      server: `http://127.0.0.1:${port}`,
      connect: async () => ({ dispatcher, headers: {} }),
    });
    const err = await refused.request({ method: "GET", path: "/version" }).catch((e: unknown) => e);
    expect(isUnanswered(err)).toBe(true);

    const { client } = await serve([status(503, "ServiceUnavailable")]);
    const answered = await client.request({ method: "GET", path: "/version" }).catch((e: unknown) => e);
    expect(answered).toBeInstanceOf(KubeApiError);
    expect(isUnanswered(answered)).toBe(false);
    expect(isUnanswered(new Error("render failed"))).toBe(false);
  });
});

describe("KubeClient.write, against servers that answer their own way", () => {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "controller", namespace: "knative-serving" },
    spec: { replicas: 1 },
  };
  /** Discovery of apps/v1 first, then `write` for the apply. */
  const server = (write: (req: IncomingMessage, res: ServerResponse) => void) =>
    serve([
      (_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({ resources: [{ name: "deployments", kind: "Deployment", namespaced: true }] }),
        );
      },
      write,
    ]);

  it("asks for no copy, and takes the whole object from a server (or a proxy) that sends it anyway", async () => {
    let asked: { accept?: string; url?: string } = {};
    const { client } = await server((req, res) => {
      asked = { accept: req.headers.accept, url: req.url };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ...deployment, status: { replicas: 1 } }));
    });
    await expect(new KubeClient(client).write(deployment)).resolves.toBeUndefined();
    expect(asked.accept).toBe("application/json;as=Table;g=meta.k8s.io;v=v1,application/json");
    expect(asked.url).toContain("includeObject=None");
  });

  it("takes an answer that is not JSON at all (a gateway's page with 200)", async () => {
    const { client } = await server((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html>ok</html>");
    });
    await expect(new KubeClient(client).write(deployment)).resolves.toBeUndefined();
  });

  it("still fails with the server's Status when the write is refused", async () => {
    const { client } = await server(status(409, "Conflict"));
    const refused = await new KubeClient(client).write(deployment).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(KubeApiError);
    expect((refused as KubeApiError).reason).toBe("Conflict");
  });
});
