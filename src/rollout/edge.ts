import type { ResourceIdentity } from "../fleet/identity.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { ApplyStep } from "../mirror/decide.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import type { GateOutcome, RolloutEvent } from "./gate.ts";
import type { historyOf, RolloutPhase, RolloutState } from "./state.ts";

// The values the sync (src/sync) hands between its steps and reports: the rollout's edge types, apart from
// the I/O class (stage.ts) that produces them, so the sync and the status summary depend on types only.

/** What the rollout did in one sync, for the log, the status summary and the metrics. */
export interface RolloutReport {
  /**
   * `Invalid`: the policy cannot be read; `Waiting`: the inventory or the state's key is not there yet;
   * `Refused`: the stored state was not written by this knative-fleet. Every change waits in all three.
   */
  phase: RolloutPhase;
  /** The commit the rollout started at. */
  commit?: string;
  /** The first wave that is not done, and whether it has let a CR through yet. */
  wave?: string;
  opened?: boolean;
  paused: boolean;
  halt?: RolloutState["halt"];
  /** The open wave waits for an approval in Git of the rollout's commit. */
  approval?: { wave: string; commit: string };
  /** The CRs (`Kind namespace/name`) this sync put back on their baseline (HaltAndRevert). */
  reverted?: string[];
  /** How many CRs keep their last applied spec this sync. */
  waiting: number;
  history: ReturnType<typeof historyOf>;
  /** The wave of each cluster a hub CR targets (`namespace/name`), for the commit statuses. */
  clusterWaves?: Record<string, string>;
  message?: string;
}

/** What the rollout knows before a sync decides anything: read once, handed to the sync's later steps. */
export interface OpenedRollout {
  commit: string;
  now: Date;
  /** The valid policy's spec; absent when the policy cannot be read. */
  spec?: RolloutSpec;
  hubPaused: boolean;
  /** Paused in the file or on the hub. */
  paused: boolean;
  clusters?: readonly InventoryCluster[];
  /** Why every change waits: the policy, the inventory or the state's key cannot be read, or the state is refused. */
  holdAll?: string;
  refused: boolean;
  /** A person chose to start the state over (it was refused or missing): the gate re-derives baselines. */
  startedOver: boolean;
  /** The stored state, checked against its key (undefined: none yet), and its plain JSON (packed or not when stored). */
  state?: RolloutState;
  stateText?: string;
  /** The CRs of fleet files that failed validation: they keep their last applied content. */
  frozen: ResourceIdentity[];
  /** The approvals in Git, by `approvalKey(commit, wave)`. */
  approvals: ReadonlySet<string>;
}

/** The gate's decision on one sync's steps. */
export interface GatedSteps {
  /** The steps to take: a held create or update is `waiting`; a revert is an update. */
  steps: ApplyStep[];
  outcome?: GateOutcome;
  /** What the reverts did, recorded as Events once the sync is done. */
  revertEvents: RolloutEvent[];
  /** An upgrade chain has steps to go: the last commit is synced again to move it on. */
  chainsUnderWay?: boolean;
}
