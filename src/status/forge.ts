import { request } from "undici";
import { z } from "zod";
import { isRecord } from "../kube/object.ts";
import { describeError, readLimited } from "../verify/prometheus.ts";
import { COMMIT_STATUS_PREFIX, type CommitState, type CommitStatus } from "./commit-status.ts";

// The Git host's commit status API, for GitHub, Gitea (the same shape, its own word for a few states) and
// GitLab: the statuses a commit has, and one more posted. The token goes in a header and nowhere else.
// A host that limits the rate says until when (Retry-After, or the reset time of GitHub's and Gitea's
// X-RateLimit headers): the writer waits that long rather than spend the budget on refusals.

export const ForgeProviderSchema = z.enum(["github", "gitea", "gitlab"]);
type ForgeProvider = z.infer<typeof ForgeProviderSchema>;

export interface ForgeSpec {
  provider: ForgeProvider;
  /** The API's base: `https://api.github.com`, `https://gitea.example/api/v1`, `https://gitlab.example/api/v4`. */
  apiUrl: string;
  /** `owner/name` (GitLab: the project's full path). */
  repository: string;
  /** Read on every request (a mounted Secret may be rotated). */
  token(): string;
  /** A link from each status (the fleet's dashboard, its status README). */
  targetUrl?: string | undefined;
  timeoutMs?: number;
}

/** A status as the host holds it: the newest per context of ours. */
export type PostedStatuses = Map<string, { state: CommitState; description: string }>;

/** The host asked to wait (429, or 403 with no requests left): no request before `until`. */
export class RateLimitedError extends Error {
  override name = "RateLimitedError";
  readonly until: number;
  constructor(until: number, message: string) {
    super(message);
    this.until = until;
  }
}

const STATE_WORDS: Record<ForgeProvider, Record<CommitState, string>> = {
  github: { pending: "pending", success: "success", failure: "failure", superseded: "error" },
  gitea: { pending: "pending", success: "success", failure: "failure", superseded: "warning" },
  gitlab: { pending: "running", success: "success", failure: "failed", superseded: "canceled" },
};

/** The host's word back to ours; a word we never post (GitLab's `created`) reads as nothing of ours. */
function stateFrom(provider: ForgeProvider, word: unknown): CommitState | undefined {
  const entry = Object.entries(STATE_WORDS[provider]).find(([, w]) => w === word);
  return entry?.[0] as CommitState | undefined;
}

const MAX_BODY_BYTES = 1024 * 1024;

export class Forge {
  readonly #spec: ForgeSpec;
  /** Requests sent, for the note's figure and the metric. */
  requests = 0;

  constructor(spec: ForgeSpec) {
    this.#spec = spec;
  }

  /** The statuses of ours the commit has, newest per context. */
  async statuses(commit: string): Promise<PostedStatuses> {
    const { provider } = this.#spec;
    const path =
      provider === "gitlab"
        ? `projects/${encodeURIComponent(this.#spec.repository)}/repository/commits/${commit}/statuses?per_page=100&all=true`
        : `repos/${this.#repo()}/commits/${commit}/status?per_page=100&limit=100`;
    const body = await this.#call("GET", path);
    const list = provider === "gitlab" ? body : isRecord(body) ? body.statuses : undefined;
    const posted: PostedStatuses = new Map();
    if (!Array.isArray(list)) return posted;
    // GitLab lists every status, oldest first; the combined status of GitHub and Gitea has the newest only.
    const ordered = provider === "gitlab" ? [...list].sort((a, b) => Number(a?.id) - Number(b?.id)) : list;
    for (const entry of ordered) {
      if (!isRecord(entry)) continue;
      const context = provider === "gitlab" ? entry.name : entry.context;
      const state = stateFrom(provider, entry.state ?? entry.status);
      if (typeof context !== "string" || !context.startsWith(`${COMMIT_STATUS_PREFIX}/`) || !state) continue;
      posted.set(context, {
        state,
        description: typeof entry.description === "string" ? entry.description : "",
      });
    }
    return posted;
  }

  /** Posts one status on its commit. */
  async post(status: CommitStatus): Promise<void> {
    const { provider, targetUrl } = this.#spec;
    const state = STATE_WORDS[provider][status.state];
    if (provider === "gitlab") {
      const path = `projects/${encodeURIComponent(this.#spec.repository)}/statuses/${status.commit}`;
      await this.#call("POST", path, {
        state,
        name: status.context,
        description: status.description,
        ...(targetUrl && { target_url: targetUrl }),
      });
      return;
    }
    await this.#call("POST", `repos/${this.#repo()}/statuses/${status.commit}`, {
      state,
      context: status.context,
      description: status.description,
      ...(targetUrl && { target_url: targetUrl }),
    });
  }

  #repo(): string {
    return this.#spec.repository.split("/").map(encodeURIComponent).join("/");
  }

  async #call(method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
    const { provider, apiUrl, timeoutMs = 10_000 } = this.#spec;
    const token = this.#spec.token();
    const url = new URL(path, apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/`);
    this.requests++;
    let response: Awaited<ReturnType<typeof request>>;
    let text: string;
    try {
      response = await request(url, {
        method,
        headers: {
          accept: provider === "github" ? "application/vnd.github+json" : "application/json",
          "user-agent": "knative-fleet",
          ...(body !== undefined && { "content-type": "application/json" }),
          ...(provider === "gitlab" ? { "private-token": token } : { authorization: `Bearer ${token}` }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      text = await readLimited(response.body, MAX_BODY_BYTES);
    } catch (error) {
      throw new Error(`${method} ${url.pathname}: ${describeError(error)}`);
    }
    const { statusCode, headers } = response;
    const until = rateLimitedUntil(statusCode, headers, Date.now());
    if (until !== undefined) {
      throw new RateLimitedError(until, `${method} ${url.pathname}: rate limited (${statusCode})`);
    }
    if (statusCode < 200 || statusCode > 299) {
      throw new Error(`${method} ${url.pathname}: answered ${statusCode}: ${text.slice(0, 200)}`);
    }
    try {
      return text === "" ? undefined : JSON.parse(text);
    } catch {
      throw new Error(`${method} ${url.pathname}: answered ${statusCode} with a body that is not JSON`);
    }
  }
}

type Headers = Record<string, string | string[] | undefined>;

/**
 * Until when the host asks to wait, from its answer: 429 (any host), or 403 with no requests left
 * (GitHub's secondary and primary limits). Retry-After in seconds, else the X-RateLimit reset time (epoch
 * seconds), else a minute.
 */
export function rateLimitedUntil(status: number, headers: Headers, now: number): number | undefined {
  const header = (name: string) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const exhausted = header("x-ratelimit-remaining") === "0";
  if (status !== 429 && !(status === 403 && (exhausted || header("retry-after") !== undefined))) {
    return undefined;
  }
  const retryAfter = Number(header("retry-after"));
  if (Number.isFinite(retryAfter) && retryAfter >= 0 && header("retry-after") !== undefined) {
    return now + Math.min(retryAfter, 3600) * 1000;
  }
  const reset = Number(header("x-ratelimit-reset"));
  if (Number.isFinite(reset) && reset * 1000 > now) return Math.min(reset * 1000, now + 3_600_000);
  return now + 60_000;
}
