import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Forge, RateLimitedError } from "../../../src/status/forge.ts";

// What a Git host (or whatever answers at its address) may send back, on loopback: refusals, rate limits,
// bodies that are not the API's, hostile entries in a status list. The token never leaves its header.

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;
const servers: ReturnType<typeof createServer>[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

async function host(
  handler: Handler,
): Promise<{ url: string; seen: { method: string; url: string; auth: string; body: string }[] }> {
  const seen: { method: string; url: string; auth: string; body: string }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        auth: String(req.headers.authorization ?? req.headers["private-token"]),
        body,
      });
      handler(req, res, body);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`, seen };
}

const forge = (url: string, provider: "github" | "gitea" | "gitlab" = "gitea") =>
  new Forge({
    provider,
    apiUrl: url,
    repository: "acme/fleet",
    token: () => "s3cret-token",
    timeoutMs: 2_000,
  });
const STATUS = {
  commit: "a".repeat(40),
  context: "knative-fleet/prod",
  state: "superseded" as const,
  description: "d",
};

describe("a Git host's answers", () => {
  it("a 429 or a spent 403 is a rate limit with its time; a 500 or a body that is not JSON is an error naming the call", async () => {
    let answer: Handler = (_q, res) => res.writeHead(429, { "retry-after": "7" }).end();
    const { url } = await host((q, r, b) => answer(q, r, b));
    const started = Date.now();
    const limited = await forge(url)
      .post(STATUS)
      .catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect((limited as RateLimitedError).until).toBeGreaterThanOrEqual(started + 7_000);
    answer = (_q, res) => res.writeHead(403, { "x-ratelimit-remaining": "0" }).end("{}");
    await expect(forge(url).post(STATUS)).rejects.toBeInstanceOf(RateLimitedError);
    answer = (_q, res) => res.writeHead(500).end("<html>oops</html>");
    await expect(forge(url).post(STATUS)).rejects.toThrow(
      /POST \/api\/v1\/repos\/acme\/fleet\/statuses\/a+: answered 500/,
    );
    answer = (_q, res) => res.writeHead(200).end("<html>a login page</html>");
    await expect(forge(url).statuses("b".repeat(40))).rejects.toThrow(/a body that is not JSON/);
    answer = (_q, res) => res.writeHead(200).end("x".repeat(2 * 1024 * 1024));
    await expect(forge(url).statuses("b".repeat(40))).rejects.toThrow(/larger than/);
  });

  it("a host that never answers is an error within the timeout", async () => {
    const { url } = await host(() => {});
    const started = Date.now();
    await expect(forge(url).statuses("c".repeat(40))).rejects.toThrow(/GET/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("reads only our contexts and states it knows from a status list, whatever else it holds", async () => {
    const { url } = await host((_q, res) =>
      res.writeHead(200).end(
        JSON.stringify({
          statuses: [
            { context: "knative-fleet/prod", status: "warning", description: "superseded by x" },
            { context: "knative-fleet/prod/fleet-system/c1", state: "pending", description: 42 },
            { context: "ci/build", status: "success" },
            { context: "knative-fleet/prod/fleet-system/c2", status: "exploded" },
            { context: ["knative-fleet/x"], status: "success" },
            null,
            "knative-fleet/y",
          ],
        }),
      ),
    );
    expect([...(await forge(url).statuses("d".repeat(40)))]).toEqual([
      ["knative-fleet/prod", { state: "superseded", description: "superseded by x" }],
      ["knative-fleet/prod/fleet-system/c1", { state: "pending", description: "" }],
    ]);
  });

  it("speaks each host's words: GitLab's name and running, GitHub's error for superseded; the token in a header only", async () => {
    const { url, seen } = await host((_q, res) => res.writeHead(201).end("{}"));
    await forge(url, "gitlab").post({ ...STATUS, state: "pending" });
    await forge(url, "github").post(STATUS);
    expect(seen.map((s) => [s.method, s.url, JSON.parse(s.body)])).toEqual([
      [
        "POST",
        `/api/v1/projects/acme%2Ffleet/statuses/${"a".repeat(40)}`,
        { state: "running", name: "knative-fleet/prod", description: "d" },
      ],
      [
        "POST",
        `/api/v1/repos/acme/fleet/statuses/${"a".repeat(40)}`,
        { state: "error", context: "knative-fleet/prod", description: "d" },
      ],
    ]);
    expect(seen.map((s) => s.auth)).toEqual(["s3cret-token", "Bearer s3cret-token"]);
    expect(seen.every((s) => !s.url.includes("s3cret"))).toBe(true);
  });
});
