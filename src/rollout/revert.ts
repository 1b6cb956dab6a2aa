import { DESIRED_HASH_ANNOTATION } from "../api/labels.ts";
import { formatIdentity } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import { type ApplyStep, type MirrorSource, mirroredObject } from "../mirror/decide.ts";
import { commitInMessage } from "../text/commit.ts";
import { atVersion } from "../upgrade/chain.ts";
import type { GateOutcome, RevertRequest, RolloutEvent } from "./gate.ts";

// A revert re-derives the content it puts back from Git: the state keeps only the baseline's digest and
// commit, so nothing a ConfigMap writer could place in the state is ever applied as it is.

/** The update that puts a CR back on its baseline, or why it cannot (`lasting`: retrying will not help). */
type RevertResult = { step: ApplyStep & { action: "update" } } | { failure: string; lasting: boolean };

/**
 * The revert of one CR from the fleet model of the baseline's commit (placements expanded): the CR as the
 * mirror would have written it from that commit, which must hash to the baseline's digest.
 */
export function revertStep(
  request: RevertRequest,
  model: FleetModel,
  source: Pick<MirrorSource, "repository" | "branch">,
): RevertResult {
  const { to, resource, cluster } = request;
  const key = formatIdentity(resource);
  const commit = commitInMessage(to.commit);
  const desired = model.resources.find(
    ({ resource: { kind, metadata } }) =>
      formatIdentity({ kind, namespace: metadata.namespace, name: metadata.name }) === key,
  );
  if (desired === undefined) return { failure: `commit ${commit} declares no valid ${key}`, lasting: true };
  // A step of an upgrade chain is the commit's CR with the version the step gave it.
  const object = mirroredObject(atVersion(desired, to.version), { ...source, commit: to.commit });
  if (object.metadata.annotations?.[DESIRED_HASH_ANNOTATION] !== to.hash) {
    return {
      failure: `what commit ${commit} gives it today differs from what was healthy (the inventory changed what its placement selects or overrides)`,
      lasting: true,
    };
  }
  return {
    step: {
      ...resource,
      path: desired.path,
      action: "update",
      reason: `reverted to ${commit}, the last completed rollout's content on ${cluster}`,
      object,
    },
  };
}

/** The gate's steps with each CR that is put back on its baseline updated to it instead. */
export function withReverts(steps: readonly ApplyStep[], reverts: readonly ApplyStep[]): ApplyStep[] {
  const byKey = new Map(reverts.map((step) => [formatIdentity(step), step]));
  const merged = steps.map((step) => {
    const revert = byKey.get(formatIdentity(step));
    byKey.delete(formatIdentity(step));
    return revert ?? step;
  });
  // A CR a failed file holds has no step of its own.
  return [...merged, ...byKey.values()];
}

/**
 * The updates that put the outcome's CRs back on their baselines, each re-derived by `revertOne`, and the
 * Events saying so; a revert that cannot be made is reported and left as it is (marked in the state when
 * retrying will not help, so it is reported once).
 */
export function revertsOf(
  outcome: GateOutcome,
  revertOne: (request: RevertRequest) => RevertResult,
): { steps: ApplyStep[]; events: RolloutEvent[] } {
  const steps: ApplyStep[] = [];
  const events: RolloutEvent[] = [];
  for (const request of outcome.reverts) {
    const { to, resource, cluster } = request;
    const key = formatIdentity(resource);
    const result = revertOne(request);
    if ("failure" in result) {
      if (result.lasting) outcome.state.crs[key]!.revertFailed = to.hash;
      events.push({
        resource,
        type: "Warning",
        reason: "RolloutRevertFailed",
        message: `${key} on ${cluster} cannot go back to ${commitInMessage(to.commit)}: ${result.failure}`,
      });
      continue;
    }
    events.push({
      resource,
      type: "Warning",
      reason: "RolloutReverted",
      message: `${outcome.state.halt ? `halted in wave ${outcome.state.halt.wave}; ` : ""}${key} on ${cluster} goes back to ${commitInMessage(to.commit)}, the content of the last completed rollout`,
    });
    steps.push(result.step);
  }
  return { steps, events };
}

/**
 * `revertsOf` with each baseline's commit read from Git through `modelAt` (once per commit): a commit that
 * cannot be read fails its reverts for this sync only.
 */
export async function revertsFor(
  outcome: GateOutcome,
  modelAt: (commit: string) => Promise<FleetModel>,
  source: Pick<MirrorSource, "repository" | "branch">,
): Promise<{ steps: ApplyStep[]; events: RolloutEvent[] }> {
  const models = new Map<string, FleetModel | { unreadable: string }>();
  for (const { to } of outcome.reverts) {
    if (models.has(to.commit)) continue;
    models.set(to.commit, await modelAt(to.commit).catch((err: unknown) => ({ unreadable: String(err) })));
  }
  return revertsOf(outcome, (request) => {
    const model = models.get(request.to.commit)!;
    if ("unreadable" in model) return cannotRead(request, model.unreadable);
    try {
      return revertStep(request, model, source);
    } catch (err) {
      return cannotRead(request, String(err));
    }
  });
}

const cannotRead = (request: RevertRequest, why: string): RevertResult => ({
  failure: `commit ${commitInMessage(request.to.commit)} cannot be read (${why})`,
  lasting: false,
});
