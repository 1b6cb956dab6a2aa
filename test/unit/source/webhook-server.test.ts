import { createHmac } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createFileFilter, DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { serveRoutes } from "../../../src/service/http-server.ts";
import {
  checkWebhookSecret,
  createWebhookHandler,
  type WebhookOptions,
} from "../../../src/source/webhook.ts";
import { seededRandom } from "../../support/seeded-random.ts";

const SECRET = "webhook-secret";
let secretDir = "";
beforeAll(async () => {
  secretDir = await mkdtemp(join(tmpdir(), "knative-fleet-webhook-"));
  await writeFile(join(secretDir, "secret"), `${SECRET}\n`);
  await writeFile(join(secretDir, "empty"), "\n");
});
afterAll(() => rm(secretDir, { recursive: true, force: true }));

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** The service's webhook listener as `run` builds it: serveRoutes + the handler, on 127.0.0.1. */
async function webhookServer(overrides: Partial<WebhookOptions> = {}) {
  const pushes: string[] = [];
  const errors: unknown[] = [];
  const handle = createWebhookHandler({
    secret: { file: join(secretDir, "secret") },
    branch: "main",
    filter: createFileFilter(DEFAULT_FILE_SELECTION),
    onPush: (push) => pushes.push(push.ref),
    onError: (error) => errors.push(error),
    ...overrides,
  });
  const server = await serveRoutes({
    port: 0,
    host: "127.0.0.1",
    routes: new Map([["/webhook", { methods: new Set(["POST"]), handle }]]),
    log: silentLogger,
  });
  closers.push(() => server.close());
  return { port: server.port, url: `http://127.0.0.1:${server.port}/webhook`, pushes, errors };
}

const sign = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
const push = (delivery?: string) => {
  const body = JSON.stringify({ ref: "refs/heads/main", commits: [] });
  return {
    body,
    headers: {
      "content-type": "application/json",
      "x-github-event": "push",
      "x-hub-signature-256": sign(body),
      ...(delivery && { "x-github-delivery": delivery }),
    },
  };
};

/**
 * Sends raw bytes and keeps the socket open, as a slow or hostile client would; resolves with what came
 * back once the server closes or `idleMs` passes.
 */
function raw(
  port: number,
  bytes: Buffer | string,
  idleMs = 1500,
  localAddress = "127.0.0.1",
): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1", localAddress });
    let received = "";
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(received);
    };
    let timer = setTimeout(done, idleMs);
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      clearTimeout(timer);
      timer = setTimeout(done, 20); // the answer is in; wait briefly for the rest of it
    });
    socket.on("error", done);
    socket.on("close", done);
    socket.write(bytes);
  });
}

/**
 * A hostile sender's slow delivery: headers with a made-up signature, then one byte of the body every
 * `everyMs` from `localAddress`, until the server answers or closes; resolves with the status it got.
 */
function trickle(port: number, localAddress: string, everyMs = 200): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1", localAddress });
    let received = "";
    const done = () => {
      clearInterval(drip);
      socket.destroy();
      resolve(/^HTTP\/1\.1 (\d{3}) /.exec(received)?.[1] ?? "none");
    };
    const drip = setInterval(() => socket.write("{"), everyMs);
    socket.on("data", (chunk) => {
      received += chunk.toString("latin1");
      done();
    });
    socket.on("error", done);
    socket.on("close", done);
    socket.write(
      "POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\n" +
        `X-Hub-Signature-256: sha256=${"0".repeat(64)}\r\nContent-Length: 100000\r\n\r\n`,
    );
  });
}

/** A genuine signed delivery sent from `localAddress` (any of 127.0.0.0/8 reaches a 127.0.0.1 listener). */
function deliverFrom(port: number, localAddress: string): Promise<number> {
  const { body, headers } = push();
  return new Promise((resolve, reject) => {
    const req = request(
      { port, host: "127.0.0.1", localAddress, path: "/webhook", method: "POST", headers, agent: false },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("the webhook listener", () => {
  it("answers `POST //[` and malformed request targets, and keeps serving", async () => {
    const { port, url } = await webhookServer();
    for (const target of ["//[", "http://[", "//%zz", "/webhook/../..", "*"]) {
      expect(await raw(port, `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`)).toMatch(
        /^HTTP\/1\.1 4\d\d /,
      );
    }
    const { body, headers } = push();
    expect((await fetch(url, { method: "POST", body, headers })).status).toBe(202);
  });

  it("refuses on headers alone, before reading a body: no provider, no signature, a wrong GitLab token", async () => {
    const { port } = await webhookServer();
    // The body is announced but never sent: an answer can only come from the headers.
    const headersOnly = (headers: string) =>
      raw(port, `POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n${headers}\r\n`);
    expect(await headersOnly("")).toMatch(/^HTTP\/1\.1 401 /);
    expect(await headersOnly("X-GitHub-Event: push\r\n")).toMatch(/^HTTP\/1\.1 401 /);
    expect(await headersOnly("X-Gitlab-Event: Push Hook\r\nX-Gitlab-Token: wrong\r\n")).toMatch(
      /^HTTP\/1\.1 403 /,
    );
    expect(
      await headersOnly("X-GitHub-Event: push\r\nX-Hub-Signature-256: x\r\nContent-Length: 5000000\r\n"),
    ).toMatch(/^HTTP\/1\.1 (400|413) /);
  });

  it("buffers a bounded number of bodies at once and times out slow ones", async () => {
    const { port, url } = await webhookServer({ maxConcurrentBodies: 2, bodyTimeoutMs: 300 });
    const slow =
      "POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: x\r\nContent-Length: 100\r\n\r\n{";
    // From three addresses, so the per-address share (2 by default) is not what refuses the third.
    const answers = await Promise.all(
      ["127.0.0.1", "127.0.0.2", "127.0.0.3"].map((from) => raw(port, slow, 2000, from)),
    );
    const statuses = answers.map((answer) => answer.slice(9, 12)).sort();
    expect(statuses).toEqual(["408", "408", "503"]);
    const { body, headers } = push();
    expect((await fetch(url, { method: "POST", body, headers })).status).toBe(202);
  });

  it("serves a genuine delivery from another address while one address floods it with slow bodies", async () => {
    // The attack of issue #43: ten slow connections with a made-up signature, each trickling its body,
    // took every body slot, and a genuine delivery got 503. With the defaults, one address holds at most
    // its share of the slots and a slow body is cut off well before GitHub's own 10 s delivery timeout.
    const { port, pushes } = await webhookServer();
    const floodStarted = Date.now();
    const flood = Array.from({ length: 10 }, () => trickle(port, "127.0.0.1"));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    expect(await deliverFrom(port, "127.0.0.2")).toBe(202);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(pushes).toEqual(["refs/heads/main"]);
    const statuses = (await Promise.all(flood)).sort();
    // Two held their slot until the body deadline (408), the rest were refused at once (429).
    expect(statuses).toEqual(["408", "408", ...Array(8).fill("429")]);
    expect(Date.now() - floodStarted).toBeLessThan(5000);
    // The flooding address got its slots back: its own genuine delivery is served now.
    expect(await deliverFrom(port, "127.0.0.1")).toBe(202);
  }, 15_000);

  it("a standby checks a delivery as the leader does: a forged one is refused, a good one is left to the leader", async () => {
    // Found by the soak's webhook flood: a standby answered 202 to every delivery, forged ones too, so a
    // sender with a wrong secret saw success whenever the Service picked a standby.
    let leading = false;
    const { url, pushes } = await webhookServer({ standby: () => (leading ? undefined : "not the leader") });
    const good = push();
    const forged = {
      ...good,
      headers: { ...good.headers, "x-hub-signature-256": `sha256=${"0".repeat(64)}` },
    };
    const answer = async (delivery: { body: string; headers: Record<string, string> }) => {
      const res = await fetch(url, { method: "POST", body: delivery.body, headers: delivery.headers });
      return [res.status, await res.json()];
    };
    expect(await answer(forged)).toEqual([403, { error: "bad signature" }]);
    expect(await answer(good)).toEqual([202, { sync: "left to the leader", reason: "not the leader" }]);
    expect(pushes).toEqual([]);
    leading = true;
    expect(await answer(forged)).toEqual([403, { error: "bad signature" }]);
    expect(await answer(good)).toEqual([202, { sync: "triggered" }]);
    expect(pushes).toEqual(["refs/heads/main"]);
  });

  it("ignores a repeated delivery id within the window", async () => {
    const { url, pushes } = await webhookServer();
    const first = push("72d3162e-cc78-11e3-81ab-4c9367dc0958");
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(url, { method: "POST", body: first.body, headers: first.headers });
      statuses.push([res.status, await res.text()]);
    }
    expect(statuses.map(([status]) => status)).toEqual([202, 200, 200]);
    expect(String(statuses[1]![1])).toContain("repeated delivery");
    expect(pushes).toEqual(["refs/heads/main"]);
  });

  it("refuses an empty secret at start, and answers without naming the file when it turns empty", async () => {
    await expect(checkWebhookSecret({ file: join(secretDir, "empty") })).rejects.toThrow(/empty/);
    await expect(checkWebhookSecret({ file: join(secretDir, "missing") })).rejects.toThrow(/cannot be read/);
    await expect(checkWebhookSecret({ file: join(secretDir, "secret") })).resolves.toBeUndefined();
    for (const file of ["empty", "missing"]) {
      const { url, errors } = await webhookServer({ secret: { file: join(secretDir, file) } });
      const emptyKeySigned = JSON.stringify({ ref: "refs/heads/main" });
      const res = await fetch(url, {
        method: "POST",
        body: emptyKeySigned,
        headers: {
          "x-github-event": "push",
          "x-hub-signature-256": `sha256=${createHmac("sha256", "").update(emptyKeySigned).digest("hex")}`,
        },
      });
      const text = await res.text();
      expect(res.status).toBe(503);
      expect(text).not.toContain(secretDir);
      expect(errors).toHaveLength(1);
    }
  });
});

describe("webhook fuzzing", () => {
  it("answers every malformed request over a raw socket, and the process keeps serving", async () => {
    const { port, url } = await webhookServer({ bodyTimeoutMs: 500 });
    const next = seededRandom(11);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
    const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)));
    // Mostly well-formed request lines, so most cases reach the webhook handler itself.
    const methods = [
      "POST",
      "POST",
      "POST",
      "POST",
      "POST",
      "GET",
      "PUT",
      "post",
      "",
      "P\0ST",
      "POST POST",
      "\u00ff",
    ];
    const targets = [
      "/webhook",
      "//[",
      "/webhook?x=%",
      "http://[::1",
      "/%00",
      "",
      "*",
      `/${"a".repeat(9000)}`,
    ];
    const headerSets = [
      "X-GitHub-Event: push\r\nX-Hub-Signature-256: sha256=00\r\n",
      "X-GitHub-Event: push\r\nX-Hub-Signature-256: sha256=00\r\nX-GitHub-Delivery: 1\r\n",
      "X-GitHub-Event: ping\r\nX-Hub-Signature-256: sha256=00\r\n",
      "X-Gitlab-Event: Push Hook\r\nX-Gitlab-Token: webhook-secret\r\n",
      "X-Gitlab-Event: Push Hook\r\nX-Gitlab-Token: webhook-secret\r\nContent-Type: application/json\r\n",
      "X-Gitlab-Event: Push Hook\r\nX-Gitlab-Token: \r\n",
      "X-GitHub-Event: push\r\nX-GitHub-Event: ping\r\nX-Hub-Signature-256: a\r\nX-Hub-Signature-256: b\r\n",
      "Content-Length: -1\r\n",
      "Content-Length: 1e3\r\n",
      "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
      `X-Long: ${"b".repeat(20_000)}\r\n`,
      "Bad Header\r\n",
      "X-GitHub-Event: push\r\nX-Hub-Signature-256: x\r\nContent-Type: application/x-www-form-urlencoded\r\n",
    ];
    const bodies = () =>
      pick(["", "{", '{"ref":1}', "payload=%7B", bytes(Math.floor(next() * 4000)).toString("latin1")]);
    const CASES = 500;
    const statuses = new Map<string, number>();
    const requests: Buffer[] = [];
    for (let i = 0; i < CASES; i++) {
      const body = bodies();
      // Random bytes end with a blank line, so the server has a whole (garbage) header block to refuse.
      const request =
        next() < 0.15
          ? Buffer.concat([bytes(1 + Math.floor(next() * 300)), Buffer.from("\r\n\r\n")])
          : Buffer.from(
              `${pick(methods)} ${pick(targets)} HTTP/1.1\r\nHost: x\r\n${pick(headerSets)}${
                next() < 0.85 ? `Content-Length: ${body.length}\r\n` : ""
              }\r\n${body}`,
              "latin1",
            );
      requests.push(request);
    }
    // Ten clients at a time from one address, whole requests: read at once, they rarely fill its share.
    for (let i = 0; i < requests.length; i += 10) {
      const answers = await Promise.all(requests.slice(i, i + 10).map((request) => raw(port, request, 3000)));
      for (const answer of answers) {
        const status = /^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1] ?? "none";
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }
    const { body, headers } = push();
    expect((await fetch(url, { method: "POST", body, headers })).status).toBe(202);
    const summary = [...statuses]
      .sort()
      .map(([status, count]) => `${status}: ${count}`)
      .join(", ");
    console.log(`webhook fuzz: ${CASES} malformed requests, answers by status: ${summary}`);
    expect(statuses.get("none") ?? 0).toBe(0);
    expect(statuses.get("500") ?? 0).toBe(0);
  }, 60_000);
});
