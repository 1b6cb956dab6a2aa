import { setTimeout as sleep } from "node:timers/promises";
import type { KubeClient } from "../kube/client.ts";
import { isConflict } from "../kube/rest.ts";
import { containsDesired, DESIRED_HASH_ANNOTATION, withDesiredHash } from "./compare.ts";
import { withLastApplied } from "./last-applied.ts";
import {
  describeRef,
  isCrd,
  type KubeObject,
  type ObjectRef,
  type OwnerReference,
  objectKey,
  refKey,
  refOf,
} from "./objects.ts";
import {
  anchorName,
  buildAnchor,
  decodeInventory,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  type Owner,
  selectorFor,
  withOwnership,
} from "./ownership.ts";
import { type ApplyPlan, planApply } from "./plan.ts";
import { applyOrReplace } from "./replace.ts";

export interface InstallTarget {
  client: KubeClient;
  owner: Owner;
  /** Namespace the component is installed into (anchor and owned objects live there). */
  namespace: string;
  /**
   * spec.namespace's labels/annotations for the install namespace; the release's own Namespace object (in the
   * desired objects, spec.namespace already merged into it by render) adds its own.
   */
  namespaceMetadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  /**
   * Who owns the anchor: the hub CR itself for a local install (its owner reference), nothing on a spoke
   * (the anchor is the root there).
   */
  anchorOwner?: { apiVersion: string; kind: string; name: string; uid: string };
  /** Objects applied at once per cluster. */
  concurrency: number;
  /** How long to wait for a CRD to become Established. */
  crdTimeoutMs?: number;
}

export interface ApplyOutcome {
  plan: ApplyPlan;
  /** Objects restored because someone changed or deleted them on the cluster. */
  drift: ObjectRef[];
  /** Write requests sent (applies, deletes, namespace creation). Zero for a converged cluster. */
  writes: number;
}

/**
 * Brings one cluster in line with the desired objects of one CR: ensure the install namespace and the
 * anchor (with an inventory that covers everything we may create), apply what differs (CRDs first, wait
 * until Established), prune what the last inventory had and desired lost, then record the new inventory.
 * Nothing is written when the cluster already matches.
 */
export async function applyInstall(
  target: InstallTarget,
  desiredObjects: readonly KubeObject[],
): Promise<ApplyOutcome> {
  const { client, owner, namespace } = target;
  let writes = 0;
  writes += await ensureNamespace(target, releaseNamespace(desiredObjects, namespace));

  const desiredNamespaced = withoutInstallNamespace(desiredObjects, namespace);
  const anchor = await client.get("v1", "ConfigMap", namespace, anchorName(owner));
  const previousInventory = decodeInventory(anchor);

  // The anchor first, recording old + new, so a crash mid-apply still knows everything it may have created.
  const covering = [...previousInventory, ...desiredNamespaced.map(refOf)];
  const anchorAfterCover = await applyAnchor(target, anchor, covering);
  if (anchorAfterCover.written) writes++;
  const anchorUid = String(anchorAfterCover.object.metadata.uid ?? "");

  const ownerRef = target.anchorOwner ?? {
    apiVersion: "v1",
    kind: "ConfigMap",
    name: anchorName(owner),
    uid: anchorUid,
  };
  const desired = stampForApply(desiredNamespaced, owner, ownerRef, namespace);
  const live = await readLive(client, desired, owner);
  const plan = planApply(desired, live, previousInventory);

  const inventoryKeys = new Set(previousInventory.map(refKey));
  const drift: ObjectRef[] = [
    ...plan.create.filter((o) => inventoryKeys.has(objectKey(o))).map(refOf),
    ...plan.update
      .filter(
        (u) =>
          u.live.metadata.annotations?.[DESIRED_HASH_ANNOTATION] ===
          u.desired.metadata.annotations?.[DESIRED_HASH_ANNOTATION],
      )
      .map((u) => refOf(u.desired)),
  ];

  const toApply = [...plan.create, ...plan.update.map((u) => u.desired)];
  const order = new Map(desired.map((o, i) => [objectKey(o), i]));
  toApply.sort((a, b) => order.get(objectKey(a))! - order.get(objectKey(b))!);
  const crds = toApply.filter(isCrd);
  const namespaces = toApply.filter((o) => o.kind === "Namespace");
  const rest = toApply.filter((o) => !isCrd(o) && o.kind !== "Namespace");

  await inParallel(crds, target.concurrency, (o) => client.apply(o));
  if (crds.length > 0) {
    await waitForCrds(client, crds, target.crdTimeoutMs ?? 60_000);
    client.forgetDiscovery();
  }
  await inParallel(namespaces, target.concurrency, (o) => client.apply(o));
  await inParallel(rest, target.concurrency, (o) => applyOrReplace(client, o));
  writes += toApply.length;

  for (const ref of plan.prune) {
    if (
      await client.delete(ref.apiVersion, ref.kind, ref.namespace || undefined, ref.name).catch(ignoreNoKind)
    )
      writes++;
  }

  const finalAnchor = await applyAnchor(target, anchorAfterCover.object, desiredNamespaced.map(refOf));
  if (finalAnchor.written) writes++;
  return { plan, drift, writes };
}

/** The install namespace is ensured apart (ensureNamespace), never applied as a whole. */
const withoutInstallNamespace = (objects: readonly KubeObject[], namespace: string) =>
  objects.filter((o) => !(o.kind === "Namespace" && o.metadata.name === namespace));
const releaseNamespace = (objects: readonly KubeObject[], namespace: string) =>
  objects.find((o) => o.kind === "Namespace" && o.metadata.name === namespace);

/**
 * The objects an apply sends, exactly: the install namespace left out, ownership labels and owner
 * reference stamped, the desired-hash set, and the last-applied annotation the upstream operator merges with. Pure; `plan` shows the same objects.
 */
export function stampForApply(
  objects: readonly KubeObject[],
  owner: Owner,
  ownerRef: OwnerReference,
  namespace: string,
): KubeObject[] {
  return withOwnership(withoutInstallNamespace(objects, namespace), owner, ownerRef, namespace)
    .map(withDesiredHash)
    .map(withLastApplied);
}

/** Removes an install: the anchor (garbage collection takes what it owns) and the cluster-scoped objects. */
export async function removeInstall(
  target: Pick<InstallTarget, "client" | "owner" | "namespace">,
  fallbackObjects: readonly KubeObject[],
): Promise<{ deleted: ObjectRef[] }> {
  const { client, owner, namespace } = target;
  const anchor = await client.get("v1", "ConfigMap", namespace, anchorName(owner));
  const inventory = anchor ? decodeInventory(anchor) : fallbackObjects.map(refOf);
  // CRDs stay: deleting them would delete every user resource of those kinds.
  const clusterScoped = inventory.filter((ref) => ref.namespace === "" && !isCrd(ref));
  const deleted = await deleteClusterScoped(client, clusterScoped);
  if (await client.delete("v1", "ConfigMap", namespace, anchorName(owner), "Background")) {
    deleted.push({ apiVersion: "v1", kind: "ConfigMap", namespace, name: anchorName(owner) });
  }
  return { deleted };
}

/**
 * Deletes cluster-scoped objects. Aggregated ClusterRoles (those with an aggregationRule) go last, and are
 * checked again afterwards: the controller-manager's clusterrole-aggregation controller may still hold
 * one in its queue, and its server-side apply of the rules re-creates a role that was just deleted.
 */
async function deleteClusterScoped(client: KubeClient, refs: readonly ObjectRef[]): Promise<ObjectRef[]> {
  const aggregating: ObjectRef[] = [];
  const deleted: ObjectRef[] = [];
  for (const ref of refs) {
    if (ref.kind === "ClusterRole") {
      const live = await client.get(ref.apiVersion, ref.kind, undefined, ref.name).catch(ignoreNoKind);
      if (live && live.aggregationRule !== undefined) {
        aggregating.push(ref);
        continue;
      }
    }
    if (await client.delete(ref.apiVersion, ref.kind, undefined, ref.name).catch(ignoreNoKind))
      deleted.push(ref);
  }
  for (const ref of aggregating)
    if (await client.delete(ref.apiVersion, ref.kind, undefined, ref.name)) deleted.push(ref);
  for (let round = 0; round < 3 && aggregating.length > 0; round++) {
    await sleep(1_000);
    let recreated = 0;
    for (const ref of aggregating)
      if (await client.delete(ref.apiVersion, ref.kind, undefined, ref.name)) recreated++;
    if (recreated === 0) break;
  }
  return deleted;
}

/**
 * The install namespace with the release's Namespace object on it, as upstream applies that object: created
 * with its labels and annotations (and `managed-by: knative-fleet`, the one mark of who created it); on an
 * existing namespace only those labels and annotations are set (never managed-by, nor anything else of it),
 * and only when one of them is missing or differs. Returns the writes sent.
 */
async function ensureNamespace(target: InstallTarget, release: KubeObject | undefined): Promise<number> {
  const { client, namespace } = target;
  const labels = { ...(target.namespaceMetadata?.labels ?? {}), ...(release?.metadata.labels ?? {}) };
  const annotations = {
    ...(target.namespaceMetadata?.annotations ?? {}),
    ...(release?.metadata.annotations ?? {}),
  };
  const metadataOf = (extraLabels: Record<string, string> = {}) => ({
    name: namespace,
    ...(Object.keys(labels).length + Object.keys(extraLabels).length > 0
      ? { labels: { ...labels, ...extraLabels } }
      : {}),
    ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
  });
  const live = await client.get("v1", "Namespace", undefined, namespace);
  if (live) {
    if (containsDesired({ labels, annotations }, live.metadata)) return 0;
    await client.apply({ apiVersion: "v1", kind: "Namespace", metadata: metadataOf() });
    return 1;
  }
  try {
    await client.rest.request({
      method: "POST",
      path: "/api/v1/namespaces",
      body: { apiVersion: "v1", kind: "Namespace", metadata: metadataOf({ [MANAGED_BY_LABEL]: MANAGED_BY }) },
    });
  } catch (err) {
    if (!isConflict(err)) throw err; // created meanwhile by someone else: fine, it is left as it is
  }
  return 1;
}

async function applyAnchor(
  target: InstallTarget,
  current: KubeObject | undefined,
  inventory: readonly ObjectRef[],
) {
  const desired = buildAnchor(target.owner, target.namespace, inventory);
  if (target.anchorOwner)
    desired.metadata.ownerReferences = [
      { ...target.anchorOwner, controller: true, blockOwnerDeletion: true },
    ];
  const stamped = withDesiredHash(desired);
  if (current && planApply([stamped], new Map([[objectKey(stamped), current]]), []).unchanged.length === 1) {
    return { object: current, written: false };
  }
  return { object: await target.client.apply(stamped), written: true };
}

/** Live objects of the kinds we are about to apply, found by our ownership labels. */
async function readLive(
  client: KubeClient,
  desired: readonly KubeObject[],
  owner: Owner,
): Promise<Map<string, KubeObject>> {
  const groups = new Map<string, { apiVersion: string; kind: string }>();
  for (const o of desired)
    groups.set(`${o.apiVersion}/${o.kind}`, { apiVersion: o.apiVersion, kind: o.kind });
  const live = new Map<string, KubeObject>();
  const selector = selectorFor(owner);
  await inParallel([...groups.values()], 4, async ({ apiVersion, kind }) => {
    const list = await client.list(apiVersion, kind, { labelSelector: selector }).catch((err: unknown) => {
      ignoreNoKind(err); // a kind not served yet: its CRD comes with this apply
      return { items: [] };
    });
    for (const item of list.items) live.set(objectKey(item), item);
  });
  return live;
}

async function waitForCrds(
  client: KubeClient,
  crds: readonly KubeObject[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const live = await client.get(crd.apiVersion, crd.kind, undefined, crd.metadata.name);
      const conditions =
        (live?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions ?? [];
      if (conditions.some((c) => c.type === "Established" && c.status === "True")) break;
      if (Date.now() > deadline)
        throw new Error(`${describeRef(refOf(crd))} did not become Established within ${timeoutMs / 1000}s`);
      await sleep(200);
    }
  }
}

/** Treats "this kind is not served" as already deleted / nothing live (returns false); rethrows the rest. */
function ignoreNoKind(err: unknown): false {
  if ((err as { reason?: string }).reason === "NoKindMatch" || (err as { status?: number }).status === 404)
    return false;
  throw err;
}

/** Runs fn over items with at most `limit` at once; the first error rejects after in-flight ones settle. */
export async function inParallel<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (failure === undefined && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure;
}
