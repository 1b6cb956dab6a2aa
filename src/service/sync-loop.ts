import type { FleetFile } from "../fleet/model.ts";
import { confirmedToken } from "../mirror/mirror.ts";
import type { SyncTrigger } from "../observability/metrics.ts";
import type { Snapshot } from "../source/index.ts";
import { type SyncEdges, type SyncResult, type SyncSettings, sync } from "../sync/sync.ts";
import { reportSync, type SyncSinks } from "./reports.ts";

/** What the leader's sync loop is given: the sync's settings and edges, and where a sync goes. */
export interface SyncLoopOptions {
  settings: SyncSettings;
  /** The fleet repository and branch the commits are of. */
  source: { repository: string; branch: string };
  /** Whether this replica leads: a sync queued before leadership ended does nothing. */
  isLeading(): boolean;
  /** The sync's edges as they are when a sync runs (the leader's stages). */
  edges(): SyncEdges;
  /** Where each sync is reported (src/service/reports.ts). */
  report: SyncSinks;
  /** A sync's result, for the status write-back. */
  onSynced(result: SyncResult): void;
  /** The sync itself (src/sync); a test gives a fake. */
  sync?: typeof sync;
  /** How often a held prune's confirmation is looked for between syncs (default 10 s). */
  confirmationCheckMs?: number;
}

const CONFIRMATION_CHECK_MS = 10_000;

/**
 * The leader's syncs, one at a time: a Git change and an inventory change never mirror concurrently. A
 * new commit is remembered, so an inventory or rollout change syncs the last commit's files again.
 */
export class SyncLoop {
  private readonly options: SyncLoopOptions;
  /** The last commit's files, synced again when the inventory changes what placements select. */
  private lastCommit: { files: readonly FleetFile[]; commit: string } | undefined;
  private syncs: Promise<void> = Promise.resolve();
  /** While the last sync held a prune for a person: the next look at the confirmation ConfigMap. */
  private confirmationCheck: NodeJS.Timeout | undefined;

  constructor(options: SyncLoopOptions) {
    this.options = options;
  }

  /** A commit of the fleet repository (the poller's): synced after the syncs before it. */
  snapshot(snapshot: Snapshot): Promise<void> {
    return this.serialized(() => this.syncSnapshot(snapshot));
  }

  /** The last commit synced again (its placements against the inventory as it is now), if there is one. */
  again(trigger: Exclude<SyncTrigger, "git">): void {
    const last = this.lastCommit;
    if (last) void this.serialized(() => this.syncCommit(last.files, last.commit, trigger));
  }

  /** Settles when the syncs queued so far have ended, whether or not they failed. */
  idle(): Promise<void> {
    return this.syncs;
  }

  /** Leadership ended: no commit to sync again until the next one. */
  forget(): void {
    this.lastCommit = undefined;
    this.awaitConfirmation(undefined);
  }

  private serialized(run: () => Promise<void>): Promise<void> {
    const next = this.syncs.then(run);
    this.syncs = next.catch(() => {});
    return next;
  }

  /** One commit of the fleet repository into the hub. */
  private async syncSnapshot(snapshot: Snapshot): Promise<void> {
    this.lastCommit = { files: snapshot.files, commit: snapshot.commit };
    await this.syncCommit(snapshot.files, snapshot.commit, "git");
  }

  /** Syncs a commit's files, its placements expanded against the inventory as it is now (src/sync). */
  private async syncCommit(files: readonly FleetFile[], commit: string, trigger: SyncTrigger): Promise<void> {
    const { options } = this;
    if (!options.isLeading()) return;
    const started = performance.now();
    const edges = options.edges();
    const source = { ...options.source, commit };
    const result = await (options.sync ?? sync)({ source, files }, options.settings, edges);
    const run = { commit, trigger, durationMs: performance.now() - started };
    reportSync(result, run, options.report);
    options.onSynced(result);
    this.awaitConfirmation(result.prune.state === "held" ? result.prune.confirmation?.token : undefined);
  }

  /**
   * A held prune is released by a person's annotation, which changes no commit and no inventory: it is
   * looked for (one read of the ConfigMap) until it names `token`, then the last commit is synced again.
   */
  private awaitConfirmation(token: string | undefined): void {
    clearTimeout(this.confirmationCheck);
    this.confirmationCheck = undefined;
    if (token === undefined) return;
    const check = setTimeout(async () => {
      if (!this.options.isLeading()) return;
      const confirmation = await this.options
        .edges()
        .hub.confirmation()
        .catch(() => undefined); // the hub away: looked for again at the next check
      if (this.confirmationCheck !== check) return; // a sync since decided what to wait for
      if (confirmedToken(confirmation) === token) this.again("prune-confirmation");
      else this.awaitConfirmation(token);
    }, this.options.confirmationCheckMs ?? CONFIRMATION_CHECK_MS);
    check.unref();
    this.confirmationCheck = check;
  }
}
