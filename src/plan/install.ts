import type { KnativeResource } from "../api/knative.ts";
import { planApply } from "../apply/plan.ts";
import { anchorRef, installNamespaceRef } from "../install/identity.ts";
import type { InstallState } from "../install/state.ts";
import { type KubeObject, type ObjectRef, refOf } from "../kube/object.ts";

export interface ObjectPlan {
  /** The anchor and the install namespace when they do not exist yet, then the objects to create. */
  create: ObjectRef[];
  update: { desired: KubeObject; current: KubeObject }[];
  /** Applied before, no longer desired: the apply prunes them. CRDs never are. */
  prune: ObjectRef[];
}

/** What one apply pass does, from `planApply`, plus the anchor and namespace the apply creates first. */
export function planObjects(
  resource: KnativeResource,
  desired: readonly KubeObject[],
  state: InstallState,
): ObjectPlan {
  const plan = planApply(desired, state.objects, state.inventory);
  return {
    create: [
      ...(state.namespaceExists ? [] : [installNamespaceRef(resource)]),
      ...(state.anchorExists ? [] : [anchorRef(resource)]),
      ...plan.create.map(refOf),
    ],
    update: plan.update.map(({ desired, live }) => ({ desired, current: live })),
    prune: plan.prune,
  };
}
