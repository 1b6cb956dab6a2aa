import { KnativeResourceSchema, OPERATOR_API_VERSION } from "../api/knative.ts";
import { ROLLOUT_PAUSED_ANNOTATION, ROLLOUT_WAITING_ANNOTATION } from "../api/labels.ts";
import { inParallel } from "../apply/parallel.ts";
import { approvalKey } from "../fleet/approval-document.ts";
import { formatIdentity, identityOf, type ResourceIdentity, targetOf } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import type { RolloutSpec } from "../fleet/rollout-schema.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import type { ApplyStep, MirrorSource, PruneCandidate } from "../mirror/decide.ts";
import type { EventRecorder, InvolvedObject } from "../observability/events.ts";
import type { Logger } from "../observability/log.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import type { Preflight } from "../preflight/index.ts";
import { commitInMessage } from "../text/commit.ts";
import type { UpgradeChains } from "../upgrade/chain.ts";
import { evaluateGates, type GateOptions } from "../verify/evaluate.ts";
import { readSecretKey } from "../verify/secret.ts";
import type { GatedSteps, OpenedRollout, RolloutReport } from "./edge.ts";
import { gateApplies, gatePrunes, holdStep, type RolloutEvent } from "./gate.ts";
import { revertsFor, withReverts } from "./revert.ts";
import { historyOf, ROLLOUT_STATE_CONFIGMAP, type RolloutState, rolloutVerdict, stateText } from "./state.ts";
import { SealedStateStore, stateObject } from "./state-store.ts";
import { crsToVerify, verify } from "./verification.ts";
import { clusterWaves } from "./waves.ts";
import { isWrite } from "./weigh.ts";

interface RolloutStageOptions {
  hub: KubeClient;
  /** knative-fleet's hub namespace: the state ConfigMap's (and, by default, its key Secret's). */
  namespace: string;
  /** The key Secret's namespace (service config rollout.keyNamespace): one of its own, out of reach of `edit`. */
  keyNamespace?: string;
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
  /** The Prometheus a policy's prometheus gate queries when it names no url of its own. */
  prometheusUrl?: string;
  /** Whether a spoke is ready for a change before it goes out (src/preflight); none: every spoke is. */
  preflight?: Preflight;
}

/** How many clusters' preflights run at once (each cluster's facts are read once per the preflight's TTL). */
const PREFLIGHTS_AT_ONCE = 16;

/**
 * The service's edge of the rollout: reads the state, its key and the hub pause before a sync, gives the
 * mirror the gate, re-reads from Git what a revert puts back, and stores the state (one write, only when it
 * changed, before the mirror writes what it lets through); afterwards marks the CRs that wait (an
 * annotation, set or cleared only when it changes, with an Event) and schedules the next check.
 */
export class RolloutStage {
  readonly #options: RolloutStageOptions;
  readonly #store: SealedStateStore;
  readonly #gateOptions: GateOptions;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: RolloutStageOptions) {
    this.#options = options;
    const { hub, namespace, keyNamespace = namespace, source, events, log, prometheusUrl } = options;
    // A gate's token is read from knative-fleet's namespace, from a Secret labelled for it.
    this.#gateOptions = {
      ...(prometheusUrl && { prometheusUrl }),
      readSecret: (ref) => readSecretKey(hub, namespace, ref),
    };
    this.#store = new SealedStateStore({
      hub,
      namespace,
      keyNamespace,
      repository: source.repository,
      events,
      log,
    });
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
    const opened = spec && clusters ? await this.#store.open(configMap) : undefined;
    const holdAll =
      spec === undefined
        ? `the rollout policy (${failedPaths.join(", ")}) cannot be read; changes wait until it is fixed`
        : clusters === undefined
          ? "the ClusterProfile inventory is not read yet; changes wait for it"
          : opened?.kind === "error"
            ? `the rollout state's key cannot be read (${opened.reason}); changes wait for it`
            : opened?.kind === "keyRefused"
              ? `${opened.reason}; every change waits`
              : opened?.kind === "refused"
                ? rolloutVerdict({
                    phase: "Refused",
                    refused: { configMap: `${namespace}/${ROLLOUT_STATE_CONFIGMAP}`, reason: opened.reason },
                  }).message
                : undefined;
    return {
      commit,
      now: (this.#options.now ?? (() => new Date()))(),
      ...(spec && { spec }),
      hubPaused,
      paused: hubPaused || spec?.paused === true,
      ...(clusters && { clusters }),
      ...(holdAll !== undefined && { holdAll }),
      refused: opened?.kind === "refused" || opened?.kind === "keyRefused",
      ...(opened?.kind === "ready" && opened.state && { state: opened.state }),
      ...(opened?.kind === "ready" && opened.text !== undefined && { stateText: opened.text }),
      startedOver: opened?.kind === "ready" && opened.startedOver !== undefined,
      frozen: model.files.filter((file) => file.status === "failed").flatMap((file) => file.declares),
      approvals: new Set(model.approvals.map((approval) => approvalKey(approval.commit, approval.wave))),
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
    upgrades?: UpgradeChains,
  ): Promise<GatedSteps> {
    const chainsUnderWay = (upgrades?.crs.length ?? 0) > 0;
    if (opened === undefined) return { steps: [...steps], revertEvents: [], chainsUnderWay };
    const { spec, clusters, holdAll } = opened;
    if (holdAll !== undefined || spec === undefined || clusters === undefined) {
      return { steps: steps.map((step) => holdStep(step, holdAll ?? "")), revertEvents: [], chainsUnderWay };
    }
    const { commit, hubPaused, state, frozen, now, startedOver, approvals } = opened;
    const failing = await this.#verify(spec, clusters, state, live);
    const blocked = await this.#preflight(steps);
    const outcome = gateApplies(
      {
        spec,
        hubPaused,
        commit,
        clusters,
        state,
        frozen,
        held,
        now,
        ...(upgrades && { upgrades: upgrades.steps }),
        failing,
        blocked,
        approvals,
        ...(startedOver && { startedOver }),
      },
      steps,
      live,
    );
    const reverts = await revertsFor(outcome, this.#options.modelAt, this.#options.source);
    const text = stateText(outcome.state);
    if (text !== opened.stateText) await this.#store.store(outcome.state, text);
    return {
      steps: withReverts(outcome.steps, reverts.steps),
      outcome,
      revertEvents: reverts.events,
      chainsUnderWay,
    };
  }

  /** The verification gates on the CRs Ready on a change of this rollout: the failing ones, with why. */
  async #verify(
    spec: RolloutSpec,
    clusters: readonly InventoryCluster[],
    state: RolloutState | undefined,
    live: readonly KubeObject[],
  ): Promise<Map<string, string>> {
    const crs = crsToVerify(spec, clusters, state, live);
    if (crs.length === 0) return new Map();
    const { failing, cost } = await verify(crs, (cluster, options) =>
      evaluateGates(spec.gates ?? [], cluster, { ...this.#gateOptions, ...options }),
    );
    this.#options.log.info({ ...cost, failing: Object.fromEntries(failing) }, "verification gates evaluated");
    return failing;
  }

  /**
   * The preflight of each change to go out, by CR: why its cluster is not ready for it (the error findings).
   * The gate holds only new content this way: a revert or a repair goes out whatever the preflight says.
   */
  async #preflight(steps: readonly ApplyStep[]): Promise<Map<string, string>> {
    const blocked = new Map<string, string>();
    const { preflight } = this.#options;
    if (preflight === undefined) return blocked;
    const writes = steps.filter(isWrite);
    await inParallel(writes, PREFLIGHTS_AT_ONCE, async (step) => {
      const desired = KnativeResourceSchema.safeParse(step.object);
      if (!desired.success) return; // the admission refuses it before it is written
      const result = await preflight.check(targetOf(step.object), desired.data);
      const errors = result.findings.filter((finding) => finding.severity === "error");
      if (errors.length > 0) {
        blocked.set(formatIdentity(step), errors.map((e) => `${e.reason}: ${e.message}`).join("; "));
      }
    });
    return blocked;
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
    if (opened === undefined) {
      // Without a policy a chain moves on once its CRs are Ready on their step: look again for that.
      this.#schedule(gated.chainsUnderWay === true);
      return undefined;
    }
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
    // A completed step of an upgrade chain opens the next one at the next sync.
    const nextStep = state.phase === "Complete" && gated.chainsUnderWay === true;
    this.#schedule(state.phase === "Progressing" || opened.paused || deletionsWait || nextStep);
    return {
      phase: state.phase,
      commit: state.commit,
      ...(outcome.openWave && {
        wave: outcome.openWave,
        opened: state.waves[outcome.openWave]?.opened !== undefined,
      }),
      paused: opened.paused,
      ...(state.halt ? { halt: state.halt } : {}),
      ...(outcome.awaitingApproval && { approval: outcome.awaitingApproval }),
      ...reverted(revertEvents),
      waiting: waiting.size,
      history: historyOf(state),
      ...(opened.spec && {
        clusterWaves: clusterWaves(
          opened.spec,
          live.flatMap((cr) => targetOf(cr) ?? []),
          opened.clusters ?? [],
        ),
      }),
    };
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
            `keeps its last applied spec; ${want} (head ${commitInMessage(commit)})`,
          );
        }
      } catch (err) {
        this.#options.log.warn({ resource: key, err: String(err) }, "cannot mark a waiting CR");
      }
    }
  }

  #involved(resource: ResourceIdentity | undefined): InvolvedObject {
    if (resource === undefined) return stateObject(this.#options.namespace);
    const { kind, namespace, name } = resource;
    return { apiVersion: OPERATOR_API_VERSION, kind, metadata: { namespace, name } };
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

/** The CRs a sync's reverts put back, for the report (and the notification). */
function reverted(events: readonly RolloutEvent[]): { reverted?: string[] } {
  const done = events.flatMap((event) =>
    event.reason === "RolloutReverted" && event.resource ? [formatIdentity(event.resource)] : [],
  );
  return done.length > 0 ? { reverted: done } : {};
}

function waitingOf(steps: readonly ApplyStep[]): Map<string, string> {
  return new Map(
    steps.flatMap((step): [string, string][] =>
      step.action === "waiting" ? [[formatIdentity(step), step.reason]] : [],
    ),
  );
}
