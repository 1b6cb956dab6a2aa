import { OPERATOR_API_VERSION } from "../api/knative.ts";
import { ROLLOUT_PAUSED_ANNOTATION, ROLLOUT_WAITING_ANNOTATION } from "../api/labels.ts";
import type { FleetModel } from "../fleet/model.ts";
import { formatIdentity } from "../fleet/parse.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import { type ApplyStep, identityOf, type MirrorGate, type PruneCandidate } from "../mirror/plan.ts";
import type { EventRecorder, InvolvedObject } from "../observability/events.ts";
import type { Logger } from "../observability/log.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { type GateOutcome, gateApplies, gatePrunes, revisionOf } from "./gate.ts";
import {
  type Halt,
  ROLLOUT_STATE_CONFIGMAP,
  ROLLOUT_STATE_KEY,
  type RolloutState,
  readRolloutState,
} from "./state.ts";

/** What the rollout did in one sync, for the log, the status summary and the metrics. */
export interface RolloutReport {
  /** `Invalid`: the policy failed validation; `Waiting`: the inventory is not read yet. Every change waits. */
  phase: RolloutState["phase"] | "Invalid" | "Waiting";
  revision?: string;
  commit?: string;
  wave?: string;
  paused: boolean;
  halt?: Halt;
  /** How many CRs keep their last applied spec this sync. */
  waiting: number;
  history: RolloutState["history"];
  message?: string;
}

export interface PreparedRollout {
  gate: MirrorGate;
  /** Stores the state, marks the waiting CRs, records the Events. Call once the mirror is done. */
  finish(): Promise<RolloutReport | undefined>;
}

export interface RolloutStageOptions {
  hub: KubeClient;
  /** knative-fleet's hub namespace: the state ConfigMap's. */
  namespace: string;
  /** The ClusterProfiles as the placement stage's watch holds them; undefined until listed. */
  inventory(): readonly InventoryCluster[] | undefined;
  events: EventRecorder;
  log: Logger;
  /** How often the last commit is synced again while a wave is open or waits (soak, health, windows). */
  checkIntervalMs: number;
  /** Sync the last commit again. */
  onDue(): void;
  now?(): Date;
}

/**
 * The service's edge of the rollout: reads the state and the hub pause from the hub before a sync, gives the
 * mirror the gate, and afterwards stores the state (one write, only when it changed), marks the CRs that
 * wait (an annotation, set or cleared only when it changes, with an Event) and schedules the next check.
 */
export class RolloutStage {
  readonly #options: RolloutStageOptions;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: RolloutStageOptions) {
    this.#options = options;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /**
   * The gate for one sync of `model`. Without a policy every change passes (as without this stage, with no
   * request of its own); only a waiting note a removed policy left on a hub CR is cleared.
   */
  async prepare(model: FleetModel, commit: string): Promise<PreparedRollout> {
    const { policy, failedPaths } = model.rollout;
    if (policy === undefined && failedPaths.length === 0) {
      clearTimeout(this.#timer);
      let live: readonly KubeObject[] = [];
      return {
        gate: {
          applies: async (steps, hubLive) => {
            live = hubLive;
            return [...steps];
          },
          prunes: (candidates) => [...candidates],
        },
        finish: async () => {
          await this.#markWaiting(live, new Map(), commit);
          return undefined;
        },
      };
    }
    const { hub, namespace } = this.#options;
    const configMap = await hub.get("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP);
    const stored = readRolloutState(
      (configMap?.data as Record<string, string> | undefined)?.[ROLLOUT_STATE_KEY],
    );
    const hubPaused = configMap?.metadata.annotations?.[ROLLOUT_PAUSED_ANNOTATION] === "true";
    const now = (this.#options.now ?? (() => new Date()))();
    const clusters = this.#options.inventory();
    const holdAll =
      policy === undefined
        ? `the rollout policy (${failedPaths.join(", ")}) failed validation; changes wait until it is fixed`
        : clusters === undefined
          ? "the ClusterProfile inventory is not read yet; changes wait for it"
          : undefined;

    let outcome: GateOutcome | undefined;
    let live: readonly KubeObject[] = [];
    let waiting = new Map<string, string>();
    let deletionsWait = false;
    const spec = policy?.rollout.spec;
    const paused = hubPaused || spec?.paused === true;
    const gateSteps = (steps: readonly ApplyStep[]): ApplyStep[] => {
      if (holdAll !== undefined || spec === undefined)
        return steps.map((step) => waitingStep(step, holdAll ?? ""));
      outcome = gateApplies(
        {
          spec,
          hubPaused,
          revision: revisionOf(model.resources),
          commit,
          clusters: clusters!,
          state: stored,
          now,
        },
        steps,
        live,
      );
      return outcome.steps;
    };
    const gate: MirrorGate = {
      applies: async (steps, hubLive) => {
        live = hubLive;
        const gated = gateSteps(steps);
        // Write-ahead: the state names every CR let through before the mirror writes it, so a leader that
        // dies between the two leaves a successor that knows the wave is open and what it changed.
        if (outcome && JSON.stringify(outcome.state) !== JSON.stringify(stored))
          await this.#store(outcome.state);
        waiting = new Map(
          gated.flatMap((step): [string, string][] =>
            step.action === "waiting" ? [[formatIdentity(step), step.reason]] : [],
          ),
        );
        return gated;
      },
      prunes: (candidates, hubLive) => {
        const ordered =
          holdAll !== undefined || spec === undefined
            ? candidates.map((candidate): PruneCandidate => ({ ...candidate, waiting: holdAll ?? "" }))
            : gatePrunes(spec, clusters!, paused, candidates, hubLive);
        deletionsWait = ordered.some((candidate) => candidate.waiting !== undefined);
        return ordered;
      },
    };
    const finish = async (): Promise<RolloutReport> => {
      await this.#markWaiting(live, waiting, commit);
      if (outcome === undefined) {
        return {
          phase: spec === undefined ? "Invalid" : "Waiting",
          paused,
          waiting: waiting.size,
          history: [],
          message: holdAll,
        };
      }
      const { state } = outcome;
      for (const event of outcome.events) {
        void this.#options.events.record(
          this.#involved(event.resource),
          event.type,
          event.reason,
          event.message,
        );
      }
      // A deletion that waits for a later wave's CRs to go needs no commit to go on: look again.
      this.#schedule(state, paused || deletionsWait);
      return {
        phase: state.phase,
        revision: state.revision,
        commit: state.commit,
        ...(outcome.openWave ? { wave: outcome.openWave } : {}),
        paused,
        ...(state.halt ? { halt: state.halt } : {}),
        waiting: waiting.size,
        history: state.history,
      };
    };
    return { gate, finish };
  }

  async #store(state: RolloutState): Promise<void> {
    await this.#options.hub.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: this.#options.namespace },
      data: { [ROLLOUT_STATE_KEY]: JSON.stringify(state) },
    });
  }

  /**
   * The waiting annotation on each hub CR this repository mirrors: set to why it waits, cleared when its
   * wave opens. A merge patch of that one annotation: the mirror's server-side apply does not own it.
   */
  async #markWaiting(live: readonly KubeObject[], waiting: ReadonlyMap<string, string>, commit: string) {
    for (const object of live) {
      if (object.metadata.deletionTimestamp) continue;
      const want = waiting.get(key(object));
      const have = object.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION];
      if (want === have) continue;
      const { kind, namespace, name } = identityOf(object);
      try {
        await this.#options.hub.mergePatch(OPERATOR_API_VERSION, kind, namespace, name, {
          metadata: { annotations: { [ROLLOUT_WAITING_ANNOTATION]: want ?? null } },
        });
        if (want !== undefined) {
          void this.#options.events.record(
            this.#involved(key(object)),
            "Normal",
            "RolloutWaiting",
            `keeps its last applied spec; ${want} (head ${commit.slice(0, 12)})`,
          );
        }
      } catch (err) {
        this.#options.log.warn({ resource: key(object), err: String(err) }, "cannot mark a waiting CR");
      }
    }
  }

  #involved(resource: string): InvolvedObject {
    const match = /^(\S+) ([^/]+)\/(.+)$/.exec(resource);
    if (!match) {
      return {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: this.#options.namespace },
      };
    }
    return {
      apiVersion: OPERATOR_API_VERSION,
      kind: match[1]!,
      metadata: { namespace: match[2]!, name: match[3]! },
    };
  }

  /**
   * While a rollout is under way, paused or has deletions waiting, look again after the check interval; a
   * halted one waits for Git.
   */
  #schedule(state: RolloutState, waits: boolean): void {
    clearTimeout(this.#timer);
    if (this.#stopped || (state.phase !== "Progressing" && !waits)) return;
    this.#timer = setTimeout(() => {
      if (!this.#stopped) this.#options.onDue();
    }, this.#options.checkIntervalMs);
    this.#timer.unref();
  }
}

const key = (object: KubeObject): string => formatIdentity(identityOf(object));

function waitingStep(step: ApplyStep, reason: string): ApplyStep {
  if (step.action !== "create" && step.action !== "update") return step;
  const { object: _held, ...outcome } = step;
  return { ...outcome, action: "waiting", reason };
}
