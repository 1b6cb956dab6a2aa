import type { KubeClient } from "../kube/client.ts";
import { listHubResources } from "../mirror/mirror.ts";
import type { Logger } from "../observability/log.ts";
import type { CommitStatusOutcome } from "../observability/metrics.ts";
import { redactSecrets } from "../observability/redact.ts";
import { commitInMessage } from "../text/commit.ts";
import { SyncReport } from "./coalesce.ts";
import { type CommitStatus, type CommitStatusOptions, commitStatuses } from "./commit-status.ts";
import { type Forge, type ForgeSpec, type PostedStatuses, RateLimitedError } from "./forge.ts";
import type { StatusSync } from "./summary.ts";

// Sends the commit statuses (commit-status.ts) to the Git host: read what the commit has (once per commit
// per leader), compare, post only what differs. A status left pending on a commit the rollout moved away
// from is marked superseded. Never in the sync's way: a host that is down or limits the rate is a log line
// and a metric, and the statuses catch up on the next run.

/** The commit statuses a config file asks for (service config `commitStatus`). */
export interface CommitStatusSettings {
  forge: ForgeSpec;
  statuses: CommitStatusOptions;
  intervalMs: number;
}

interface CommitStatusWriterOptions {
  forge: Forge;
  hub: KubeClient;
  statuses: CommitStatusOptions;
  /** At most one run per interval; changes in between are coalesced. */
  intervalMs: number;
  log: Logger;
  onSent?(outcome: CommitStatusOutcome): void;
}

/** The commits whose statuses are kept in memory: the rollout's and the few before it. */
const COMMITS_KEPT = 8;

export class CommitStatusWriter extends SyncReport {
  private readonly options: CommitStatusWriterOptions;
  /** What the host has, as read or posted, by commit (oldest first) then context. */
  private readonly posted = new Map<string, PostedStatuses>();

  constructor(options: CommitStatusWriterOptions) {
    super(options.intervalMs);
    this.options = options;
  }

  /** One run; throws when something is left to send. */
  protected async send(sync: StatusSync): Promise<void> {
    const { forge, hub, log } = this.options;
    try {
      const desired = commitStatuses({ resources: await listHubResources(hub), sync }, this.options.statuses);
      for (const commit of new Set(desired.map((s) => s.commit))) await this.read(commit);
      for (const status of [...desired, ...this.superseded(desired)]) {
        const have = this.posted.get(status.commit)?.get(status.context);
        if (have?.state === status.state && have.description === status.description) continue;
        await forge.post(status);
        this.posted.get(status.commit)?.set(status.context, status);
        this.options.onSent?.("posted");
      }
    } catch (err) {
      const message = redactSecrets((err as Error).message);
      if (err instanceof RateLimitedError) {
        this.holdUntil(err.until);
        log.warn({ err: message, until: new Date(err.until).toISOString() }, "commit status rate limited");
        this.options.onSent?.("rate_limited");
      } else {
        log.warn({ err: message }, "commit status failed; retrying later");
        this.options.onSent?.("failed");
      }
      throw err;
    }
  }

  /** What the commit has on the host, read once per commit (a new leader reads what the last one posted). */
  private async read(commit: string): Promise<void> {
    if (this.posted.has(commit)) return;
    this.posted.set(commit, await this.options.forge.statuses(commit));
    for (const old of [...this.posted.keys()].slice(0, Math.max(0, this.posted.size - COMMITS_KEPT))) {
      this.posted.delete(old);
    }
  }

  /** Pending statuses on other commits whose contexts moved on: no longer waited for. */
  private superseded(desired: readonly CommitStatus[]): CommitStatus[] {
    const now = new Map(desired.map((s) => [s.context, s.commit]));
    const wanted = new Set(desired.map((s) => `${s.commit} ${s.context}`));
    const out: CommitStatus[] = [];
    for (const [commit, statuses] of this.posted) {
      for (const [context, status] of statuses) {
        if (status.state !== "pending" || wanted.has(`${commit} ${context}`)) continue;
        const next = now.get(context);
        const description =
          next === undefined ? "no longer part of the fleet" : `superseded by ${commitInMessage(next)}`;
        out.push({ commit, context, state: "superseded", description });
      }
    }
    return out;
  }
}
