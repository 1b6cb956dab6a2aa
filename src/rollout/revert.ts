import { DESIRED_HASH_ANNOTATION } from "../api/labels.ts";
import { formatIdentity } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import { type ApplyStep, type MirrorSource, mirroredObject } from "../mirror/decide.ts";
import type { RevertRequest } from "./gate.ts";

// A revert re-derives the content it puts back from Git: the state keeps only the baseline's digest and
// commit, so nothing a ConfigMap writer could place in the state is ever applied as it is.

/** The update that puts a CR back on its baseline, or why it cannot (`lasting`: retrying will not help). */
export type RevertResult = { step: ApplyStep & { action: "update" } } | { failure: string; lasting: boolean };

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
  const commit = to.commit.slice(0, 12);
  const desired = model.resources.find(
    ({ resource: { kind, metadata } }) =>
      formatIdentity({ kind, namespace: metadata.namespace, name: metadata.name }) === key,
  );
  if (desired === undefined) return { failure: `commit ${commit} declares no valid ${key}`, lasting: true };
  const object = mirroredObject(desired, { ...source, commit: to.commit });
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
