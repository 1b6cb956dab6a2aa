import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { FleetFileFilter } from "../fleet/select.ts";
import { readSecret } from "./secrets.ts";
import type { SecretRef } from "./spec.ts";

type WebhookProvider = "github" | "gitlab";

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
  /**
   * While this gives a reason (a replica that is not the leader), a delivery is checked as always and a push
   * is answered 202 with the reason instead of calling onPush: a wrong secret is refused by every replica.
   */
  standby?: () => string | undefined;
  /** Larger payloads get 413. Default 1 MiB (GitHub caps its payloads at 25 MB, pushes are far smaller). */
  maxBodyBytes?: number;
  /** Bodies buffered at once; more get 503 with Retry-After. Default 8 (8 MiB at most with the default size). */
  maxConcurrentBodies?: number;
  /**
   * Bodies buffered at once from one remote address; more get 429 with Retry-After. Default 2, so slow
   * senders at one address cannot take the slots a genuine delivery from elsewhere needs.
   */
  maxBodiesPerSource?: number;
  /**
   * How long a body may take to arrive after the headers; slower ones get 408. Default 3 s: GitHub and
   * GitLab send a whole payload at once, so only a slow (or hostile) sender needs longer.
   */
  bodyTimeoutMs?: number;
  /** How long a delivery id is remembered: the same id again within it is ignored. Default 1 h. */
  replayWindowMs?: number;
  /** Gets a failure the sender is not told about (an unreadable or empty secret), for the log. */
  onError?: (error: unknown) => void;
}

/**
 * Refuses a webhook secret that cannot be read or is empty: with an empty key anyone can sign a delivery.
 * The service checks it at start; the handler checks again on every request, as the Secret may rotate.
 */
export async function checkWebhookSecret(ref: SecretRef): Promise<void> {
  let secret: string;
  try {
    secret = await readSecret(ref);
  } catch (error) {
    throw new Error(`the webhook secret cannot be read: ${(error as Error).message}`);
  }
  if (secret === "")
    throw new Error("the webhook secret is empty: anyone could sign a delivery with an empty key");
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

type PushDecision = { sync: true } | { sync: false; reason: string };

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

/** What a webhook handler keeps between requests. */
interface HandlerState {
  options: WebhookOptions;
  maxBodyBytes: number;
  maxConcurrentBodies: number;
  maxBodiesPerSource: number;
  bodyTimeoutMs: number;
  /** Bodies being read right now: each may hold up to maxBodyBytes. */
  readingBodies: number;
  /** Bodies being read right now by remote address; an address is gone once its count is 0. */
  readingBySource: Map<string, number>;
  deliveries: DeliveryLog;
}

/**
 * A node:http handler for GitHub and GitLab push webhooks, mountable on any route of the service's server.
 * Answers: 202 sync triggered (or left to the leader), 200 ignored (with the reason), 400 bad payload, 401 no signature or token,
 * 403 wrong signature or token, 405 not a POST, 408 body too slow, 413 payload too large, 429 too many
 * bodies in flight from the sender's address, 503 too many bodies in flight or the secret unavailable.
 * What headers can refuse is refused before any body is read, and at most maxConcurrentBodies bodies are
 * buffered at once, so memory stays bounded whoever connects. A GitHub signature can only be checked
 * once the body is in, so a slot is held by anyone who sends headers: the per-address share and the short
 * body deadline keep slow senders at one address from starving everyone else.
 */
export function createWebhookHandler(
  options: WebhookOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const state: HandlerState = {
    options,
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
    maxConcurrentBodies: options.maxConcurrentBodies ?? 8,
    maxBodiesPerSource: options.maxBodiesPerSource ?? 2,
    bodyTimeoutMs: options.bodyTimeoutMs ?? 3_000,
    readingBodies: 0,
    readingBySource: new Map(),
    deliveries: new DeliveryLog(options.replayWindowMs ?? 60 * 60_000),
  };
  return (req, res) => {
    handleWebhook(req, res, state).catch((error: unknown) => {
      // The log gets the reason; the sender, who may be anyone, learns nothing about files or secrets.
      options.onError?.(error);
      if (!res.headersSent) {
        res.setHeader("connection", "close");
        respond(res, 503, { error: "webhook unavailable" });
      }
    });
  };
}

async function handleWebhook(req: IncomingMessage, res: ServerResponse, state: HandlerState): Promise<void> {
  const { options } = state;
  if (req.method !== "POST") {
    res.setHeader("allow", "POST");
    return refuse(req, res, 405, "only POST");
  }
  const header = (name: string) => {
    const value = req.headers[name];
    return typeof value === "string" ? value : undefined;
  };
  const github = header("x-github-event");
  const gitlab = header("x-gitlab-event");
  const provider: WebhookProvider | undefined =
    github !== undefined ? "github" : gitlab !== undefined ? "gitlab" : undefined;
  if (provider === undefined) return refuse(req, res, 401, "not a GitHub or GitLab webhook");
  const credential = provider === "github" ? header("x-hub-signature-256") : header("x-gitlab-token");
  if (!credential) {
    return refuse(
      req,
      res,
      401,
      `missing ${provider === "github" ? "X-Hub-Signature-256" : "X-Gitlab-Token"}`,
    );
  }
  const declaredLength = Number(header("content-length") ?? 0);
  if (!(declaredLength <= state.maxBodyBytes)) {
    return refuse(req, res, 413, `payload over ${state.maxBodyBytes} bytes`);
  }
  const secret = await readSecret(options.secret);
  if (secret === "") throw new Error("the webhook secret is empty");
  // GitLab's token is a header: a wrong one is refused before a byte of the body is read.
  if (provider === "gitlab" && !verifyGitLabToken(credential, secret))
    return refuse(req, res, 403, "bad token");
  const body = await readBodyInSlot(req, res, state);
  if (body === "refused") return;
  if (body === "too-large") return refuse(req, res, 413, `payload over ${state.maxBodyBytes} bytes`);
  if (body === "too-slow")
    return refuse(req, res, 408, `payload not received within ${state.bodyTimeoutMs} ms`);
  if (provider === "github" && !verifyGitHubSignature(body, credential, secret)) {
    return respond(res, 403, { error: "bad signature" });
  }

  const event = (provider === "github" ? github : gitlab) ?? "";
  if (event === "ping") return respond(res, 200, { ignored: "ping" });
  if (event !== "push" && event !== "Push Hook") return respond(res, 200, { ignored: `${event} event` });

  const payload = pushPayloadSchema.safeParse(parseJson(body, req.headers["content-type"]));
  if (!payload.success) return respond(res, 400, { error: "not a push payload" });
  // A replayed delivery would only cause a sync, which is idempotent; refusing it still keeps a captured
  // request from being used to make the service fetch over and over.
  const delivery =
    header("x-github-delivery") ?? header("x-gitlab-event-uuid") ?? header("x-gitlab-webhook-uuid");
  if (delivery !== undefined && !state.deliveries.firstTime(`${provider}/${delivery}`)) {
    return respond(res, 200, { ignored: "repeated delivery" });
  }
  const decision = decidePush(payload.data, options.branch, options.filter);
  if (!decision.sync) return respond(res, 200, { ignored: decision.reason });
  const standby = options.standby?.();
  if (standby !== undefined) return respond(res, 202, { sync: "left to the leader", reason: standby });
  options.onPush({ provider, ref: payload.data.ref, after: payload.data.after });
  respond(res, 202, { sync: "triggered" });
}

/**
 * The body, read in one of the bounded slots (per sender address and in all), or "refused" when none is
 * free (already answered): a slow sender holds its own slots, never everyone's.
 */
async function readBodyInSlot(
  req: IncomingMessage,
  res: ServerResponse,
  state: HandlerState,
): Promise<Buffer | "too-large" | "too-slow" | "refused"> {
  const source = sourceAddress(req);
  const fromSource = state.readingBySource.get(source) ?? 0;
  if (fromSource >= state.maxBodiesPerSource) {
    res.setHeader("retry-after", "1");
    refuse(req, res, 429, "too many webhook deliveries at once from this address");
    return "refused";
  }
  if (state.readingBodies >= state.maxConcurrentBodies) {
    res.setHeader("retry-after", "1");
    refuse(req, res, 503, "too many webhook deliveries at once");
    return "refused";
  }
  state.readingBodies++;
  state.readingBySource.set(source, fromSource + 1);
  try {
    return await readBody(req, state.maxBodyBytes, state.bodyTimeoutMs);
  } finally {
    state.readingBodies--;
    const left = (state.readingBySource.get(source) ?? 1) - 1;
    if (left > 0) state.readingBySource.set(source, left);
    else state.readingBySource.delete(source);
  }
}

/**
 * The sender's address as the socket sees it (an IPv4 client of a dual-stack listener as plain IPv4).
 * Behind an Ingress or proxy every delivery shares the proxy's address; forwarded headers are not used,
 * as anyone can write them.
 */
function sourceAddress(req: IncomingMessage): string {
  const address = req.socket.remoteAddress ?? "unknown";
  return address.startsWith("::ffff:") ? address.slice("::ffff:".length) : address;
}

/** An answer before (or instead of) reading the body: the connection closes rather than drain it. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, error: string): void {
  res.setHeader("connection", "close");
  respond(res, status, { error });
  req.pause();
}

/** Delivery ids seen within the window, oldest first; bounded, so a flood of ids costs a fixed amount. */
class DeliveryLog {
  static readonly MAX_ENTRIES = 10_000;
  readonly #windowMs: number;
  readonly #seen = new Map<string, number>();

  constructor(windowMs: number) {
    this.#windowMs = windowMs;
  }

  /** False when the id was seen within the window; records it either way. */
  firstTime(id: string, now = Date.now()): boolean {
    for (const [oldest, at] of this.#seen) {
      if (now - at < this.#windowMs && this.#seen.size < DeliveryLog.MAX_ENTRIES) break;
      this.#seen.delete(oldest);
    }
    const seenAt = this.#seen.get(id);
    if (seenAt !== undefined && now - seenAt < this.#windowMs) return false;
    this.#seen.set(id, now);
    return true;
  }
}

/**
 * The body, or why not: over the limit (declared or streamed), or not complete within the timeout.
 * Reading stops there without destroying the request, so the answer still reaches the sender.
 */
function readBody(
  req: IncomingMessage,
  maxBytes: number,
  timeoutMs: number,
): Promise<Buffer | "too-large" | "too-slow"> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: Buffer | "too-large" | "too-slow") => {
      clearTimeout(timer);
      req.off("data", onData);
      if (typeof result === "string") req.pause();
      resolve(result);
    };
    const timer = setTimeout(() => finish("too-slow"), timeoutMs);
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else finish("too-large");
    };
    req.on("data", onData);
    req.once("end", () => finish(Buffer.concat(chunks)));
    req.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
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
