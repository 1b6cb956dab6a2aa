import { randomBytes } from "node:crypto";
import { OPERATOR_API_VERSION } from "../api/knative.ts";
import {
  ROLLOUT_PAUSED_ANNOTATION,
  ROLLOUT_REFUSED_ANNOTATION,
  ROLLOUT_WAITING_ANNOTATION,
} from "../api/labels.ts";
import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import type { ApplyStep, MirrorSource, PruneCandidate } from "../mirror/decide.ts";
import type { EventRecorder, InvolvedObject } from "../observability/events.ts";
import type { Logger } from "../observability/log.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { type GateOutcome, gateApplies, gatePrunes, type RolloutEvent } from "./gate.ts";
import { type RevertResult, revertStep, withReverts } from "./revert.ts";
import {
  type Halt,
  historyOf,
  type OpenedState,
  openState,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_KEY_SECRET_KEY,
  ROLLOUT_KEY_SECRET_LAST,
  ROLLOUT_STATE_CONFIGMAP,
  ROLLOUT_STATE_MAC_KEY,
  type RolloutState,
  sealState,
  stateBinding,
  stateText,
} from "./state.ts";

/** What the rollout did in one sync, for the log, the status summary and the metrics. */
export interface RolloutReport {
  /**
   * `Invalid`: the policy cannot be read; `Waiting`: the inventory or the state's key is not there yet;
   * `Refused`: the stored state was not written by this knative-fleet. Every change waits in all three.
   */
  phase: RolloutState["phase"] | "Invalid" | "Waiting" | "Refused";
  /** The commit the rollout started at. */
  commit?: string;
  wave?: string;
  paused: boolean;
  halt?: Halt;
  /** How many CRs keep their last applied spec this sync. */
  waiting: number;
  history: ReturnType<typeof historyOf>;
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
  /** The stored state, checked against its key (undefined: none yet), and its text as stored. */
  state?: RolloutState;
  stateText?: string;
  /** The CRs of fleet files that failed validation: they keep their last applied content. */
  frozen: ResourceIdentity[];
}

/** The gate's decision on one sync's steps. */
export interface GatedSteps {
  /** The steps to take: a held create or update is `waiting`; a revert is an update. */
  steps: ApplyStep[];
  outcome?: GateOutcome;
  /** What the reverts did, recorded as Events once the sync is done. */
  revertEvents: RolloutEvent[];
}

export interface RolloutStageOptions {
  hub: KubeClient;
  /** knative-fleet's hub namespace: the state ConfigMap's and its key Secret's. */
  namespace: string;
  /** Where the fleet comes from: the state is bound to it, and reverts are re-read from it. */
  source: Pick<MirrorSource, "repository" | "branch">;
  /** The ClusterProfiles as the placement stage's watch holds them; undefined until listed. */
  inventory(): readonly InventoryCluster[] | undefined;
  /**
   * The fleet model of an earlier commit, placements expanded against the inventory as it is now: where a
   * revert reads the content it puts back (the state keeps only its digest).
   */
  modelAt(commit: string): Promise<FleetModel>;
  events: EventRecorder;
  log: Logger;
  /** How often the last commit is synced again while a wave is open or waits (soak, health, windows). */
  checkIntervalMs: number;
  /** Sync the last commit again. */
  onDue(): void;
  now?(): Date;
}

/**
 * The service's edge of the rollout: reads the state, its key and the hub pause before a sync, gives the
 * mirror the gate, re-reads from Git what a revert puts back, and stores the state (one write, only when it
 * changed, before the mirror writes what it lets through); afterwards marks the CRs that wait (an
 * annotation, set or cleared only when it changes, with an Event) and schedules the next check.
 */
export class RolloutStage {
  readonly #options: RolloutStageOptions;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #key: Uint8Array | undefined;
  /** The HMAC of the last state stored, as the key Secret records it (read once per leader, then kept). */
  #last: string | undefined;
  /** The state text this leader last stored: a different one read back was written by someone else. */
  #written: string | undefined;
  /** The refused state text last reported, so a refusal is one Event, not one a sync. */
  #refusedText: string | undefined;

  constructor(options: RolloutStageOptions) {
    this.#options = options;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /**
   * Reads what the gate decides by, before the hub is read: the state ConfigMap (and, once per leader, its
   * key Secret) and the hub pause. Without a policy there is nothing to read: undefined, and every change
   * passes (as without this stage), with no request of its own.
   */
  async open(model: FleetModel, commit: string): Promise<OpenedRollout | undefined> {
    const { policy, failedPaths } = model.rollout;
    if (policy === undefined && failedPaths.length === 0) {
      clearTimeout(this.#timer);
      return undefined;
    }
    const { hub, namespace } = this.#options;
    const configMap = await hub.get("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP);
    const hubPaused = configMap?.metadata.annotations?.[ROLLOUT_PAUSED_ANNOTATION] === "true";
    const clusters = this.#options.inventory();
    const spec = policy?.rollout.spec;
    const opened = spec && clusters ? await this.#open(configMap) : undefined;
    const holdAll =
      spec === undefined
        ? `the rollout policy (${failedPaths.join(", ")}) cannot be read; changes wait until it is fixed`
        : clusters === undefined
          ? "the ClusterProfile inventory is not read yet; changes wait for it"
          : opened?.kind === "error"
            ? `the rollout state's key cannot be read (${opened.reason}); changes wait for it`
            : opened?.kind === "refused"
              ? `the rollout state ConfigMap ${namespace}/${ROLLOUT_STATE_CONFIGMAP} is refused: ${opened.reason}. Every change waits; delete the ConfigMap to start the rollout state over`
              : undefined;
    return {
      commit,
      now: (this.#options.now ?? (() => new Date()))(),
      ...(spec && { spec }),
      hubPaused,
      paused: hubPaused || spec?.paused === true,
      ...(clusters && { clusters }),
      ...(holdAll !== undefined && { holdAll }),
      refused: opened?.kind === "refused",
      ...(opened?.kind === "ready" && opened.state && { state: opened.state }),
      ...(opened?.kind === "ready" && opened.text !== undefined && { stateText: opened.text }),
      frozen: model.files.filter((file) => file.status === "failed").flatMap((file) => file.declares),
    };
  }

  /**
   * Which of the steps go out now: `gateApplies` on what `open` read, the reverts re-read from Git, and the
   * state stored before the mirror writes anything it lets through (write-ahead: a leader that dies between
   * the two leaves a successor that knows the wave is open and what it changed).
   */
  async gate(
    opened: OpenedRollout | undefined,
    steps: readonly ApplyStep[],
    live: readonly KubeObject[],
    held: readonly ResourceIdentity[],
  ): Promise<GatedSteps> {
    if (opened === undefined) return { steps: [...steps], revertEvents: [] };
    const { spec, clusters, holdAll } = opened;
    if (holdAll !== undefined || spec === undefined || clusters === undefined) {
      return { steps: steps.map((step) => waitingStep(step, holdAll ?? "")), revertEvents: [] };
    }
    const { commit, hubPaused, state, frozen, now } = opened;
    const outcome = gateApplies({ spec, hubPaused, commit, clusters, state, frozen, held, now }, steps, live);
    const revertEvents: RolloutEvent[] = [];
    const reverts = await this.#reverts(outcome, revertEvents);
    const text = stateText(outcome.state);
    if (text !== opened.stateText) await this.#store(outcome.state, text);
    return { steps: withReverts(outcome.steps, reverts), outcome, revertEvents };
  }

  /** The prune's candidates in reverse wave order (those that wait marked); all of them wait while held. */
  orderPrunes(
    opened: OpenedRollout | undefined,
    candidates: readonly PruneCandidate[],
    live: readonly KubeObject[],
  ): PruneCandidate[] {
    if (opened === undefined) return [...candidates];
    const { spec, clusters, holdAll, paused } = opened;
    if (holdAll !== undefined || spec === undefined || clusters === undefined) {
      return candidates.map((candidate) => ({ ...candidate, waiting: holdAll ?? "" }));
    }
    return gatePrunes(spec, clusters, paused, candidates, live);
  }

  /**
   * Once the mirror is done: marks the CRs that wait (and clears the mark a removed policy left), records
   * the Events and schedules the next check. The sync's report of the rollout.
   */
  async finish(
    opened: OpenedRollout | undefined,
    gated: GatedSteps,
    live: readonly KubeObject[],
    prunes: readonly PruneCandidate[],
  ): Promise<RolloutReport | undefined> {
    const waiting = waitingOf(gated.steps);
    const commit = opened?.commit ?? "";
    await this.#markWaiting(live, waiting, commit);
    if (opened === undefined) return undefined;
    const { outcome, revertEvents } = gated;
    if (outcome === undefined) {
      // A broken policy waits for Git; a refused state for a person to delete it, and the key or the
      // inventory for the hub: those are looked at again, as nothing else would bring a sync.
      this.#schedule(opened.spec !== undefined);
      return {
        phase: opened.spec === undefined ? "Invalid" : opened.refused ? "Refused" : "Waiting",
        paused: opened.paused,
        waiting: waiting.size,
        history: [],
        ...(opened.holdAll !== undefined && { message: opened.holdAll }),
      };
    }
    const { state } = outcome;
    for (const event of [...outcome.events, ...revertEvents]) {
      void this.#options.events.record(
        this.#involved(event.resource),
        event.type,
        event.reason,
        event.message,
      );
    }
    // A deletion that waits for a later wave's CRs to go needs no commit to go on: look again.
    const deletionsWait = prunes.some((candidate) => candidate.waiting !== undefined);
    this.#schedule(state.phase === "Progressing" || opened.paused || deletionsWait);
    return {
      phase: state.phase,
      commit: state.commit,
      ...(outcome.openWave ? { wave: outcome.openWave } : {}),
      paused: opened.paused,
      ...(state.halt ? { halt: state.halt } : {}),
      waiting: waiting.size,
      history: historyOf(state),
    };
  }

  /** The stored state, checked against the key; a refusal is recorded once per refused content. */
  async #open(
    configMap: KubeObject | undefined,
  ): Promise<
    | { kind: "ready"; state: RolloutState | undefined; text: string | undefined }
    | { kind: "refused"; reason: string }
    | { kind: "error"; reason: string }
  > {
    let key: Uint8Array;
    try {
      key = await this.#stateKey();
    } catch (err) {
      return { kind: "error", reason: err instanceof Error ? err.message : String(err) };
    }
    const data = configMap?.data as Record<string, unknown> | undefined;
    const { namespace, source } = this.#options;
    let opened: OpenedState = openState(data, key, stateBinding(namespace, source.repository), this.#last);
    const text = opened.kind === "valid" ? opened.text : undefined;
    if (opened.kind === "valid" && this.#written !== undefined && text !== this.#written) {
      opened = {
        kind: "refused",
        reason: "it changed since this leader wrote it (an older state put back?)",
      };
    }
    await this.#markRefused(configMap, opened.kind === "refused" ? opened.reason : undefined);
    if (opened.kind === "refused") {
      const seen = JSON.stringify(data ?? null);
      if (this.#refusedText !== seen) {
        this.#refusedText = seen;
        this.#options.log.error(
          { reason: opened.reason },
          "the rollout state is refused; every change waits",
        );
        void this.#options.events.record(
          this.#stateObject(),
          "Warning",
          "RolloutStateRefused",
          `the rollout state is refused: ${opened.reason}; every change waits until the ConfigMap is deleted`,
        );
      }
      return opened;
    }
    this.#refusedText = undefined;
    if (opened.kind === "valid" && opened.mac !== this.#last) {
      // The state stored after the last one recorded (its writer stopped before recording it), or the first
      // since the chain began: recorded now, before anything is decided on it, so it cannot be put back later.
      try {
        await this.#recordLast(opened.mac);
      } catch (err) {
        return { kind: "error", reason: `the last state cannot be recorded (${String(err)})` };
      }
    }
    // From here on this leader vouches for the state: a different text read back was written by someone else.
    if (opened.kind === "valid") this.#written = text;
    if (opened.kind === "none" && opened.legacy) {
      this.#options.log.info(
        "the rollout state was written by an older knative-fleet; the rollout starts over",
      );
    }
    return { kind: "ready", state: opened.kind === "valid" ? opened.state : undefined, text };
  }

  /**
   * Says on the state ConfigMap why it is refused (for `knative-fleet status`, which holds no key), and
   * takes that back once the state is accepted. Written only when it changes.
   */
  async #markRefused(configMap: KubeObject | undefined, reason: string | undefined): Promise<void> {
    const have = configMap?.metadata.annotations?.[ROLLOUT_REFUSED_ANNOTATION];
    if (configMap === undefined || have === reason) return;
    const { hub, namespace, log } = this.#options;
    await hub
      .mergePatch("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP, {
        metadata: { annotations: { [ROLLOUT_REFUSED_ANNOTATION]: reason ?? null } },
      })
      .catch((err: unknown) => log.warn({ err: String(err) }, "cannot mark the rollout state as refused"));
  }

  /**
   * The HMAC key from its Secret, made (32 random bytes) when there is none, read once per leader with the
   * last state's HMAC it records.
   */
  async #stateKey(): Promise<Uint8Array> {
    if (this.#key) return this.#key;
    const { hub, namespace } = this.#options;
    const read = async () => {
      const secret = await hub.get("v1", "Secret", namespace, ROLLOUT_KEY_SECRET);
      const data = secret?.data as Record<string, string> | undefined;
      const last = data?.[ROLLOUT_KEY_SECRET_LAST];
      this.#last = last ? Buffer.from(last, "base64").toString("utf8") : undefined;
      const encoded = data?.[ROLLOUT_KEY_SECRET_KEY];
      return encoded === undefined ? undefined : Buffer.from(encoded, "base64");
    };
    let key = await read();
    if (key === undefined) {
      // Not forced: a key another writer owns is a conflict, never overwritten (it would void the state).
      await hub.apply(
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: ROLLOUT_KEY_SECRET, namespace },
          type: "Opaque",
          data: { [ROLLOUT_KEY_SECRET_KEY]: randomBytes(32).toString("base64") },
        },
        { force: false },
      );
      key = await read();
    }
    if (key === undefined || key.length < 16) {
      throw new Error(`Secret ${namespace}/${ROLLOUT_KEY_SECRET} has no key of at least 16 bytes`);
    }
    this.#key = key;
    return key;
  }

  /**
   * The updates that put CRs back on their baseline: the content is read from Git at the baseline's commit
   * (placements expanded against today's inventory) and must hash to the baseline's digest; what cannot be
   * re-derived is reported once and left as it is.
   */
  async #reverts(outcome: GateOutcome, events: RolloutEvent[]): Promise<ApplyStep[]> {
    const models = new Map<string, Promise<FleetModel>>();
    const steps: ApplyStep[] = [];
    for (const request of outcome.reverts) {
      const { to, resource, cluster } = request;
      const key = formatIdentity(resource);
      let result: RevertResult;
      try {
        if (!models.has(to.commit)) models.set(to.commit, this.#options.modelAt(to.commit));
        result = revertStep(request, await models.get(to.commit)!, this.#options.source);
      } catch (err) {
        result = {
          failure: `commit ${to.commit.slice(0, 12)} cannot be read (${String(err)})`,
          lasting: false,
        };
      }
      if ("failure" in result) {
        if (result.lasting) outcome.state.crs[key]!.revertFailed = to.hash;
        events.push({
          resource,
          type: "Warning",
          reason: "RolloutRevertFailed",
          message: `${key} on ${cluster} cannot go back to ${to.commit.slice(0, 12)}: ${result.failure}`,
        });
        continue;
      }
      events.push({
        resource,
        type: "Warning",
        reason: "RolloutReverted",
        message: `${outcome.state.halt ? `halted in wave ${outcome.state.halt.wave}; ` : ""}${key} on ${cluster} goes back to ${to.commit.slice(0, 12)}, the content of the last completed rollout`,
      });
      steps.push(result.step);
    }
    return steps;
  }

  /**
   * Stores the state in place of the last one, then records it as the last in the key Secret: a leader that
   * stops between the two leaves a state its successor still accepts (it names the last one recorded).
   */
  async #store(state: RolloutState, text: string): Promise<void> {
    const { hub, namespace, source } = this.#options;
    const key = await this.#stateKey();
    const data = sealState(state, key, stateBinding(namespace, source.repository), this.#last ?? "");
    this.#written = undefined; // unknown until the write is known to have landed
    await hub.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace },
      data,
    });
    this.#written = text;
    await this.#recordLast(data[ROLLOUT_STATE_MAC_KEY]!);
  }

  /** Records in the key Secret the HMAC of the last state stored (the only write there after its key). */
  async #recordLast(mac: string): Promise<void> {
    const { hub, namespace } = this.#options;
    await hub.mergePatch("v1", "Secret", namespace, ROLLOUT_KEY_SECRET, {
      data: { [ROLLOUT_KEY_SECRET_LAST]: Buffer.from(mac, "utf8").toString("base64") },
    });
    this.#last = mac;
  }

  /**
   * The waiting annotation on each hub CR this repository mirrors: set to why it waits, cleared when its
   * wave opens. A merge patch of that one annotation: the mirror's server-side apply does not own it.
   */
  async #markWaiting(live: readonly KubeObject[], waiting: ReadonlyMap<string, string>, commit: string) {
    for (const object of live) {
      if (object.metadata.deletionTimestamp) continue;
      const identity = identityOf(object);
      const key = formatIdentity(identity);
      const want = waiting.get(key);
      const have = object.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION];
      if (want === have) continue;
      try {
        await this.#options.hub.mergePatch(
          OPERATOR_API_VERSION,
          identity.kind,
          identity.namespace,
          identity.name,
          {
            metadata: { annotations: { [ROLLOUT_WAITING_ANNOTATION]: want ?? null } },
          },
        );
        if (want !== undefined) {
          void this.#options.events.record(
            this.#involved(identity),
            "Normal",
            "RolloutWaiting",
            `keeps its last applied spec; ${want} (head ${commit.slice(0, 12)})`,
          );
        }
      } catch (err) {
        this.#options.log.warn({ resource: key, err: String(err) }, "cannot mark a waiting CR");
      }
    }
  }

  #involved(resource: ResourceIdentity | undefined): InvolvedObject {
    if (resource === undefined) return this.#stateObject();
    const { kind, namespace, name } = resource;
    return { apiVersion: OPERATOR_API_VERSION, kind, metadata: { namespace, name } };
  }

  #stateObject(): InvolvedObject {
    return {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: this.#options.namespace },
    };
  }

  /**
   * While a rollout is under way, paused, has deletions waiting or cannot be decided (a refused state), look
   * again after the check interval; a halted or complete one waits for Git.
   */
  #schedule(again: boolean): void {
    clearTimeout(this.#timer);
    if (this.#stopped || !again) return;
    this.#timer = setTimeout(() => {
      if (!this.#stopped) this.#options.onDue();
    }, this.#options.checkIntervalMs);
    this.#timer.unref();
  }
}

function waitingOf(steps: readonly ApplyStep[]): Map<string, string> {
  return new Map(
    steps.flatMap((step): [string, string][] =>
      step.action === "waiting" ? [[formatIdentity(step), step.reason]] : [],
    ),
  );
}

function waitingStep(step: ApplyStep, reason: string): ApplyStep {
  if (step.action !== "create" && step.action !== "update") return step;
  const { object: _held, ...outcome } = step;
  return { ...outcome, action: "waiting", reason };
}
