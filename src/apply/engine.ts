import { setTimeout as sleep } from "node:timers/promises";
import { DESIRED_HASH_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL } from "../api/labels.ts";
import { FIELD_MANAGER, type KubeClient } from "../kube/client.ts";
import {
  field,
  isCrd,
  type KubeObject,
  nameOf,
  type ObjectRef,
  type OwnerReference,
  objectKey,
  refKey,
  refOf,
} from "../kube/object.ts";
import { isConflict } from "../kube/rest.ts";
import { containsDesired, isUpToDate, withDesiredHash } from "./compare.ts";
import { type DriftedObject, describeDrift, hasAddedKeys } from "./drift.ts";
import { waitEstablished, waitServed } from "./established.ts";
import { decodeInventory } from "./inventory.ts";
import { withLastApplied } from "./last-applied.ts";
import { ignoreNoKind, readLive } from "./live.ts";
import { inParallel } from "./parallel.ts";
import { applyOrReplace } from "./replace.ts";

// The generic server-side apply engine: one apply set (objects, the namespace they live in, an inventory
// object recording what was applied) brought in line with a cluster. It knows no CRD. Two modes of the same
// pass, as cli-utils' applier with a DryRunStrategy: "apply" writes; "dry-run" reads the same state, decides
// the same way, and asks the server what each update would give (dryRun=All) instead of writing.

export interface ApplySet {
  client: KubeClient;
  /** The namespace the set lives in (the inventory object and the owned objects); created when missing. */
  namespace: string;
  /**
   * Labels/annotations for the namespace. The set's own Namespace object, when the objects hold one (a
   * release's), adds its labels and annotations: a namespace the set creates gets all of them (and
   * managed-by, the mark of who created it); on an existing one only these keys are set, when one is missing
   * or differs.
   */
  namespaceMetadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  /** Labels every object of the set carries; live objects are listed back by them. */
  labels: Record<string, string>;
  /** The inventory object for these refs: a ConfigMap in `namespace`, always of the same name. */
  inventoryObject(refs: readonly ObjectRef[]): KubeObject;
  /**
   * The root owner, when something outside the cluster's objects owns the set (a hub CR installing on the
   * hub itself): it owns the inventory object and the namespaced objects. Unset: the inventory object is the
   * root and owns them.
   */
  rootOwner?: OwnerReference;
  /** Objects applied at once. */
  concurrency: number;
  /** Report mode: objects someone else changed or deleted are left as they are (plan.drift still says so). */
  keepDrift?: boolean;
  /** Objects whose `data` keys added by someone else are drift too (a config ConfigMap the program reads whole). */
  watchAddedKeys?(object: KubeObject): boolean;
  /** How long to wait for a CRD to become Established. */
  crdTimeoutMs?: number;
  /** Told when the watch of new CRDs failed and their Established wait went on by polling. */
  onCrdWatchError?(err: unknown): void;
  /** Told each phase of an "apply" pass as it ends (the step timeline at debug level). */
  onPhase?(phase: ApplyPhase, startedAt: number, ms: number): void;
}

type ApplyPhase =
  | "read"
  | "setup"
  | "crds"
  | "crdsEstablished"
  | "namespaces"
  | "objects"
  | "objectsOfNewKinds"
  | "prune";

export type ApplyMode = "apply" | "dry-run";

/** The cluster's side of an apply set before a pass: read live, or a state standing in for it offline. */
export interface ApplyState {
  /** What the inventory object records as applied (prune and removal work from it). */
  inventory: readonly ObjectRef[];
  /** The set's objects on the cluster, by objectKey. */
  objects: ReadonlyMap<string, KubeObject>;
  inventoryExists: boolean;
  namespaceExists: boolean;
}

/** What one pass does. Pure: the same inputs give the same plan. */
export interface ApplyPlan {
  /** The namespace and the inventory object when they do not exist yet: created first. */
  setup: ObjectRef[];
  /** Objects that do not exist (or were deleted by hand) and will be created. */
  create: KubeObject[];
  /** Objects whose live state differs from desired (a changed spec, or drift) and will be applied. */
  update: { desired: KubeObject; live: KubeObject }[];
  /** Objects already up to date: no request is sent for them. */
  unchanged: KubeObject[];
  /** Objects applied before (inventory) that the desired set no longer has. CRDs are never pruned. */
  prune: ObjectRef[];
  /** Objects someone else changed or deleted on the cluster: which fields, who (apply/drift.ts). */
  drift: DriftedObject[];
}

/** The server's answer to a dry-run update: the object as it would be stored, or why it was refused. */
type DryRunAnswer = { after: KubeObject } | { refused: string };

export interface ApplyResult {
  mode: ApplyMode;
  /** The objects the pass sends, exactly: stamped with labels, owner reference and desired-hash. */
  desired: KubeObject[];
  state: ApplyState;
  plan: ApplyPlan;
  /** Write requests sent. Zero for a converged cluster, and always in dry-run mode. */
  writes: number;
  /** Dry-run mode: the server's answer for every update, by objectKey. */
  answers: ReadonlyMap<string, DryRunAnswer>;
}

/**
 * Decides one pass over a state: create what is missing, update what differs, prune what the inventory had
 * and desired lost (never a CRD), and which of it is drift. The one decision, used by both modes and by an
 * offline plan over an in-memory state.
 */
export function diffAgainstLive(
  set: Pick<ApplySet, "namespace" | "inventoryObject" | "watchAddedKeys">,
  desired: readonly KubeObject[],
  state: ApplyState,
): ApplyPlan {
  const plan: ApplyPlan = {
    setup: [
      ...(state.namespaceExists ? [] : [namespaceRef(set.namespace)]),
      ...(state.inventoryExists ? [] : [refOf(set.inventoryObject([]))]),
    ],
    create: [],
    update: [],
    unchanged: [],
    prune: [],
    drift: [],
  };
  const wanted = new Set<string>();
  const inventoried = new Set(state.inventory.map(refKey));
  for (const object of desired) {
    const key = objectKey(object);
    wanted.add(key);
    const current = state.objects.get(key);
    if (!current) {
      plan.create.push(object);
      // applied before, deleted by hand
      if (inventoried.has(key)) plan.drift.push(describeDrift(object, undefined, FIELD_MANAGER));
      continue;
    }
    const addedKeys = set.watchAddedKeys?.(object) === true;
    if (isUpToDate(object, current)) {
      plan.unchanged.push(object);
      // Nothing to apply, but a key someone added is reported (an apply would not remove it).
      if (addedKeys && hasAddedKeys(object, current))
        plan.drift.push(describeDrift(object, current, FIELD_MANAGER, true));
      continue;
    }
    plan.update.push({ desired: object, live: current });
    const sameDesired =
      current.metadata.annotations?.[DESIRED_HASH_ANNOTATION] ===
      object.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
    // we did not change it: someone else did
    if (sameDesired) plan.drift.push(describeDrift(object, current, FIELD_MANAGER, addedKeys));
  }
  for (const ref of state.inventory) {
    if (!wanted.has(refKey(ref)) && !isCrd(ref)) plan.prune.push(ref);
  }
  return plan;
}

/**
 * Stamps the set's objects: the namespace itself left out (it is created once, never applied over), the
 * set's labels on all, an owner reference on the namespaced objects in the set's namespace (owner references
 * cannot cross namespaces or own cluster-scoped objects; those are deleted by name on removal), the
 * desired-hash, and the last-applied annotation (what a client-side applier, as the upstream operator's,
 * merges against). Pure: what a pass sends is exactly this.
 */
export function stampForApply(
  set: Pick<ApplySet, "namespace" | "labels">,
  objects: readonly KubeObject[],
  owner: OwnerReference,
): KubeObject[] {
  return withoutSetNamespace(objects, set.namespace).map((o) => {
    const owned = o.metadata.namespace === set.namespace;
    const stamped = withDesiredHash({
      ...o,
      metadata: {
        ...o.metadata,
        labels: { ...(o.metadata.labels ?? {}), ...set.labels },
        ...(owned ? { ownerReferences: [{ ...owner, controller: true, blockOwnerDeletion: true }] } : {}),
      },
    });
    return withLastApplied(stamped);
  });
}

/** Who owns the set's namespaced objects: the root owner, else the inventory object (by its uid). */
export function ownerOfObjects(set: Pick<ApplySet, "rootOwner" | "inventoryObject">, inventoryUid: string) {
  return (
    set.rootOwner ?? {
      apiVersion: "v1",
      kind: "ConfigMap",
      name: nameOf(set.inventoryObject([])),
      uid: inventoryUid,
    }
  );
}

/** The objects of these kinds and of the inventory that carry the set's labels, and the set's frame. */
export async function readState(
  set: Pick<ApplySet, "client" | "namespace" | "labels" | "inventoryObject">,
  kinds: readonly Pick<ObjectRef, "apiVersion" | "kind">[],
): Promise<ApplyState & { inventoryHolder?: KubeObject; namespaceObject?: KubeObject }> {
  const { client, namespace } = set;
  const [namespaceObject, inventoryHolder] = await Promise.all([
    client.get("v1", "Namespace", undefined, namespace),
    client.get("v1", "ConfigMap", namespace, nameOf(set.inventoryObject([]))),
  ]);
  const inventory = decodeInventory(inventoryHolder);
  return {
    inventory,
    objects: await readLive(client, [...kinds, ...inventory], selectorOf(set.labels)),
    inventoryExists: inventoryHolder !== undefined,
    namespaceExists: namespaceObject !== undefined,
    inventoryHolder,
    namespaceObject,
  };
}

/**
 * One pass of the set on its cluster. "apply": ensure the namespace and the inventory object (recording old
 * + new first, so a crash mid-apply still knows everything it may have created), apply what differs (CRDs
 * first, wait until Established, then namespaces, then the rest), prune, then record the new inventory.
 * Nothing is written when the cluster already matches. "dry-run": the same reads and decisions; each update
 * is sent with dryRun=All and the server's answer returned; nothing is written.
 */
export async function runApplySet(
  set: ApplySet,
  objects: readonly KubeObject[],
  mode: ApplyMode,
): Promise<ApplyResult> {
  const { client } = set;
  const phase = async <T>(name: ApplyPhase, work: () => Promise<T>): Promise<T> => {
    const startedAt = Date.now();
    const result = await work();
    set.onPhase?.(name, startedAt, Date.now() - startedAt);
    return result;
  };
  const kinds = withoutSetNamespace(objects, set.namespace);
  const state = await phase("read", () => readState(set, kinds));
  let writes = 0;
  let inventoryHolder = state.inventoryHolder;
  if (mode === "apply") {
    const covered = await phase("setup", async () => {
      const metadata = namespaceMetadataOf(set, objects);
      if (!state.namespaceExists) writes += await createNamespace(set, metadata);
      else writes += await labelNamespace(set, state.namespaceObject, metadata);
      // The inventory first, recording old + new.
      return applyInventory(set, inventoryHolder, [...state.inventory, ...kinds.map(refOf)]);
    });
    if (covered.written) writes++;
    inventoryHolder = covered.object;
  }
  const desired = stampForApply(
    set,
    objects,
    ownerOfObjects(set, String(inventoryHolder?.metadata.uid ?? "")),
  );
  const plan = diffAgainstLive(set, desired, state);
  if (mode === "dry-run") {
    return { mode, desired, state, plan, writes: 0, answers: await dryRunUpdates(set, plan) };
  }

  const kept = new Set(set.keepDrift ? plan.drift.map((d) => refKey(d.ref)) : []);
  const toApply = [...plan.create, ...plan.update.map((u) => u.desired)].filter(
    (o) => !kept.has(objectKey(o)),
  );
  const order = new Map(desired.map((o, i) => [objectKey(o), i]));
  toApply.sort((a, b) => order.get(objectKey(a))! - order.get(objectKey(b))!);
  const crds = toApply.filter(isCrd);
  const namespaces = toApply.filter((o) => o.kind === "Namespace");
  // Objects of a kind a CRD of this pass brings wait until it is Established; the others need not: they
  // go in meanwhile (Deployments start rolling out while the API server sets up the new kinds).
  const newKinds = new Set(crds.flatMap(servedVersions));
  const rest = toApply.filter((o) => !isCrd(o) && o.kind !== "Namespace");
  const ofNewKinds = rest.filter((o) => newKinds.has(o.apiVersion));
  const others = rest.filter((o) => !newKinds.has(o.apiVersion));
  await phase("crds", () => inParallel(crds, set.concurrency, (o) => client.write(o)));
  const overlapped = await Promise.allSettled([
    crds.length > 0 &&
      phase("crdsEstablished", async () => {
        const timeoutMs = set.crdTimeoutMs ?? 60_000;
        await waitEstablished(client, crds, {
          timeoutMs,
          labels: set.labels,
          onWatchError: set.onCrdWatchError,
        });
        for (const apiVersion of newKinds) client.forgetDiscovery(apiVersion);
        await waitServed(client, ofNewKinds, { timeoutMs });
      }),
    (async () => {
      await phase("namespaces", () => inParallel(namespaces, set.concurrency, (o) => client.write(o)));
      await phase("objects", () => inParallel(others, set.concurrency, (o) => applyOrReplace(client, o)));
    })(),
  ]);
  for (const result of overlapped) if (result.status === "rejected") throw result.reason;
  await phase("objectsOfNewKinds", () =>
    inParallel(ofNewKinds, set.concurrency, (o) => applyOrReplace(client, o)),
  );
  writes += toApply.length;

  await phase("prune", async () => {
    for (const ref of plan.prune) {
      if (
        await client
          .delete(ref.apiVersion, ref.kind, ref.namespace || undefined, ref.name)
          .catch(ignoreNoKind)
      )
        writes++;
    }
  });
  const recorded = await applyInventory(set, inventoryHolder, kinds.map(refOf));
  if (recorded.written) writes++;
  return { mode, desired, state, plan, writes, answers: new Map() };
}

/** Deletes at once per removal: a Serving's cluster-scoped objects one by one took seconds of round trips. */
export const DELETE_CONCURRENCY = 8;

/**
 * Deletes cluster-scoped objects by name, aggregated ClusterRoles (those with an aggregationRule) first.
 * The controller-manager's clusterrole-aggregation controller server-side applies an aggregated role's
 * rules whenever any ClusterRole changes, which re-creates a role just deleted if its cache still holds
 * it; deleted first, the role is gone from that cache before the deletes of the roles it aggregates are
 * seen (one watch, in order), so they queue nothing for it. A sync queued earlier (another release's roles
 * changing at the same time) can still re-create it: it is deleted again after the rest, and while it
 * keeps coming back, again a second later.
 */
export async function deleteClusterScoped(
  client: KubeClient,
  refs: readonly ObjectRef[],
): Promise<ObjectRef[]> {
  const aggregating: ObjectRef[] = [];
  const others: ObjectRef[] = [];
  await inParallel(refs, DELETE_CONCURRENCY, async (ref) => {
    const live =
      ref.kind === "ClusterRole"
        ? await client.get(ref.apiVersion, ref.kind, undefined, ref.name).catch(ignoreNoKind)
        : undefined;
    (live && live.aggregationRule !== undefined ? aggregating : others).push(ref);
  });
  const deleted: ObjectRef[] = [];
  const deleteEach = (batch: readonly ObjectRef[]) =>
    inParallel(batch, DELETE_CONCURRENCY, async (ref) => {
      if (await client.delete(ref.apiVersion, ref.kind, undefined, ref.name).catch(ignoreNoKind))
        deleted.push(ref);
    });
  await deleteEach(aggregating);
  await deleteEach(others);
  for (let round = 0; round < 4 && aggregating.length > 0; round++) {
    if (round > 0) await sleep(1_000);
    let recreated = 0;
    await inParallel(aggregating, DELETE_CONCURRENCY, async (ref) => {
      if (await client.delete(ref.apiVersion, ref.kind, undefined, ref.name)) recreated++;
    });
    if (recreated === 0) break;
  }
  return deleted;
}

export const selectorOf = (labels: Record<string, string>): string =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");

const namespaceRef = (name: string): ObjectRef => ({
  apiVersion: "v1",
  kind: "Namespace",
  namespace: "",
  name,
});

const withoutSetNamespace = (objects: readonly KubeObject[], namespace: string) =>
  objects.filter((o) => !(o.kind === "Namespace" && o.metadata.name === namespace));

async function dryRunUpdates(set: ApplySet, plan: ApplyPlan): Promise<Map<string, DryRunAnswer>> {
  const answers = new Map<string, DryRunAnswer>();
  await inParallel(plan.update, set.concurrency, async ({ desired }) => {
    try {
      answers.set(objectKey(desired), { after: await set.client.apply(desired, { dryRun: true }) });
    } catch (err) {
      answers.set(objectKey(desired), { refused: err instanceof Error ? err.message : String(err) });
    }
  });
  return answers;
}

type NamespaceMetadata = { labels: Record<string, string>; annotations: Record<string, string> };

/** The set's namespaceMetadata with the labels and annotations of its own Namespace object among `objects`. */
function namespaceMetadataOf(set: ApplySet, objects: readonly KubeObject[]): NamespaceMetadata {
  const own = objects.find((o) => o.kind === "Namespace" && o.metadata.name === set.namespace);
  return {
    labels: { ...(set.namespaceMetadata?.labels ?? {}), ...(own?.metadata.labels ?? {}) },
    annotations: { ...(set.namespaceMetadata?.annotations ?? {}), ...(own?.metadata.annotations ?? {}) },
  };
}

/**
 * An existing namespace gets only the set's namespace labels and annotations, never anything else (nor
 * managed-by: it says who created it), and only when one is missing or differs: a no-op writes nothing.
 */
async function labelNamespace(
  set: ApplySet,
  live: KubeObject | undefined,
  { labels, annotations }: NamespaceMetadata,
): Promise<number> {
  if (containsDesired({ labels, annotations }, live?.metadata)) return 0;
  await set.client.write({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: {
      name: set.namespace,
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
  });
  return 1;
}

/** The namespace is created once, with its labels, annotations and managed-by. */
async function createNamespace(set: ApplySet, metadata: NamespaceMetadata): Promise<number> {
  const labels = { ...metadata.labels, [MANAGED_BY_LABEL]: MANAGED_BY };
  const annotations = Object.keys(metadata.annotations).length > 0 ? metadata.annotations : undefined;
  try {
    await set.client.rest.request({
      method: "POST",
      path: "/api/v1/namespaces",
      body: {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: set.namespace, labels, ...(annotations ? { annotations } : {}) },
      },
    });
  } catch (err) {
    if (!isConflict(err)) throw err; // created meanwhile by someone else: fine, it is left as it is
  }
  return 1;
}

async function applyInventory(set: ApplySet, current: KubeObject | undefined, refs: readonly ObjectRef[]) {
  const desired = set.inventoryObject(refs);
  if (set.rootOwner)
    desired.metadata.ownerReferences = [{ ...set.rootOwner, controller: true, blockOwnerDeletion: true }];
  const stamped = withDesiredHash(desired);
  if (current && isUpToDate(stamped, current)) return { object: current, written: false };
  return { object: await set.client.apply(stamped), written: true };
}

/** The apiVersions (group/version) a CRD serves. */
function servedVersions(crd: KubeObject): string[] {
  const group = field(crd, "spec", "group");
  const versions = field(crd, "spec", "versions");
  if (typeof group !== "string" || !Array.isArray(versions)) return [];
  return versions.flatMap((v) => {
    const name = field(v, "name");
    return typeof name === "string" && field(v, "served") !== false ? [`${group}/${name}`] : [];
  });
}
