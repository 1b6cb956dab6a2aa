import { isCrd, type KubeObject, type ObjectRef, objectKey, refKey } from "../kube/object.ts";
import { isUpToDate } from "./compare.ts";

/** What one apply pass will do on a cluster. Pure: the same inputs give the same plan. */
export interface ApplyPlan {
  /** Objects that do not exist (or were deleted by hand) and will be created. */
  create: KubeObject[];
  /** Objects whose live state differs from desired (a changed spec, or drift) and will be applied. */
  update: { desired: KubeObject; live: KubeObject }[];
  /** Objects already up to date: no request is sent for them. */
  unchanged: KubeObject[];
  /** Objects applied before (inventory) that the desired set no longer has. CRDs are never pruned. */
  prune: ObjectRef[];
}

export function planApply(
  desired: readonly KubeObject[],
  live: ReadonlyMap<string, KubeObject>,
  previousInventory: readonly ObjectRef[],
): ApplyPlan {
  const plan: ApplyPlan = { create: [], update: [], unchanged: [], prune: [] };
  const wanted = new Set<string>();
  for (const object of desired) {
    const key = objectKey(object);
    wanted.add(key);
    const current = live.get(key);
    if (!current) plan.create.push(object);
    else if (isUpToDate(object, current)) plan.unchanged.push(object);
    else plan.update.push({ desired: object, live: current });
  }
  for (const ref of previousInventory) {
    if (!wanted.has(refKey(ref)) && !isCrd(ref)) plan.prune.push(ref);
  }
  return plan;
}

export const planIsEmpty = (plan: ApplyPlan): boolean =>
  plan.create.length === 0 && plan.update.length === 0 && plan.prune.length === 0;
