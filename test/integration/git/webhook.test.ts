import { createHmac } from "node:crypto";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { createFileFilter, DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import type { Snapshot } from "../../../src/source/git-source.ts";
import { Poller } from "../../../src/source/poller.ts";
import { createWebhookHandler, type PushEvent, type WebhookOptions } from "../../../src/source/webhook.ts";
import { bot, fastBackoff, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

const secret = "webhook-secret";
beforeAll(() => {
  process.env.KNATIVE_FLEET_TEST_WEBHOOK_SECRET = secret;
});
afterAll(() => {
  delete process.env.KNATIVE_FLEET_TEST_WEBHOOK_SECRET;
});

/** Serves the webhook handler on a loopback port for this test; returns its URL. */
async function webhookForTest(overrides: Partial<WebhookOptions> = {}) {
  const pushes: PushEvent[] = [];
  const handler = createWebhookHandler({
    secret: { env: "KNATIVE_FLEET_TEST_WEBHOOK_SECRET" },
    branch: "main",
    filter: createFileFilter(DEFAULT_FILE_SELECTION),
    onPush: (push) => pushes.push(push),
    ...overrides,
  });
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/git`, pushes };
}

const sign = (body: string, key = secret) => `sha256=${createHmac("sha256", key).update(body).digest("hex")}`;

function githubPush(files: string[], ref = "refs/heads/main") {
  return JSON.stringify({
    ref,
    after: "f".repeat(40),
    commits: [{ added: [], removed: [], modified: files }],
  });
}

async function post(url: string, body: string, headers: Record<string, string>) {
  const res = await fetch(url, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

describe("webhook handler", () => {
  it("triggers a sync for a signed GitHub push that changes the fleet", async () => {
    const { url, pushes } = await webhookForTest();
    const body = githubPush(["clusters/prod.yaml"]);
    const res = await post(url, body, { "x-github-event": "push", "x-hub-signature-256": sign(body) });
    expect(res).toEqual({ status: 202, body: { sync: "triggered" } });
    expect(pushes).toEqual([{ provider: "github", ref: "refs/heads/main", after: "f".repeat(40) }]);
  });

  it("accepts GitHub's form-encoded payloads", async () => {
    const { url, pushes } = await webhookForTest();
    const body = new URLSearchParams({ payload: githubPush(["clusters/prod.yaml"]) }).toString();
    const res = await post(url, body, {
      "content-type": "application/x-www-form-urlencoded",
      "x-github-event": "push",
      "x-hub-signature-256": sign(body),
    });
    expect(res.status).toBe(202);
    expect(pushes).toHaveLength(1);
  });

  it("triggers a sync for a GitLab push with the right token", async () => {
    const { url, pushes } = await webhookForTest();
    const body = JSON.stringify({
      ref: "refs/heads/main",
      after: "e".repeat(40),
      total_commits_count: 1,
      commits: [{ added: ["clusters/new.yaml"], modified: [], removed: [] }],
    });
    const res = await post(url, body, { "x-gitlab-event": "Push Hook", "x-gitlab-token": secret });
    expect(res.status).toBe(202);
    expect(pushes).toEqual([{ provider: "gitlab", ref: "refs/heads/main", after: "e".repeat(40) }]);
  });

  it("refuses unknown senders, missing and wrong signatures or tokens", async () => {
    const { url, pushes } = await webhookForTest();
    const body = githubPush(["clusters/prod.yaml"]);
    const cases: [Record<string, string>, number][] = [
      [{}, 401],
      [{ "x-github-event": "push" }, 401],
      [{ "x-github-event": "push", "x-hub-signature-256": sign(body, "guessed") }, 403],
      [{ "x-github-event": "push", "x-hub-signature-256": sign(`${body} `) }, 403],
      [{ "x-gitlab-event": "Push Hook" }, 401],
      [{ "x-gitlab-event": "Push Hook", "x-gitlab-token": "guessed" }, 403],
    ];
    for (const [headers, status] of cases) expect((await post(url, body, headers)).status).toBe(status);
    expect(pushes).toEqual([]);
  });

  it("ignores pushes to other branches, other events, and pings", async () => {
    const { url, pushes } = await webhookForTest();
    const other = githubPush(["clusters/prod.yaml"], "refs/heads/dev");
    expect(await post(url, other, { "x-github-event": "push", "x-hub-signature-256": sign(other) })).toEqual({
      status: 200,
      body: { ignored: "push to refs/heads/dev" },
    });
    const ping = JSON.stringify({ zen: "Keep it logically awesome." });
    expect(
      (await post(url, ping, { "x-github-event": "ping", "x-hub-signature-256": sign(ping) })).status,
    ).toBe(200);
    const issue = JSON.stringify({ action: "opened" });
    expect(
      (await post(url, issue, { "x-github-event": "issues", "x-hub-signature-256": sign(issue) })).body,
    ).toEqual({
      ignored: "issues event",
    });
    expect(pushes).toEqual([]);
  });

  it("answers 400 to a signed body that is not a push payload, 405 to anything but POST", async () => {
    const { url } = await webhookForTest();
    const junk = "{not json";
    expect(
      (await post(url, junk, { "x-github-event": "push", "x-hub-signature-256": sign(junk) })).status,
    ).toBe(400);
    const res = await fetch(url);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("answers 413 to payloads over the limit, declared or streamed", async () => {
    const { url, pushes } = await webhookForTest({ maxBodyBytes: 1024 });
    const big = githubPush(Array.from({ length: 100 }, (_, i) => `clusters/c${i}.yaml`));
    expect(big.length).toBeGreaterThan(1024);
    expect(
      (await post(url, big, { "x-github-event": "push", "x-hub-signature-256": sign(big) })).status,
    ).toBe(413);

    // Chunked, so no Content-Length announces the size: the limit applies while reading.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        url,
        { method: "POST", headers: { "x-github-event": "push", "x-hub-signature-256": sign(big) } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.write(big.slice(0, 800));
      setTimeout(() => req.end(big.slice(800)), 50);
    });
    expect(status).toBe(413);
    expect(pushes).toEqual([]);
  });
});

describe("webhook to poller, against a real repository", () => {
  it("syncs at once on a person's push, and not on the bot's status commit", async () => {
    const git = await gitServerForTest();
    await git.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(git.url("fleet"));
    const snapshots: Snapshot[] = [];
    const poller = new Poller({
      source,
      backoff: fastBackoff,
      onSnapshot: (snapshot) => {
        snapshots.push(snapshot);
      },
      onError: (error) => {
        throw error;
      },
    });
    await poller.syncNow();
    const syncNow = vi.spyOn(poller, "syncNow");
    const { url } = await webhookForTest({ filter: source.filter, onPush: () => void poller.syncNow() });

    // The bot's status commit, announced as GitHub would: it touches only status/.
    await source.commitAndPush({
      files: new Map([["status/prod.yaml", "ready: false\n"]]),
      message: "s",
      author: bot,
    });
    const statusPush = githubPush(["status/prod.yaml"]);
    expect(
      await post(url, statusPush, { "x-github-event": "push", "x-hub-signature-256": sign(statusPush) }),
    ).toEqual({ status: 200, body: { ignored: "no fleet file changed" } });
    expect(syncNow).not.toHaveBeenCalled();

    const pushed = await git.pushChange("fleet", {
      files: { "clusters/prod.yaml": "name: prod\n" },
      message: "p",
    });
    const personPush = githubPush(["clusters/prod.yaml"]);
    expect(
      (await post(url, personPush, { "x-github-event": "push", "x-hub-signature-256": sign(personPush) }))
        .status,
    ).toBe(202);
    // A fetch of the new commit: a second on a loaded CI runner can be too short (seen beside a mutation run).
    await vi.waitFor(() => expect(snapshots.at(-1)?.commit).toBe(pushed), { timeout: 15_000 });
    expect(syncNow).toHaveBeenCalledTimes(1);
  });
});
