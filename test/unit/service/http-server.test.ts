import { execFile } from "node:child_process";
import type { IncomingMessage, ServerResponse } from "node:http";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../../src/observability/log.ts";
import { createMetrics } from "../../../src/observability/metrics.ts";
import { type HttpServerOptions, startHttpServer } from "../../../src/service/http-server.ts";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A server on 127.0.0.1 and a port of the kernel's choice; `url(path)` addresses it. */
async function serve(overrides: Partial<HttpServerOptions> = {}) {
  const server = await startHttpServer({
    port: 0,
    host: "127.0.0.1",
    metrics: createMetrics(),
    ready: () => true,
    log: silentLogger,
    ...overrides,
  });
  closers.push(() => server.close());
  return { ...server, url: (path: string) => `http://127.0.0.1:${server.port}${path}` };
}

describe("http server", () => {
  it("answers /healthz with 200 and binds the port it reports", async () => {
    const server = await serve();
    expect(server.port).toBeGreaterThan(0);
    const res = await fetch(server.url("/healthz"));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok\n");
  });

  it("answers /readyz from ready(): 200 when true, 503 when false, asked on every request", async () => {
    let ready = false;
    const server = await serve({ ready: () => ready });
    expect((await fetch(server.url("/readyz"))).status).toBe(503);
    ready = true;
    expect((await fetch(server.url("/readyz"))).status).toBe(200);
  });

  it("serves /metrics in the Prometheus text format, with the fleet's series", async () => {
    const metrics = createMetrics();
    metrics.setLeader(true);
    const server = await serve({ metrics });
    const res = await fetch(server.url("/metrics"));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const body = await res.text();
    expect(body).toContain("# TYPE knative_fleet_leader gauge");
    expect(body.split("\n")).toContain("knative_fleet_leader 1");
    expect(body).toContain("process_cpu_user_seconds_total");
  });

  it("routes POST /webhook, query string and all, to the webhook handler with the request body", async () => {
    const received: { method?: string; url?: string; body: string }[] = [];
    const webhook = (req: IncomingMessage, res: ServerResponse) => {
      let body = "";
      req.on("data", (chunk) => {
        body += chunk;
      });
      req.on("end", () => {
        received.push({ method: req.method, url: req.url, body });
        res.writeHead(202).end();
      });
    };
    const server = await serve({ webhook });
    const res = await fetch(server.url("/webhook?source=github"), { method: "POST", body: '{"ref":"main"}' });
    expect(res.status).toBe(202);
    expect(received).toEqual([{ method: "POST", url: "/webhook?source=github", body: '{"ref":"main"}' }]);
  });

  it("answers 404 for unknown paths, other methods, and /webhook when no handler is mounted", async () => {
    const withWebhook = await serve({ webhook: (_req, res) => res.writeHead(202).end() });
    const without = await serve();
    const status = async (url: string, method = "GET") =>
      (await fetch(url, { method, body: method === "POST" ? "{}" : undefined })).status;
    expect(await status(withWebhook.url("/"))).toBe(404);
    expect(await status(withWebhook.url("/metricsx"))).toBe(404);
    expect(await status(withWebhook.url("/healthz/extra"))).toBe(404);
    expect(await status(withWebhook.url("/healthz"), "POST")).toBe(404);
    expect(await status(withWebhook.url("/webhook"))).toBe(404);
    expect(await status(without.url("/webhook"), "POST")).toBe(404);
    expect(await status(withWebhook.url("/webhook"), "POST")).toBe(202);
  });

  it("answers 500 when a handler throws, and keeps serving", async () => {
    const server = await serve({
      webhook: () => {
        throw new Error("boom");
      },
    });
    expect((await fetch(server.url("/webhook"), { method: "POST", body: "{}" })).status).toBe(500);
    expect((await fetch(server.url("/healthz"))).status).toBe(200);
  });

  it("rejects when the port is taken, and close() frees the port even with kept-alive connections", async () => {
    const first = await serve();
    await expect(
      startHttpServer({
        port: first.port,
        host: "127.0.0.1",
        metrics: createMetrics(),
        ready: () => true,
        log: silentLogger,
      }),
    ).rejects.toThrow(/EADDRINUSE/);
    await fetch(first.url("/healthz")); // leaves an idle keep-alive connection in fetch's pool
    await first.close();
    const again = await serve({ port: first.port });
    expect(again.port).toBe(first.port);
  });
});

describe("keepServingOnUncaughtErrors", () => {
  it("logs an error nothing caught and the process goes on", async () => {
    const module = new URL("../../../src/service/http-server.ts", import.meta.url).href;
    const script = `
      import { keepServingOnUncaughtErrors } from ${JSON.stringify(module)};
      keepServingOnUncaughtErrors({ error: (fields, message) => console.log(message, fields.err) });
      setTimeout(() => { throw new Error("thrown in a timer"); }, 1);
      setTimeout(() => Promise.reject(new Error("rejected")), 2);
      setTimeout(() => console.log("still running"), 50);
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script]);
    expect(stdout.split("\n")).toEqual([
      "uncaught error; the service goes on Error: thrown in a timer",
      "uncaught error; the service goes on Error: rejected",
      "still running",
      "",
    ]);
  });
});
