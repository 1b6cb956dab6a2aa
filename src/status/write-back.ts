import { posix } from "node:path";
import type { KubeClient } from "../kube/client.ts";
import type { MirrorResult } from "../mirror/mirror.ts";
import { listHubResources } from "../mirror/mirror.ts";
import type { Logger } from "../observability/log.ts";
import type { GitSource } from "../source/index.ts";
import { renderStatusSummary } from "./summary.ts";

export interface StatusWriterOptions {
  source: GitSource;
  hub: KubeClient;
  /** Folder in the repository, e.g. `status/`. */
  path: string;
  /** Branch the status goes to (the fleet branch, or a separate one). */
  branch: string;
  author: { name: string; email: string };
  /** At most one commit per interval; changes in between are coalesced into the next one. */
  intervalMs: number;
  log: Logger;
  onCommitted?(outcome: "pushed" | "unchanged" | "failed"): void;
}

/**
 * Commits the fleet's status summary back to Git: only when its content changed (the summary has no
 * timestamps), at most once per interval, pushed with fetch-rebuild-retry by the source (a person's
 * concurrent commit is never lost, never force-pushed over). The status files are outside the fleet globs,
 * so the status commit triggers no sync.
 */
export class StatusWriter {
  private readonly options: StatusWriterOptions;
  private lastMirror: MirrorResult | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private dirty = false;
  private lastRun = 0;
  private stopped = false;

  constructor(options: StatusWriterOptions) {
    this.options = options;
  }

  /** A sync finished: its result is what the next summary reports. */
  mirrored(result: MirrorResult): void {
    this.lastMirror = result;
    this.request();
  }

  /** Something the summary shows may have changed (a CR's status). */
  request(): void {
    if (this.stopped || !this.lastMirror) return;
    this.dirty = true;
    if (this.timer || this.running) return;
    const wait = Math.max(0, this.lastRun + this.options.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.write().finally(() => {
        this.running = undefined;
        if (this.dirty) this.request();
      });
    }, wait);
    this.timer.unref();
  }

  /** Writes now what is pending (used at shutdown and by tests). */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    await this.running;
    if (this.dirty) await this.write();
  }

  async stop(): Promise<void> {
    await this.flush().catch(() => undefined);
    this.stopped = true;
  }

  private async write(): Promise<void> {
    const mirror = this.lastMirror;
    if (!mirror) return;
    this.dirty = false;
    this.lastRun = Date.now();
    const { source, hub, path, branch, author, log } = this.options;
    try {
      const files = renderStatusSummary({ resources: await listHubResources(hub), mirror });
      const changes = new Map(files.map((f) => [posix.join(path, f.name), f.content]));
      const result = await source.commitAndPush({
        files: changes,
        message: `status: fleet summary for ${mirror.source.commit.slice(0, 12)}`,
        author,
        branch,
      });
      log.info(
        { commit: result.commit, pushed: result.pushed, attempts: result.attempts },
        result.pushed ? "status committed" : "status unchanged",
      );
      this.options.onCommitted?.(result.pushed ? "pushed" : "unchanged");
    } catch (err) {
      this.dirty = true; // retried with the next request
      log.warn({ err: (err as Error).message }, "status write-back failed; retrying later");
      this.options.onCommitted?.("failed");
    }
  }
}
