import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../observability/log.ts";
import type { FleetMetrics } from "../observability/metrics.ts";
import type { GitSource } from "../source/index.ts";
import type { SyncReport } from "./coalesce.ts";
import { type CommitStatusSettings, CommitStatusWriter } from "./commit-status-writer.ts";
import { Forge } from "./forge.ts";
import { Notifier, type NotifierSettings } from "./notifier.ts";
import type { StatusSync } from "./summary.ts";
import { type StatusWriteBack, StatusWriter } from "./write-back.ts";

/**
 * The leader's reports back to Git, as the config asks for them: each told of every sync and of every
 * change the summary shows, each on its own schedule, none in another's way.
 */
export class StatusReports {
  readonly #reports: SyncReport[];

  constructor(options: {
    source: GitSource;
    hub: KubeClient;
    writeBack: StatusWriteBack | undefined;
    commitStatus: CommitStatusSettings | undefined;
    notifications: NotifierSettings | undefined;
    log: Logger;
    metrics: FleetMetrics;
  }) {
    const { source, hub, writeBack, commitStatus, notifications, log, metrics } = options;
    this.#reports = [
      ...(writeBack
        ? [
            new StatusWriter({
              source,
              hub,
              ...writeBack,
              log: log.child({ component: "status" }),
              onCommitted: (outcome) => metrics.statusCommitFinished({ outcome }),
            }),
          ]
        : []),
      ...(commitStatus
        ? [
            new CommitStatusWriter({
              forge: new Forge(commitStatus.forge),
              hub,
              statuses: commitStatus.statuses,
              intervalMs: commitStatus.intervalMs,
              log: log.child({ component: "commit-status" }),
              onSent: (outcome) => metrics.commitStatusSent({ outcome }),
            }),
          ]
        : []),
      ...(notifications
        ? [
            new Notifier({
              hub,
              ...notifications,
              log: log.child({ component: "notifications" }),
              onSent: (outcome) => metrics.notificationSent({ outcome }),
            }),
          ]
        : []),
    ];
  }

  synced(result: StatusSync): void {
    for (const report of this.#reports) report.synced(result);
  }

  request(): void {
    for (const report of this.#reports) report.request();
  }

  async flush(): Promise<void> {
    await Promise.all(this.#reports.map((report) => report.flush()));
  }

  async stop(): Promise<void> {
    await Promise.all(this.#reports.map((report) => report.stop()));
  }
}
