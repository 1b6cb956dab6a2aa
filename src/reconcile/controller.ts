import type { CrAdmission } from "../admission/tenancy.ts";
import { readinessOf } from "../api/conditions.ts";
import type { DriftRecord } from "../api/drift.ts";
import {
  KNATIVE_KINDS,
  type KnativeKind,
  type KnativeResource,
  KnativeResourceSchema,
  OPERATOR_API_VERSION,
} from "../api/knative.ts";
import { FINALIZERS } from "../api/labels.ts";
import { canonicalJson } from "../apply/compare.ts";
import {
  type ClusterRef,
  clusterLabel,
  formatIdentity,
  identityOf,
  type ResourceIdentity,
  targetOf,
} from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import { type KubeObject, nameOf } from "../kube/object.ts";
import { isConflict } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";
import { redactSecrets } from "../observability/redact.ts";
import { ClusterIndex } from "./cluster-index.ts";
import { WorkQueue } from "./queue.ts";
import { finalizeInstall, type ReconcileDeps, reconcileInstall } from "./reconciler.ts";

interface ControllerOptions {
  hub: KubeClient;
  deps: ReconcileDeps;
  workers: number;
  /**
   * At most this many of the workers on one cluster at once, so a hanging spoke cannot take them all;
   * unbounded (up to `workers`) when unset.
   */
  workersPerCluster?: number;
  /**
   * A converged CR is reconciled again after this long, so drift on its cluster (an object changed or
   * deleted by hand) is found and restored without a change on the hub.
   */
  resyncIntervalMs: number;
  /** Called after every reconcile, for metrics and events. */
  onReconciled?(report: ReconcileReport): void;
  /** Which hub CRs are reconciled (tenancy, src/access/tenancy.ts); every one when unset. */
  admits?: CrAdmission;
  /**
   * Whether this replica reconciles the CRs of a cluster (`clusterLabel`) now: the sharding filter of
   * src/service/sharding.ts; every cluster when unset.
   */
  owns?(cluster: string): boolean;
  /**
   * Reaches a CR's cluster before a worker takes the CR (ClusterAccess.contact): undefined when it answered
   * already, else the contact to start. Waiting on a cluster that does not answer then holds no worker.
   */
  contact?(cluster: ClusterRef): (() => Promise<void>) | undefined;
  /** Another writer changed a CR's status (a CR of another shard): the status summary may have changed. */
  onStatusChanged?(): void;
}

export interface ReconcileReport {
  kind: KnativeKind;
  namespace: string;
  name: string;
  cluster: string;
  durationMs: number;
  error?: Error;
  ready: boolean;
  /** Objects someone else changed that this pass put back. */
  drift: number;
  /** Drift this pass recorded for the first time (put back, or kept in report mode). */
  drifted?: DriftRecord[];
  writes: number;
  /** Requests to the target cluster (reads and writes). */
  requests: number;
  /** Whether the cluster answered; undefined when the pass did not try to reach it. */
  reachable?: boolean;
  /** The release installed (status.version), once one is. */
  version?: string;
  statusWritten: boolean;
  /** The CR's finalizer ran and released it: the CR is gone from the hub. */
  finalized: boolean;
}

/**
 * CRs being deleted that are finalized at once, beside the workers: a removal is some dozens of deletes that
 * wait on the spoke, not an apply, so removing a placement does not take one worker's turn per CR (the
 * upstream operator's deletes return at once).
 */
const FINALIZE_CONCURRENCY = 16;

/**
 * The hub controller: watches KnativeServing and KnativeEventing, reconciles each onto its cluster through
 * a work queue, writes status only when it changed, and runs FinalizeRemoteCluster behind a finalizer.
 */
export class KnativeController {
  private readonly options: ControllerOptions;
  private readonly informers: Map<KnativeKind, Informer>;
  /** The queue's keys (`formatIdentity`) and the CR each names: nothing parses a key back. */
  private readonly identities = new Map<string, ResourceIdentity>();
  /** The hub CRs by the cluster they target, as the informers have them. */
  private readonly byCluster = new ClusterIndex();
  /** The CRs queued while the informers make their first list (start): queued once they have it all. */
  private heldUntilSynced: ResourceIdentity[] | undefined;
  readonly queue: WorkQueue;

  constructor(options: ControllerOptions) {
    this.options = options;
    this.informers = new Map(
      KNATIVE_KINDS.map((kind) => [
        kind,
        new Informer(options.hub, OPERATOR_API_VERSION, kind, (err) =>
          options.deps.log.warn({ err: String(err), kind }, "watch interrupted; resuming"),
        ),
      ]),
    );
    this.queue = new WorkQueue((key) => this.reconcileKey(key), {
      concurrency: options.workers,
      perGroup: options.workersPerCluster,
      groupOf: (key) => this.clusterOfKey(key),
      lane: {
        has: (key) => this.objectOf(key)?.metadata.deletionTimestamp !== undefined,
        concurrency: FINALIZE_CONCURRENCY,
      },
      prepare: (key) => {
        const object = this.objectOf(key);
        const cluster = object && targetOf(object);
        const contact = cluster && options.contact?.(cluster);
        // Another replica's cluster: its key returns at once, nothing to reach.
        return contact && this.owns(object) ? contact : undefined;
      },
    });
    for (const [kind, informer] of this.informers) {
      informer.on((event, object, previous) => {
        if (event === "MODIFIED" && previous && !specOrMetaChanged(previous, object, FINALIZERS[kind])) {
          options.onStatusChanged?.(); // a status write (ours, or another shard's), or our own finalizer
          return;
        }
        const identity = identityOf({ kind, metadata: object.metadata });
        this.byCluster.note(
          formatIdentity(identity),
          identity,
          event === "DELETED" ? undefined : clusterOf(object),
        );
        this.enqueue(identity);
      });
    }
  }

  /**
   * Starts the informers; no CR is reconciled before every cache holds the whole hub (client-go's wait for
   * cache sync): a CR being deleted, taken while the first list was still being delivered, would find no
   * other CR sharing its cluster and remove an install a CR listed after it still uses.
   */
  async start(): Promise<void> {
    this.heldUntilSynced = [];
    for (const informer of this.informers.values()) informer.start();
    await Promise.all([...this.informers.values()].map((i) => i.hasSynced()));
    const held = this.heldUntilSynced;
    this.heldUntilSynced = undefined;
    for (const identity of held) this.enqueue(identity);
  }

  async stop(): Promise<void> {
    for (const informer of this.informers.values()) informer.stop();
    await this.queue.shutdown();
  }

  /** Queues the CR for a reconcile, keyed by its identity's one spelling. */
  enqueue(identity: ResourceIdentity): void {
    if (this.heldUntilSynced) {
      this.heldUntilSynced.push(identity);
      return;
    }
    const key = formatIdentity(identity);
    this.identities.set(key, identity);
    this.queue.add(key);
  }

  /**
   * Queues every CR that targets the cluster (`clusterLabel`): its ClusterProfile's access changed, it
   * became healthy again, or this replica's shard gained it.
   */
  enqueueCluster(cluster: string): void {
    for (const identity of this.byCluster.crsOf(cluster)) this.enqueue(identity);
  }

  /** Every cluster the hub CRs target (`clusterLabel`). */
  clusters(): Set<string> {
    return this.byCluster.clusters();
  }

  /** Resolves when no reconcile of the cluster is running (the shard gave it up: no new one starts). */
  clusterSettled(cluster: string): Promise<void> {
    return this.queue.groupSettled(cluster);
  }

  /** The hub's CR a queue key names, as the informer has it now; undefined once it is gone. */
  private objectOf(key: string): KubeObject | undefined {
    const identity = this.identities.get(key);
    return identity && this.informers.get(identity.kind)?.get(identity.namespace, identity.name);
  }

  private clusterOfKey(key: string): string {
    return this.byCluster.clusterOf(key) ?? key;
  }

  private async reconcileKey(key: string): Promise<{ requeueAfterMs?: number } | undefined> {
    const identity = this.identities.get(key);
    if (!identity) return undefined; // gone, and released by the pass that found it gone
    const { kind, namespace, name } = identity;
    const object = this.objectOf(key);
    if (!object) {
      this.identities.delete(key); // a new event for the CR enqueues it again
      this.options.deps.deploymentWatches?.release({ kind, metadata: { namespace, name } }); // gone without finalize
      return undefined;
    }
    // Another replica's shard: its owner reconciles it; this replica queues it again when it gains it.
    if (!this.owns(object)) return undefined;
    const started = Date.now();
    const log = this.options.deps.log.child({ cr: `${namespace}/${name}`, kind });
    const admission = this.options.admits?.(object) ?? { admitted: true };
    if (!admission.admitted) {
      log.info({ why: admission.why }, "not reconciled: outside the tenancy settings");
      return undefined;
    }
    const parsed = KnativeResourceSchema.safeParse(object);
    if (!parsed.success) {
      log.error(
        { issues: parsed.error.issues.slice(0, 5) },
        "the hub CR does not match the schema; skipping",
      );
      return undefined;
    }
    const resource = parsed.data;
    const report = (partial: Partial<ReconcileReport>) =>
      this.options.onReconciled?.({
        kind,
        namespace,
        name,
        cluster: clusterLabel(resource.spec.clusterProfileRef),
        durationMs: Date.now() - started,
        ready: false,
        drift: 0,
        writes: 0,
        requests: 0,
        statusWritten: false,
        finalized: false,
        ...partial,
      });

    if (object.metadata.deletionTimestamp) {
      try {
        const finalized = await this.finalize(resource, object, log);
        report({ finalized });
      } catch (err) {
        report({ error: err as Error });
        throw err;
      }
      return undefined;
    }
    await this.ensureFinalizer(object, FINALIZERS[kind]);
    const outcome = await reconcileInstall(resource, this.options.deps);
    if (!this.owns(object)) return undefined; // handed on meanwhile: the new owner writes its status
    const statusWritten = await this.writeStatus(object, outcome.status);
    const ready = readinessOf({ metadata: object.metadata, status: outcome.status }).phase === "Current";
    report({
      cluster: outcome.cluster,
      error: outcome.error,
      ready,
      drift: outcome.drifted?.filter((r) => r.outcome === "corrected").length ?? 0,
      ...(outcome.drifted && { drifted: outcome.drifted }),
      writes: (outcome.apply?.writes ?? 0) + (statusWritten ? 1 : 0),
      requests: outcome.requests ?? 0,
      ...(outcome.reachable !== undefined && { reachable: outcome.reachable }),
      ...(outcome.status.version !== undefined && { version: outcome.status.version }),
      statusWritten,
    });
    if (outcome.error) {
      log.warn(
        { cluster: outcome.cluster, err: outcome.error.message },
        "reconcile failed; retrying with backoff",
      );
      throw outcome.error;
    }
    return { requeueAfterMs: outcome.requeueAfterMs ?? this.options.resyncIntervalMs };
  }

  /** Runs finalize for a CR being deleted; true when its finalizer was removed (the CR is released). */
  private async finalize(resource: KnativeResource, object: KubeObject, log: Logger): Promise<boolean> {
    const finalizer = FINALIZERS[resource.kind];
    if (!(object.metadata.finalizers as string[] | undefined)?.includes(finalizer)) return false;
    // Only the CRs on the same cluster can share its install: read by the index, not by parsing every CR
    // on the hub for each finalize (a placement's 1,000 CRs deleted at once made that quadratic).
    const informer = this.informers.get(resource.kind)!;
    const hubCrs = this.byCluster
      .crsOf(clusterOf(object))
      .filter((identity) => identity.kind === resource.kind)
      .flatMap((identity) => informer.get(identity.namespace, identity.name) ?? [])
      .filter((o) => this.options.admits?.(o).admitted ?? true) // a foreign CR cannot hold back cleanup
      .flatMap((o) => {
        const parsed = KnativeResourceSchema.safeParse(o);
        return parsed.success ? [parsed.data] : [];
      });
    const outcome = await finalizeInstall(resource, hubCrs, this.options.deps, log);
    if (!this.owns(object)) return false; // handed on meanwhile: the new owner finishes the cleanup
    if (!outcome.release) {
      await this.writeStatus(object, outcome.status);
      throw outcome.error;
    }
    await this.removeFinalizer(object, finalizer);
    return true;
  }

  /** Whether this replica reconciles the CR's cluster now (sharding); always when not sharded. */
  private owns(object: KubeObject): boolean {
    return this.options.owns?.(clusterOf(object)) ?? true;
  }

  private async ensureFinalizer(object: KubeObject, finalizer: string): Promise<void> {
    const finalizers = (object.metadata.finalizers as string[] | undefined) ?? [];
    if (finalizers.includes(finalizer)) return;
    await this.patchFinalizers(object, [...finalizers, finalizer]);
  }

  private async removeFinalizer(object: KubeObject, finalizer: string): Promise<void> {
    const finalizers = ((object.metadata.finalizers as string[] | undefined) ?? []).filter(
      (f) => f !== finalizer,
    );
    await this.patchFinalizers(object, finalizers);
  }

  /** A merge patch guarded by resourceVersion: a concurrent change makes it fail (409) and the key retries. */
  private async patchFinalizers(object: KubeObject, finalizers: string[]): Promise<void> {
    const { apiVersion, kind, metadata } = object;
    try {
      await this.options.hub.mergePatch(apiVersion, kind, metadata.namespace, nameOf(object), {
        metadata: { finalizers, resourceVersion: metadata.resourceVersion },
      });
    } catch (err) {
      if (isConflict(err))
        throw new Error(`${formatIdentity(identityOf(object))} changed meanwhile; retrying`);
      throw err;
    }
  }

  /**
   * Writes status through the status subresource only when it differs from what is stored. Condition
   * messages carry others' words (an API server's, a plugin's, a URL): they are redacted on the way out.
   */
  private async writeStatus(object: KubeObject, written: KnativeResource["status"]): Promise<boolean> {
    const status = written && {
      ...written,
      conditions: written.conditions?.map((c) =>
        c.message ? { ...c, message: redactSecrets(c.message) } : c,
      ),
    };
    if (canonicalJson(object.status ?? {}) === canonicalJson(status ?? {})) return false;
    await this.options.hub.apply(
      {
        apiVersion: object.apiVersion,
        kind: object.kind,
        metadata: { name: object.metadata.name, namespace: object.metadata.namespace },
        status,
      },
      { subresource: "status" },
    );
    return true;
  }
}

/** The cluster a hub CR targets, as `clusterLabel` names it, read before the CR is validated. */
const clusterOf = (object: KubeObject): string => clusterLabel(targetOf(object));

/**
 * Whether anything but status changed: spec (generation), labels, annotations, finalizers or deletion. Our
 * own finalizer appearing is the reconcile's own write: the pass that added it goes on, no second pass.
 */
function specOrMetaChanged(previous: KubeObject, current: KubeObject, ownFinalizer: string): boolean {
  const finalizers = (o: KubeObject) => (o.metadata.finalizers as string[] | undefined) ?? [];
  const ownAdded = !finalizers(previous).includes(ownFinalizer) && finalizers(current).includes(ownFinalizer);
  const meta = (o: KubeObject) =>
    canonicalJson({
      generation: o.metadata.generation,
      labels: o.metadata.labels,
      annotations: o.metadata.annotations,
      finalizers: finalizers(o).filter((f) => !(ownAdded && f === ownFinalizer)),
      deletionTimestamp: o.metadata.deletionTimestamp,
    });
  return meta(previous) !== meta(current);
}
