import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { FleetFileFilter } from "../fleet/select.ts";
import { readSecret } from "./secrets.ts";
import type { SecretRef } from "./spec.ts";

export type WebhookProvider = "github" | "gitlab";

export interface PushEvent {
  provider: WebhookProvider;
  ref: string;
  /** The pushed head, when the payload names it. */
  after: string | undefined;
}

export interface WebhookOptions {
  /** GitHub's webhook secret or GitLab's secret token, read on every request (rotation needs no restart). */
  secret: SecretRef;
  /** The source branch: pushes to other branches are ignored. */
  branch: string;
  /** The source's file filter: a push that changes no fleet file (a status commit) is ignored. */
  filter: FleetFileFilter;
  /** Called for a push that may change the fleet; typically `poller.syncNow()`. */
  onPush: (push: PushEvent) => void;
  /** Larger payloads get 413. Default 1 MiB (GitHub caps its payloads at 25 MB, pushes are far smaller). */
  maxBodyBytes?: number;
}

/** GitHub's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, compared in constant time. */
export function verifyGitHubSignature(body: Buffer, header: string, secret: string): boolean {
  const expected = Buffer.from(`sha256=${createHmac("sha256", secret).update(body).digest("hex")}`);
  const given = Buffer.from(header);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** GitLab's `X-Gitlab-Token`, compared through digests so that neither content nor length leaks. */
export function verifyGitLabToken(header: string, secret: string): boolean {
  const digest = (value: string) => createHash("sha256").update(value).digest();
  return timingSafeEqual(digest(header), digest(secret));
}

const changedFilesSchema = z.object({
  added: z.array(z.string()).default([]),
  removed: z.array(z.string()).default([]),
  modified: z.array(z.string()).default([]),
});

/** The fields of a GitHub or GitLab push payload that decide whether to sync. */
const pushPayloadSchema = z.object({
  ref: z.string(),
  after: z.string().optional(),
  /** GitHub: history was rewritten, so the listed commits do not tell what changed. */
  forced: z.boolean().optional(),
  /** GitLab lists at most 20 commits, GitHub at most 2048; more were pushed when the count says so. */
  total_commits_count: z.number().optional(),
  commits: z.array(changedFilesSchema).default([]),
});

export type PushPayload = z.infer<typeof pushPayloadSchema>;

export type PushDecision = { sync: true } | { sync: false; reason: string };

const githubMaxListedCommits = 2048;

/**
 * Whether a push may have changed the fleet. It says no only when it can tell: a push to another branch,
 * or one whose listed commits are complete and change no fleet file (the bot's status commits). The
 * poller remains the source of truth; the webhook only makes a sync come sooner.
 */
export function decidePush(payload: PushPayload, branch: string, filter: FleetFileFilter): PushDecision {
  if (payload.ref !== `refs/heads/${branch}`) return { sync: false, reason: `push to ${payload.ref}` };
  const listed = payload.commits.length;
  const complete =
    listed > 0 &&
    payload.forced !== true &&
    listed < githubMaxListedCommits &&
    (payload.total_commits_count === undefined || payload.total_commits_count <= listed);
  if (!complete) return { sync: true };
  const changed = payload.commits.flatMap((commit) => [
    ...commit.added,
    ...commit.removed,
    ...commit.modified,
  ]);
  return changed.some((path) => filter.matches(path))
    ? { sync: true }
    : { sync: false, reason: "no fleet file changed" };
}

/**
 * A node:http handler for GitHub and GitLab push webhooks, mountable on any route of the service's server.
 * Answers: 202 sync triggered, 200 ignored (with the reason), 400 bad payload, 401 no signature or token,
 * 403 wrong signature or token, 405 not a POST, 413 payload too large.
 */
export function createWebhookHandler(
  options: WebhookOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  return (req, res) => {
    handleWebhook(req, res, options, maxBodyBytes).catch((error: unknown) => {
      if (!res.headersSent) respond(res, 500, { error: `webhook failed: ${error}` });
    });
  };
}

async function handleWebhook(
  req: IncomingMessage,
  res: ServerResponse,
  options: WebhookOptions,
  maxBodyBytes: number,
): Promise<void> {
  if (req.method !== "POST") {
    res.setHeader("allow", "POST");
    return respond(res, 405, { error: "only POST" });
  }
  const body = await readBody(req, maxBodyBytes);
  if (!body) {
    res.setHeader("connection", "close"); // stop the sender rather than drain what is left of the body
    return respond(res, 413, { error: `payload over ${maxBodyBytes} bytes` });
  }

  const secret = await readSecret(options.secret);
  const header = (name: string) => req.headers[name] as string | undefined;
  const github = header("x-github-event");
  const gitlab = header("x-gitlab-event");
  let provider: WebhookProvider;
  let event: string;
  if (github !== undefined) {
    const signature = header("x-hub-signature-256");
    if (!signature) return respond(res, 401, { error: "missing X-Hub-Signature-256" });
    if (!verifyGitHubSignature(body, signature, secret)) return respond(res, 403, { error: "bad signature" });
    [provider, event] = ["github", github];
  } else if (gitlab !== undefined) {
    const token = header("x-gitlab-token");
    if (!token) return respond(res, 401, { error: "missing X-Gitlab-Token" });
    if (!verifyGitLabToken(token, secret)) return respond(res, 403, { error: "bad token" });
    [provider, event] = ["gitlab", gitlab];
  } else {
    return respond(res, 401, { error: "not a GitHub or GitLab webhook" });
  }
  if (event === "ping") return respond(res, 200, { ignored: "ping" });
  if (event !== "push" && event !== "Push Hook") return respond(res, 200, { ignored: `${event} event` });

  const payload = pushPayloadSchema.safeParse(parseJson(body, req.headers["content-type"]));
  if (!payload.success) return respond(res, 400, { error: "not a push payload" });
  const decision = decidePush(payload.data, options.branch, options.filter);
  if (!decision.sync) return respond(res, 200, { ignored: decision.reason });
  options.onPush({ provider, ref: payload.data.ref, after: payload.data.after });
  respond(res, 202, { sync: "triggered" });
}

/**
 * The body, or undefined once it exceeds the limit (declared or streamed). Reading stops there without
 * destroying the request, so the 413 still reaches the sender.
 */
function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      req.off("data", onData).pause();
      resolve(undefined);
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
  });
}

/** GitHub can send the payload as JSON or as the `payload` field of a form. */
function parseJson(body: Buffer, contentType: string | undefined): unknown {
  try {
    const text = body.toString("utf8");
    const json = contentType?.startsWith("application/x-www-form-urlencoded")
      ? new URLSearchParams(text).get("payload")
      : text;
    return JSON.parse(json ?? "");
  } catch {
    return undefined;
  }
}

function respond(res: ServerResponse, status: number, body: Record<string, string>): void {
  res.writeHead(status, { "content-type": "application/json" }).end(`${JSON.stringify(body)}\n`);
}
