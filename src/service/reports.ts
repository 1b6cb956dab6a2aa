import { DriftReason } from "../api/conditions.ts";
import { describeRecord } from "../api/drift.ts";
import { OPERATOR_API_VERSION } from "../api/knative.ts";
import type { EventRecorder } from "../observability/events.ts";
import type { Logger } from "../observability/log.ts";
import type { FleetMetrics, SyncTrigger } from "../observability/metrics.ts";
import type { ReconcileReport } from "../reconcile/controller.ts";
import { GitSourceError } from "../source/index.ts";
import type { SyncResult } from "../sync/sync.ts";

// What the service's loops report, as plain functions over where it goes (the way Flux's controllers end
// each reconcile in one block that records the metric, logs and emits the Event). Whether a loop reports at
// all (a sharded replica reports only the clusters it owns) is the service's to decide.

/** A reconcile pass as reported: the controller's report, less what only the controller reads. */
export type ReconciledCr = Omit<ReconcileReport, "writes" | "statusWritten">;

/** Where a reconcile pass is reported: its series and an Event on its CR. */
export interface ReconcileSinks {
  metrics: Pick<FleetMetrics, "reconcileFinished" | "forgetResource">;
  events: Pick<EventRecorder, "record">;
}

/**
 * One reconcile pass of a hub CR: its series updated (or dropped once the CR is finalized), and a Warning
 * Event when it failed, and a Normal one for each drift on the cluster it put back or kept: who, which fields,
 * and which line of which fleet file to edit instead.
 */
export function reportReconcile(report: ReconciledCr, to: ReconcileSinks): void {
  if (report.finalized) to.metrics.forgetResource(report);
  else to.metrics.reconcileFinished({ ...report, error: report.error !== undefined });
  const involved = {
    apiVersion: OPERATOR_API_VERSION,
    kind: report.kind,
    metadata: { name: report.name, namespace: report.namespace },
  };
  if (report.error) void to.events.record(involved, "Warning", "ReconcileFailed", report.error.message);
  for (const record of report.drifted ?? []) {
    const reason = record.outcome === "kept" ? DriftReason.Kept : DriftReason.Corrected;
    void to.events.record(involved, "Normal", reason, `${report.cluster}: ${describeRecord(record)}`);
  }
}

/** One sync as it ran: the commit, what set it off, and how long it took. */
interface SyncRun {
  commit: string;
  trigger: SyncTrigger;
  durationMs: number;
}

/** What a sync's report reads of its result. */
export type SyncOutcome = Pick<SyncResult, "resources" | "prune" | "failedFiles" | "rollout" | "upgrades">;

/** Where a sync is reported: its series and one log line. */
export interface SyncSinks {
  metrics: Pick<FleetMetrics, "syncFinished" | "rolloutObserved" | "upgradesObserved" | "pruned">;
  log: Pick<Logger, "info">;
}

/**
 * One sync of a commit into the hub: its duration and trigger, the rollout's state and the prune's outcome
 * as series, and a log line counting the CRs by what was done to them.
 */
export function reportSync(result: SyncOutcome, run: SyncRun, to: SyncSinks): void {
  const { commit, trigger, durationMs } = run;
  to.metrics.syncFinished({ durationMs, trigger });
  if (result.rollout)
    to.metrics.rolloutObserved({ ...result.rollout, wavesCompleted: result.rollout.history.length });
  to.metrics.upgradesObserved(result.upgrades ?? []);
  to.metrics.pruned({ outcome: result.prune.state, count: result.prune.candidates.length });
  const counts: Record<string, number> = {};
  for (const r of result.resources) counts[r.action] = (counts[r.action] ?? 0) + 1;
  to.log.info(
    {
      commit,
      trigger,
      ...counts,
      invalidFiles: result.failedFiles.length,
      prune: result.prune.state,
      ...(result.rollout && {
        rollout: result.rollout.phase,
        wave: result.rollout.wave,
        waiting: result.rollout.waiting,
      }),
    },
    "fleet synced into the hub",
  );
}

/**
 * A poll of the fleet repository that failed (the fetch once its retries were spent, or the sync of what
 * it fetched): a warning naming the kind of failure. Nothing is pruned; the next poll tries again.
 */
export function reportPollFailure(err: unknown, to: { log: Pick<Logger, "warn"> }): void {
  const kind = err instanceof GitSourceError ? err.kind : "sync";
  to.log.warn(
    { err: (err as Error).message, kind },
    "fleet sync failed; nothing is pruned, retrying on the next poll",
  );
}
