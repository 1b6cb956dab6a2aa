import { createHmac } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
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
function raw(port: number, bytes: Buffer | string, idleMs = 1500): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
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
    const answers = await Promise.all([raw(port, slow, 2000), raw(port, slow, 2000), raw(port, slow, 2000)]);
    const statuses = answers.map((answer) => answer.slice(9, 12)).sort();
    expect(statuses).toEqual(["408", "408", "503"]);
    const { body, headers } = push();
    expect((await fetch(url, { method: "POST", body, headers })).status).toBe(202);
  });

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
    // Ten clients at a time, under the concurrent-body cap's default of eight: some wait for a slot.
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
