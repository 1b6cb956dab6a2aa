import type { FleetFile } from "../../../src/fleet/file-text.ts";
import { buildFleetModel, type FleetModel } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { decideApplies } from "../../../src/mirror/decide.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { RolloutStage } from "../../../src/rollout/stage.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crFile, crObject } from "../../support/fleet-files.ts";
import { sourceAt } from "../mirror/support.ts";

// What a fleet's rollout policy, broken or not, lets through: the rollout stage as the service runs it, on
// an in-memory hub that holds two CRs (c1-serving, c2-serving) at an older version.

export const NS = "knative-fleet";

/** The two CRs' files at `version`. */
export const twoCrs = (version: string): FleetFile[] =>
  ["c1", "c2"].map((name) => crFile({ name: `${name}-serving`, cluster: name, version }));

/** The two CRs on the hub at `version`, as the mirror applies them. */
export function hubAt(version: string): KubeObject[] {
  const { resources } = buildFleetModel(twoCrs(version), { defaultNamespace: NS });
  return decideApplies(resources, sourceAt("1".repeat(40)), []).flatMap((step) =>
    "object" in step ? [step.object] : [],
  );
}

/** The rollout stage on an in-memory hub whose ClusterProfiles are c1 and c2. */
export function rolloutStage(): RolloutStage {
  const kube = new FakeKube().serveKindsOf([
    crObject({ name: "x", cluster: "c1" }),
    crObject({ kind: "KnativeEventing", name: "y", cluster: "c1" }),
  ]);
  return new RolloutStage({
    hub: kube.client,
    namespace: NS,
    source: { repository: sourceAt("").repository, branch: "main" },
    modelAt: (commit) => Promise.reject(new Error(`no commit ${commit} in this test`)),
    inventory: () =>
      ["c1", "c2"].map((name) => ({
        namespace: "fleet-system",
        name,
        labels: { env: "prod" },
        properties: new Map(),
      })),
    events: new EventRecorder({ client: kube.client, component: "test", log: silentLogger }),
    log: silentLogger,
    checkIntervalMs: 60_000,
    onDue: () => {},
  });
}

/** What the stage's gate does with each CR of `model` the mirror would write to `hub`. */
export async function gatedActions(stage: RolloutStage, model: FleetModel, hub: readonly KubeObject[]) {
  const steps = decideApplies(model.resources, sourceAt("2".repeat(40)), hub);
  const gated = await stage.gate(await stage.open(model, "2".repeat(40)), steps, hub, []);
  return gated.steps.map((step) => step.action);
}
