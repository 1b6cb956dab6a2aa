import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { RolloutGate } from "../../../src/fleet/rollout-schema.ts";
import { evaluateGates } from "../../../src/verify/evaluate.ts";
import { cluster } from "../../support/fleet-files.ts";

// HTTP gates against a loopback node:http server whose answers each test scripts: a status, a delay before
// the headers, a delay before the end of the body. Every address is 127.0.0.1.

interface Answer {
  status?: number;
  headersAfterMs?: number;
  bodyAfterMs?: number;
}

let server: Server;
let base: string;
let script: Answer[] = [];
let seen: string[] = [];

function answer(req: IncomingMessage, res: ServerResponse) {
  seen.push(req.url!);
  const { status = 200, headersAfterMs = 0, bodyAfterMs = 0 } = script[seen.length - 1] ?? {};
  setTimeout(() => {
    res.writeHead(status, status === 302 ? { location: `${base}/elsewhere` } : {});
    res.write("ok");
    setTimeout(() => res.end(), bodyAfterMs);
  }, headersAfterMs);
}

beforeAll(async () => {
  server = createServer(answer);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  return new Promise<void>((resolve) => server.close(() => resolve()));
});
beforeEach(() => {
  script = [];
  seen = [];
});

const spoke = cluster("spoke-1", { env: "prod" }, { location: "a/../b?c#d" });

function gate(http: Partial<NonNullable<RolloutGate["http"]>> = {}, waves?: string[]): RolloutGate {
  return {
    name: "healthz",
    ...(waves && { waves }),
    http: {
      url: `${base}/healthz?cluster={{ .cluster.name }}`,
      expectStatus: 200,
      maxLatency: "200ms",
      successes: 3,
      interval: "10ms",
      timeout: "5s",
      ...http,
    },
  };
}

const evaluate = async (g: RolloutGate, options = {}) => {
  const [result] = await evaluateGates([g], spoke, options);
  return result!;
};

describe("an http gate", () => {
  it("passes on N successes in a row, and counts its requests", async () => {
    const result = await evaluate(gate());
    expect(result).toMatchObject({
      gate: "healthz",
      cluster: "fleet-system/spoke-1",
      passed: true,
      requests: 3,
    });
    expect(result.detail).toMatch(
      new RegExp(
        `^gate healthz: GET ${base}/healthz\\?cluster=spoke-1: 3 in a row answered 200 within 200ms \\(slowest \\d+ms\\)$`,
      ),
    );
    expect(seen).toEqual([
      "/healthz?cluster=spoke-1",
      "/healthz?cluster=spoke-1",
      "/healthz?cluster=spoke-1",
    ]);
  });

  it("fails at the first wrong status, in the middle of a streak, and sends no further probe", async () => {
    script = [{}, { status: 503 }, {}];
    const result = await evaluate(gate());
    expect(result).toMatchObject({ passed: false, requests: 2 });
    expect(result.detail).toBe(
      `gate healthz: GET ${base}/healthz?cluster=spoke-1: probe 2 of 3 answered 503, wanted 200`,
    );
    expect(seen).toHaveLength(2);
  });

  it("takes any of the statuses listed, and a redirect as its own status (not followed)", async () => {
    script = [{ status: 204 }, { status: 200 }];
    expect(await evaluate(gate({ expectStatus: [200, 204], successes: 2 }))).toMatchObject({ passed: true });
    seen = [];
    script = [{ status: 302 }];
    const redirected = await evaluate(gate({ expectStatus: [200, 204] }));
    expect(redirected.detail).toMatch(/probe 1 of 3 answered 302, wanted 200 or 204$/);
    expect(seen).toEqual(["/healthz?cluster=spoke-1"]);
  });

  it("fails a probe slower than maxLatency, headers or body, without waiting for it", async () => {
    script = [{}, { headersAfterMs: 1_000 }];
    const slowHeaders = await evaluate(gate());
    expect(slowHeaders).toMatchObject({ passed: false, requests: 2 });
    expect(slowHeaders.detail).toMatch(/: probe 2 of 3 took longer than 200ms$/);
    expect(slowHeaders.durationMs).toBeLessThan(900);
    seen = [];
    script = [{ bodyAfterMs: 1_000 }];
    const slowBody = await evaluate(gate());
    expect(slowBody.detail).toMatch(/: probe 1 of 3 took longer than 200ms$/);
    expect(slowBody.durationMs).toBeLessThan(900);
  });

  it("stops at the deadline, saying how many probes had succeeded", async () => {
    const result = await evaluate(gate({ interval: "200ms", timeout: "300ms" }));
    expect(result).toMatchObject({ passed: false, requests: 2 });
    expect(result.detail).toMatch(/: the 300ms deadline passed after 2 of 3 probes succeeded$/);
  });

  it("fails when nothing listens, naming the error", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const result = await evaluate(gate({ url: `http://127.0.0.1:${port}/healthz` }));
    expect(result).toMatchObject({ passed: false, requests: 1 });
    expect(result.detail).toMatch(/probe 1 of 3 failed: .*ECONNREFUSED/);
  });

  it("sends a cluster's values percent-encoded: a property cannot change the path or the query", async () => {
    const result = await evaluate(
      gate({
        url: `${base}/c/{{ .cluster.properties.location }}/ok?env={{ .cluster.labels.env }}`,
        successes: 1,
      }),
    );
    expect(result.passed).toBe(true);
    expect(seen).toEqual(["/c/a%2F..%2Fb%3Fc%23d/ok?env=prod"]);
  });

  it("fails without a request when the cluster lacks a value", async () => {
    const result = await evaluate(gate({ url: `${base}/{{ .cluster.labels.team }}` }));
    expect(result).toMatchObject({ passed: false, requests: 0 });
    expect(result.detail).toBe(
      `gate healthz: GET ${base}/{{ .cluster.labels.team }}: cluster fleet-system/spoke-1 has no label for {{ .cluster.labels.team }}`,
    );
    expect(seen).toEqual([]);
  });

  it("checks only the gates of the wave asked for, and stops when cancelled", async () => {
    expect(await evaluateGates([gate({}, ["canary"])], spoke, { wave: "remaining" })).toEqual([]);
    expect(await evaluateGates([gate({}, ["canary"])], spoke, { wave: "canary" })).toHaveLength(1);
    const cancel = new AbortController();
    setTimeout(() => cancel.abort(), 100);
    const result = await evaluate(gate({ interval: "1s" }), { signal: cancel.signal });
    expect(result).toMatchObject({ passed: false, requests: 1 });
    expect(result.detail).toMatch(/: stopped: the evaluation was cancelled$/);
  });
});
