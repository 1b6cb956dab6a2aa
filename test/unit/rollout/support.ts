import { approvalKey } from "../../../src/fleet/approval-document.ts";
import { formatIdentity, type ResourceIdentity } from "../../../src/fleet/identity.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { buildFleetModel, type FleetModel } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { type ApplyStep, decideApplies } from "../../../src/mirror/decide.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { InventoryCluster } from "../../../src/placement/inventory.ts";
import { type GateOutcome, gateApplies } from "../../../src/rollout/gate.ts";
import { revertStep, revertsOf, withReverts } from "../../../src/rollout/revert.ts";
import { RolloutStage } from "../../../src/rollout/stage.ts";
import { type RolloutState, RolloutStateSchema } from "../../../src/rollout/state.ts";
import type { GateInput } from "../../../src/rollout/weigh.ts";
import { chainUpgrades, upgradeMemory } from "../../../src/upgrade/chain.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import {
  cluster,
  crFile,
  crObject,
  TEST_REPOSITORY as REPOSITORY,
  rolloutText,
} from "../../support/fleet-files.ts";
import { syncInto } from "../../support/sync.ts";

// The shared fleet fixtures (test/support/fleet-files.ts) these tests build on.
export { cluster, REPOSITORY, rolloutText };

/**
 * The fleet of the tests: one KnativeServing per cluster, `<cluster>-serving`, all at `version`; a cluster
 * whose version is `null` has a file that fails validation.
 */
export function fleetFiles(
  clusters: readonly string[],
  rollout: Record<string, unknown> | undefined,
  version: (cluster: string) => string | Record<string, unknown> | null,
): FleetFile[] {
  const files: FleetFile[] = clusters.map((name) => {
    const wanted = version(name);
    if (wanted === null) {
      return crFile({ name: `${name}-serving`, cluster: name, spec: { version: 1.22 } as never });
    }
    return crFile({
      name: `${name}-serving`,
      cluster: name,
      ...(typeof wanted === "string" ? { version: wanted } : { spec: wanted }),
    });
  });
  if (rollout) files.push({ path: "rollout.yaml", text: rolloutText(rollout) });
  return files;
}

/** The fleet model of those files. */
export const fleetModel = (...args: Parameters<typeof fleetFiles>): FleetModel =>
  buildFleetModel(fleetFiles(...args), { defaultNamespace: "knative-fleet" });

/**
 * A hub that holds CRs like the API server does (generation bumps on a spec change) and whose controller
 * makes a CR healthy, or not, as the test says. It keeps every commit's model, as Git would give it back to
 * a revert.
 */
export class FakeHub {
  readonly objects = new Map<string, KubeObject>();
  readonly commits = new Map<string, FleetModel>();
  state: RolloutState | undefined;
  hubPaused = false;
  /** What the stage learns from the spokes before the gate: preflight refusals, failing verification gates. */
  checks: Pick<GateInput, "blocked" | "failing" | "approvals"> = {};
  applied: string[] = [];

  live(): KubeObject[] {
    return [...this.objects.values()];
  }

  /** One sync: plan, gate, re-derive reverts from the commits seen, apply what the gate lets through. */
  sync(
    model: FleetModel,
    commit: string,
    now: Date,
    clusters: readonly InventoryCluster[],
    held: readonly ResourceIdentity[] = [],
  ): GateOutcome {
    this.commits.set(commit, model);
    const source = { repository: REPOSITORY, branch: "main", commit };
    // As the sync does: a version several minors ahead is the next step of its upgrade chain.
    const upgrades = chainUpgrades(model.resources, this.live(), upgradeMemory(true, this.state));
    const steps = decideApplies(upgrades.resources, source, this.live());
    const input: GateInput = {
      spec: model.rollout.policy!.rollout.spec,
      hubPaused: this.hubPaused,
      commit,
      clusters,
      state: this.state,
      frozen: model.files.filter((f) => f.status === "failed").flatMap((f) => f.declares),
      held,
      now,
      upgrades: upgrades.steps,
      // As the stage does: the approvals of the commit's valid files.
      approvals: new Set(model.approvals.map((a) => approvalKey(a.commit, a.wave))),
      ...this.checks,
    };
    const outcome = gateApplies(input, steps, this.live());
    const reverts = revertsOf(outcome, (request) =>
      revertStep(request, this.commits.get(request.to.commit) ?? model, source),
    ).steps;
    for (const step of withReverts(outcome.steps, reverts))
      if (step.action === "create" || step.action === "update") this.write(step);
    // What a new leader would read back: the stored JSON.
    this.state = RolloutStateSchema.parse(JSON.parse(JSON.stringify(outcome.state)));
    return { ...outcome, steps: withReverts(outcome.steps, reverts) };
  }

  write(step: ApplyStep & { object: KubeObject }): void {
    const key = formatIdentity(step);
    const previous = this.objects.get(key);
    const generation =
      previous === undefined
        ? 1
        : JSON.stringify(previous.spec) === JSON.stringify(step.object.spec)
          ? Number(previous.metadata.generation ?? 1)
          : Number(previous.metadata.generation ?? 1) + 1;
    this.objects.set(key, {
      ...step.object,
      metadata: { ...step.object.metadata, generation },
      status: previous?.status,
    });
    this.applied.push(key);
  }

  /** The controller reports on a CR: healthy, or DeploymentsAvailable=False with a reason. */
  report(cr: string, healthy: boolean): void {
    const key = `KnativeServing knative-fleet/${cr}`;
    const object = this.objects.get(key)!;
    const condition = (type: string, ok: boolean) => ({
      type,
      status: ok ? "True" : "False",
      ...(ok ? {} : { reason: "NotReady", message: "waiting for deployments: controller" }),
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    this.objects.set(key, {
      ...object,
      status: {
        observedGeneration: object.metadata.generation,
        // What the controller installed: the version asked for, once it is healthy on it.
        ...(healthy
          ? { version: (object.spec as { version?: string }).version }
          : { version: (object.status as { version?: string } | undefined)?.version }),
        conditions: [condition("DeploymentsAvailable", healthy), condition("Ready", healthy)],
      },
    });
  }

  version(cr: string): unknown {
    return (this.objects.get(`KnativeServing knative-fleet/${cr}`)?.spec as { version?: string })?.version;
  }
}

type StageOptions = ConstructorParameters<typeof RolloutStage>[0];

/** A hub that serves the Knative kinds and Events (the stage's own writes), nothing on it yet. */
export function hubWithKnativeKinds(): FakeKube {
  return new FakeKube().serveKindsOf([
    crObject({ name: "x", cluster: "c1" }),
    crObject({ kind: "KnativeEventing", name: "y", cluster: "c1" }),
    { apiVersion: "v1", kind: "Event", metadata: {} },
  ]);
}

/**
 * The rollout stage on `kube` as the service builds it, for four clusters c1..c4, with the options a test
 * sets.
 */
export function stageOn(kube: FakeKube, options: Partial<StageOptions> = {}): RolloutStage {
  const log = options.log ?? silentLogger;
  return new RolloutStage({
    hub: kube.client,
    namespace: "knative-fleet",
    source: { repository: REPOSITORY, branch: "main" },
    inventory: () => [cluster("c1"), cluster("c2"), cluster("c3"), cluster("c4")],
    modelAt: () => Promise.reject(new Error("no revert here")),
    events: new EventRecorder({ client: kube.client, component: "test", log }),
    log,
    checkIntervalMs: 20,
    onDue: () => {},
    ...options,
  });
}

/**
 * A sync of a commit's files into `kube` through the stage `stage()` gives (a getter: a test swaps in a new
 * leader's stage), with the stage's report.
 */
export function syncThrough(kube: FakeKube, stage: () => RolloutStage) {
  return async (files: FleetFile[], commit: string) => {
    const result = await syncInto(kube.client, {
      files,
      namespace: "knative-fleet",
      commit,
      repository: REPOSITORY,
      rollout: stage(),
    });
    return { result, report: result.rollout };
  };
}
