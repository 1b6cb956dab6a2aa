import { stringify } from "yaml";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { buildFleetModel, type FleetModel } from "../../../src/fleet/model.ts";
import { formatIdentity } from "../../../src/fleet/parse.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { type ApplyStep, planApplies } from "../../../src/mirror/plan.ts";
import type { InventoryCluster } from "../../../src/placement/inventory.ts";
import { type GateInput, type GateOutcome, gateApplies, revisionOf } from "../../../src/rollout/gate.ts";
import type { RolloutState } from "../../../src/rollout/state.ts";
import { crFile } from "../../support/fleet-files.ts";

export const REPOSITORY = "https://git.example/platform/fleet.git";

/** A KnativeRollout file's text with the given spec. */
export const rolloutText = (spec: Record<string, unknown>): string =>
  stringify({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeRollout",
    metadata: { name: "default" },
    spec,
  });

export const cluster = (name: string, labels: Record<string, string> = {}): InventoryCluster => ({
  namespace: "fleet-system",
  name,
  labels,
  properties: new Map(),
});

/** The fleet of the tests: one KnativeServing per cluster, `<cluster>-serving`, all at `version`. */
export function fleetModel(
  clusters: readonly string[],
  rollout: Record<string, unknown> | undefined,
  version: (cluster: string) => string | Record<string, unknown>,
): FleetModel {
  const files: FleetFile[] = clusters.map((name) => {
    const wanted = version(name);
    return crFile({
      name: `${name}-serving`,
      cluster: name,
      ...(typeof wanted === "string" ? { version: wanted } : { spec: wanted }),
    });
  });
  if (rollout) files.push({ path: "rollout.yaml", text: rolloutText(rollout) });
  return buildFleetModel(files, { defaultNamespace: "knative-fleet" });
}

/**
 * A hub that holds CRs like the API server does (generation bumps on a spec change) and whose controller
 * makes a CR healthy, or not, as the test says.
 */
export class FakeHub {
  readonly objects = new Map<string, KubeObject>();
  state: RolloutState | undefined;
  hubPaused = false;
  applied: string[] = [];

  live(): KubeObject[] {
    return [...this.objects.values()];
  }

  /** One sync: plan, gate, apply what the gate lets through. */
  sync(model: FleetModel, commit: string, now: Date, clusters: readonly InventoryCluster[]): GateOutcome {
    const steps = planApplies(
      model.resources,
      { repository: REPOSITORY, branch: "main", commit },
      this.live(),
    );
    const input: GateInput = {
      spec: model.rollout.policy!.rollout.spec,
      hubPaused: this.hubPaused,
      revision: revisionOf(model.resources),
      commit,
      clusters,
      state: this.state,
      now,
    };
    const outcome = gateApplies(input, steps, this.live());
    for (const step of outcome.steps)
      if (step.action === "create" || step.action === "update") this.write(step);
    this.state = outcome.state;
    return outcome;
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
        conditions: [condition("DeploymentsAvailable", healthy), condition("Ready", healthy)],
      },
    });
  }

  version(cr: string): unknown {
    return (this.objects.get(`KnativeServing knative-fleet/${cr}`)?.spec as { version?: string })?.version;
  }
}
