import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
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
  /**
   * How often the hub is looked at between syncs for what the last one waits on (default 10 s): a held
   * prune's confirmation, the end of a declared CR's deletion.
   */
  hubCheckMs?: number;
}

const HUB_CHECK_MS = 10_000;

/** What the last sync left waiting on the hub, which neither a commit nor the inventory announces. */
interface HubWait {
  /** The token of a prune held for a person. */
  token: string | undefined;
  /** Declared CRs whose hub copy was being deleted: each is created again once its finalizer is done. */
  terminating: readonly ResourceIdentity[];
}

const NOTHING_TO_WAIT_FOR: HubWait = { token: undefined, terminating: [] };

/** Up to this many terminating CRs are looked at with a GET each; more, with the sync's own read. */
const TERMINATING_READ_ONE_BY_ONE = 5;

/**
 * The leader's syncs, one at a time: a Git change and an inventory change never mirror concurrently. A
 * new commit is remembered, so an inventory or rollout change syncs the last commit's files again.
 */
export class SyncLoop {
  private readonly options: SyncLoopOptions;
  /** The last commit's files, synced again when the inventory changes what placements select. */
  private lastCommit: { files: readonly FleetFile[]; commit: string } | undefined;
  private syncs: Promise<void> = Promise.resolve();
  /** While the last sync left something waiting on the hub (HubWait): the next look at it. */
  private hubCheck: NodeJS.Timeout | undefined;

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
    this.awaitHub(NOTHING_TO_WAIT_FOR);
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
    this.awaitHub({
      token: result.prune.state === "held" ? result.prune.confirmation.token : undefined,
      terminating: result.resources.filter((outcome) => outcome.action === "terminating"),
    });
  }

  /**
   * Two things release a sync without a commit or an inventory change: a person's confirmation of a held
   * prune (an annotation on its ConfigMap), and the end of the deletion of a declared CR's hub copy (its
   * finalizer uninstalled the cluster; the CR is to be created again). While the last sync left either,
   * the hub is looked at (one read each) until it happened, then the last commit is synced again.
   */
  private awaitHub(wait: HubWait): void {
    clearTimeout(this.hubCheck);
    this.hubCheck = undefined;
    if (wait.token === undefined && wait.terminating.length === 0) return;
    const check = setTimeout(async () => {
      if (!this.options.isLeading()) return;
      const trigger = await this.released(wait).catch(() => undefined); // the hub away: the next check
      if (this.hubCheck !== check) return; // a sync since decided what to wait for
      if (trigger) this.again(trigger);
      else this.awaitHub(wait);
    }, this.options.hubCheckMs ?? HUB_CHECK_MS);
    check.unref();
    this.hubCheck = check;
  }

  /** What, of what `wait` waits on, has happened; undefined while nothing has. */
  private async released(wait: HubWait): Promise<Exclude<SyncTrigger, "git"> | undefined> {
    const { hub } = this.options.edges();
    if (wait.token !== undefined && confirmedToken(await hub.confirmation()) === wait.token)
      return "prune-confirmation";
    if (wait.terminating.length === 0) return undefined;
    // A few are read one by one; many (a cluster's departure at scale) with one list of each kind.
    const present =
      wait.terminating.length <= TERMINATING_READ_ONE_BY_ONE
        ? await Promise.all(wait.terminating.map((identity) => hub.get(identity)))
        : await hub.read().then(({ live }) => {
            const onHub = new Set(live.map((object) => formatIdentity(identityOf(object))));
            return wait.terminating.map((identity) => onHub.has(formatIdentity(identity)) || undefined);
          });
    return present.some((object) => object === undefined) ? "hub-cr-deleted" : undefined;
  }
}
