import type { KnativeResource } from "../api/knative.ts";
import { DRIFT_MODE_ANNOTATION } from "../api/labels.ts";
import {
  type ApplyMode,
  type ApplyResult,
  type ApplySet,
  type ApplyState,
  diffAgainstLive,
  ownerOfObjects,
  readState,
  runApplySet,
  stampForApply,
} from "../apply/engine.ts";
import type { KubeClient } from "../kube/client.ts";
import { type KubeObject, nameOf, type ObjectRef, objectKey, refOf } from "../kube/object.ts";
import { buildAnchor, hubOwnerRef, installNamespace, ownerOf, ownershipLabels } from "./identity.ts";

type InstallFrame = Omit<ApplySet, "client" | "concurrency" | "crdTimeoutMs" | "onPhase" | "onCrdWatchError">;

/**
 * A CR's install as the engine sees an apply set: the install namespace (by default the canonical one;
 * the located one for an adopted install, see layout.ts; created with the CR's spec.namespace labels), the
 * CR's ownership labels, the anchor as inventory object, and the hub CR as root owner when it installs on
 * the hub itself. For a hub install the CR's uid comes from `resource`.
 */
function installFrame(resource: KnativeResource, namespace = installNamespace(resource)): InstallFrame {
  const owner = ownerOf(resource);
  return {
    namespace,
    namespaceMetadata: resource.spec.namespace,
    labels: ownershipLabels(owner),
    inventoryObject: (refs) => buildAnchor(owner, namespace, refs),
    rootOwner: hubOwnerRef(resource),
    keepDrift: resource.metadata.annotations?.[DRIFT_MODE_ANNOTATION] === "report",
    // Knative reads its config-* ConfigMaps whole: a key added by hand changes its behaviour as much as an edit.
    watchAddedKeys: (object) => object.kind === "ConfigMap" && nameOf(object).startsWith("config-"),
  };
}

/** One pass of the CR's rendered objects on its cluster: the reconcile runs "apply", `plan` "dry-run". */
export function applyInstall(
  client: KubeClient,
  resource: KnativeResource,
  rendered: readonly KubeObject[],
  options: {
    mode: ApplyMode;
    concurrency: number;
    crdTimeoutMs?: number;
    namespace?: string;
    onPhase?: ApplySet["onPhase"];
    onCrdWatchError?: ApplySet["onCrdWatchError"];
  },
): Promise<ApplyResult> {
  const { mode, namespace, ...rest } = options;
  return runApplySet({ ...installFrame(resource, namespace), client, ...rest }, rendered, mode);
}

/** The install as it is on the cluster: anchor, inventory, namespace, and its objects of these kinds. */
export function readInstallState(
  client: KubeClient,
  resource: KnativeResource,
  kinds: readonly Pick<ObjectRef, "apiVersion" | "kind">[],
  namespace?: string,
): Promise<ApplyState> {
  return readState({ ...installFrame(resource, namespace), client }, kinds);
}

/**
 * The same pass, dry, over a state held in memory instead of a cluster (an offline plan): the engine's own
 * stamping and decision; the server's answer to an update is taken to be the object sent.
 */
export function dryRunOver(
  state: ApplyState,
  resource: KnativeResource,
  rendered: readonly KubeObject[],
): ApplyResult {
  const frame = installFrame(resource);
  const desired = stampForApply(frame, rendered, ownerOfObjects(frame, ""));
  const plan = diffAgainstLive(frame, desired, state);
  const answers = new Map(plan.update.map(({ desired }) => [objectKey(desired), { after: desired }]));
  return { mode: "dry-run", desired, state, plan, writes: 0, answers };
}

/** The state a converged cluster has for a CR: its rendered objects applied, recorded in the anchor. */
export function convergedState(resource: KnativeResource, rendered: readonly KubeObject[]): ApplyState {
  const { desired } = dryRunOver(NOTHING_INSTALLED, resource, rendered);
  return {
    inventory: desired.map(refOf),
    objects: new Map(desired.map((object) => [objectKey(object), object])),
    inventoryExists: true,
    namespaceExists: true,
  };
}

/** A cluster without any of the install. */
export const NOTHING_INSTALLED: ApplyState = {
  inventory: [],
  objects: new Map(),
  inventoryExists: false,
  namespaceExists: false,
};
