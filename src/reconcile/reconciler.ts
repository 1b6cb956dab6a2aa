import type { TargetResolution, TargetResolver } from "../access/target.ts";
import {
  initializeConditions,
  markCleanupBlocked,
  markCondition,
  markDeploymentsAvailable,
  markDeploymentsNotReady,
  markInstallFailed,
  markInstallSucceeded,
  markKubernetesVersionUnsupported,
  markTargetNotResolved,
  markTargetResolved,
  markWebhooksNotServed,
  markWebhooksUnverified,
  TargetClusterReason,
} from "../api/conditions.ts";
import type { DriftRecord } from "../api/drift.ts";
import { describeRecord } from "../api/drift.ts";
import type { Condition, KnativeResource, KnativeStatus } from "../api/knative.ts";
import { ABANDON_CLEANUP_ANNOTATION, DRIFT_MODE_ANNOTATION } from "../api/labels.ts";
import type { ApplyResult } from "../apply/engine.ts";
import { clusterLabel } from "../fleet/identity.ts";
import { applyInstall } from "../install/apply.ts";
import type { DeploymentWatches } from "../install/deployment-watch.ts";
import { renderInstall } from "../install/desired.ts";
import { checkWebhooks, readDeployments, unavailableDeployments } from "../install/health.ts";
import { locateInstall } from "../install/layout.ts";
import { removeInstall, sharingCr } from "../install/removal.ts";
import type { KubeClient } from "../kube/client.ts";
import { type KubeObject, refOf } from "../kube/object.ts";
import { isUnanswered } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";
import {
  checkKubernetesVersion,
  checkVersionMigration,
  type KubernetesCompatibility,
  type Release,
  type ReleaseLoader,
  VersionError,
} from "../render/index.ts";
import { driftRecords, type FieldLocator, withDrift } from "./drift.ts";

// The reconcile of one CR as upstream's stages (pkg/reconciler/common/stages.go): a named list of steps
// over one context, each returning what happens next, and one place (`outcomeOf`) that turns that into
// status, requeue or retry. Finalize (FinalizeRemoteCluster) sits beside it.

export interface ReconcileDeps {
  releases: ReleaseLoader;
  targets: TargetResolver;
  /**
   * Requeue interval while Deployments become Available (--remote-deployments-poll-interval); with
   * `deploymentWatches`, the fallback for a namespace whose watch failed.
   */
  pollIntervalMs: number;
  /** Watches of installs rolling out: a CR is re-checked when its last Deployment is Available. */
  deploymentWatches?: DeploymentWatches;
  /** Objects applied at once per cluster. */
  applyConcurrency: number;
  /** Where a CR field is in its fleet file, for the drift records (the service reads its Git clone). */
  locate?: FieldLocator;
  now(): Date;
  log: Logger;
}

interface ReconcileOutcome {
  status: KnativeStatus;
  /** "hub" or the ClusterProfile `namespace/name`. */
  cluster: string;
  /** Re-check after this long (Deployments still becoming Available). */
  requeueAfterMs?: number;
  /** Requests sent to the target cluster by this reconcile (reads and writes). */
  requests?: number;
  /** Set when the reconcile failed and should be retried with backoff (after the status is written). */
  error?: Error;
  apply?: ApplyResult;
  /** Drift this pass found that the CR's status did not record yet: an Event each. */
  drifted?: DriftRecord[];
  /** Whether the cluster answered; undefined when the pass stopped before trying to reach it. */
  reachable?: boolean;
}

/** What a step decides: go on, stop here (settled or waiting for a spec change), re-check later, or fail. */
type StepResult =
  | { next: "continue" }
  | { next: "settle" }
  | { next: "wait"; afterMs: number }
  | { next: "fail"; error: Error; retry: boolean };

/** What the steps know about one CR's reconcile, filled in as they pass. */
interface InstallContext {
  resource: KnativeResource;
  deps: ReconcileDeps;
  /** The CR's logger (cr, kind). */
  log: Logger;
  now: Date;
  conditions: Condition[];
  /** Status fields besides the conditions (manifests, version). */
  status: Partial<KnativeStatus>;
  release?: Release;
  /**
   * The target's resolution, started with the pass: it does not depend on the release, so the exec plugin
   * and the first connection to a cold cluster overlap with reading and parsing the manifests.
   */
  resolving: Promise<TargetResolution>;
  target?: Extract<TargetResolution, { ok: true }>;
  /** Whether the cluster answered (for the metrics); unset until the pass tries to reach it. */
  reachable?: boolean;
  requestsBefore?: number;
  desired?: readonly KubeObject[];
  applied?: ApplyResult;
  drifted?: DriftRecord[];
}

type Step = (context: InstallContext) => Promise<StepResult>;

const CONTINUE: StepResult = { next: "continue" };
/** A CR whose rollout is watched is re-checked after this long anyway (the watch wakes it sooner). */
export const WATCHED_RECHECK_MS = 60_000;
const errorOf = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));

/** The release manifests for the CR's version. An unknown version waits for a spec change: retrying cannot make it appear. */
const loadRelease: Step = async (context) => {
  try {
    context.release = await context.deps.releases.load(context.resource);
    return CONTINUE;
  } catch (err) {
    context.conditions = markInstallFailed(context.conditions, errorOf(err).message, context.now);
    return { next: "fail", error: errorOf(err), retry: !(err instanceof VersionError) };
  }
};

/** At most one minor at a time, as upstream: an ineligible jump touches nothing. */
const checkMigration: Step = async (context) => {
  const { resource, release } = context;
  const migration = checkVersionMigration(resource.kind, resource.status?.version, release!.version);
  context.conditions = markCondition(context.conditions, migration, context.now);
  return migration.status === "False" ? { next: "settle" } : CONTINUE;
};

const resolveTarget: Step = async (context) => {
  const target = await context.resolving;
  if (!target.ok) {
    // Only a failed connection says the cluster is unreachable; a missing ClusterProfile says nothing of it.
    if (target.reason === TargetClusterReason.RemoteClientCreationFailed) context.reachable = false;
    context.conditions = markTargetNotResolved(
      context.conditions,
      target.reason,
      target.message,
      context.now,
    );
    return { next: "fail", error: new Error(`${target.reason}: ${target.message}`), retry: true };
  }
  context.conditions = markTargetResolved(context.conditions, context.now);
  context.target = target;
  context.reachable = true;
  context.requestsBefore = totalRequests(target.client);
  return CONTINUE;
};

/**
 * The cluster runs at least the Kubernetes the release needs (the check every Knative process makes at start);
 * below it nothing is applied, and the CR is retried with backoff until the cluster is upgraded. The version
 * is the one kept with the client; a refusal reads it again first, so an upgrade since is seen at once.
 */
const checkKubernetes: Step = async (context) => {
  const { release, target } = context;
  let check: KubernetesCompatibility;
  try {
    check = checkKubernetesVersion(await target!.kubernetesVersion(), release!.version);
    if (!check.compatible) {
      check = checkKubernetesVersion(await target!.kubernetesVersion({ fresh: true }), release!.version);
    }
  } catch (err) {
    const error = new Error(
      `cannot read the Kubernetes version of ${target!.cluster}: ${errorOf(err).message}`,
    );
    context.conditions = markInstallFailed(context.conditions, error.message, context.now);
    return { next: "fail", error, retry: true };
  }
  if (check.compatible) return CONTINUE;
  context.conditions = markKubernetesVersionUnsupported(
    context.conditions,
    target!.cluster,
    check.message,
    context.now,
  );
  return { next: "fail", error: new Error(`${target!.cluster}: ${check.message}`), retry: true };
};

/**
 * Render and apply where the install is (an install of the older upstream layout is adopted in place, see
 * install/layout.ts): nothing is written when the cluster already matches.
 */
const install: Step = async (context) => {
  const { resource, deps, release, target } = context;
  try {
    const { namespace } = await locateInstall(target!.client, resource);
    context.desired = renderInstall(resource, release!, namespace);
    context.applied = await applyInstall(target!.client, resource, context.desired, {
      mode: "apply",
      concurrency: deps.applyConcurrency,
      namespace,
      onPhase: (phase, startedAt, ms) =>
        context.log.debug({ step: `install/${phase}`, startedAt, ms }, "reconcile step"),
      onCrdWatchError: (err) =>
        context.log.warn({ err: String(err) }, "watching CRDs failed; polling until they are Established"),
    });
  } catch (err) {
    if (isUnanswered(err)) context.reachable = false;
    context.conditions = markInstallFailed(context.conditions, errorOf(err).message, context.now);
    return { next: "fail", error: errorOf(err), retry: true };
  }
  context.conditions = markInstallSucceeded(context.conditions, context.now);
  await recordDrift(context);
  context.status.manifests = [...release!.locations];
  return CONTINUE;
};

/** What someone else changed on the cluster, put back or kept (report mode): into the status, and logged. */
async function recordDrift(context: InstallContext): Promise<void> {
  const { resource, deps, applied } = context;
  const kept = resource.metadata.annotations?.[DRIFT_MODE_ANNOTATION] === "report";
  const records = await driftRecords(resource, applied!.plan.drift, kept ? "kept" : "corrected", deps.locate);
  const status = { annotations: resource.status?.annotations, conditions: context.conditions };
  const { annotations, conditions, fresh } = withDrift(status, records, context.now);
  context.conditions = conditions;
  if (annotations !== undefined) context.status.annotations = annotations;
  context.drifted = fresh;
  for (const record of fresh) context.log.info({ cluster: context.target!.cluster }, describeRecord(record));
}

/**
 * Deployments Available at the version just applied, then the webhooks served (install/webhooks.ts)? While
 * they roll out the install's namespaces are watched (deps.deploymentWatches): the CR is woken the moment the
 * last one is Available, with a re-check after WATCHED_RECHECK_MS as a safety net; without a watch (none
 * configured, or it failed) it is re-checked every poll interval, as upstream does, and so is a webhook.
 */
const checkDeployments: Step = async (context) => {
  const { resource, target, desired, deps } = context;
  const { cluster, client } = target!;
  const live =
    deps.deploymentWatches?.cached(cluster, resource, desired!) ??
    (await readDeployments(client, resource, desired!));
  const waiting = unavailableDeployments(context.applied?.desired ?? desired!, live);
  if (waiting.length > 0) {
    context.conditions = markDeploymentsNotReady(context.conditions, waiting, context.now);
    const watched = deps.deploymentWatches?.await(cluster, client, resource, desired!) ?? false;
    return {
      next: "wait",
      afterMs: watched ? Math.max(WATCHED_RECHECK_MS, deps.pollIntervalMs) : deps.pollIntervalMs,
    };
  }
  // Available is not yet served: every webhook Service needs a ready endpoint (#39), polled, not watched.
  const webhooks = await checkWebhooks(client, desired!);
  if (webhooks) {
    context.conditions =
      "forbidden" in webhooks
        ? markWebhooksUnverified(context.conditions, webhooks.forbidden, context.now)
        : markWebhooksNotServed(context.conditions, webhooks.unserved, context.now);
    deps.deploymentWatches?.release(resource);
    return { next: "wait", afterMs: deps.pollIntervalMs };
  }
  context.conditions = markDeploymentsAvailable(context.conditions, context.now);
  context.status.version = context.release!.version;
  return { next: "settle" };
};

/** The steps, in upstream's order; checkKubernetes is knative-fleet's own (upstream checks only its own cluster). */
export const STEPS: readonly (readonly [string, Step])[] = [
  ["loadRelease", loadRelease],
  ["checkMigration", checkMigration],
  ["resolveTarget", resolveTarget],
  ["checkKubernetes", checkKubernetes],
  ["install", install],
  ["checkDeployments", checkDeployments],
];

/**
 * One level-based pass of the steps for a CR. It reads the world and acts on the difference; the caller
 * writes the returned status only if it differs from the stored one.
 */
export async function reconcileInstall(
  resource: KnativeResource,
  deps: ReconcileDeps,
): Promise<ReconcileOutcome> {
  const now = deps.now();
  // The step timeline at debug level: where one CR's time goes (scripts/bench-perf.ts prints it).
  const log = deps.log.child({
    cr: `${resource.metadata.namespace}/${resource.metadata.name}`,
    kind: resource.kind,
  });
  const context: InstallContext = {
    resource,
    deps,
    log,
    now,
    conditions: initializeConditions(resource.status?.conditions ?? [], now),
    status: {},
    resolving: deps.targets.resolve(resource.spec.clusterProfileRef),
  };
  context.resolving.catch(() => {}); // awaited by resolveTarget; a pass that stops before it drops it
  for (const [name, step] of STEPS) {
    const startedAt = Date.now();
    const result = await step(context);
    log.debug({ step: name, startedAt, ms: Date.now() - startedAt, next: result.next }, "reconcile step");
    if (result.next !== "continue") return settled(context, result);
  }
  return settled(context, { next: "settle" });
}

/** A CR that no longer waits for its rollout leaves its watches (a Ready install costs no watch). */
function settled(context: InstallContext, result: StepResult): ReconcileOutcome {
  if (result.next !== "wait") context.deps.deploymentWatches?.release(context.resource);
  return outcomeOf(context, result);
}

/** The one place a step's result becomes status, requeue or retry (Flux's ComputeReconcileResult). */
function outcomeOf(context: InstallContext, result: StepResult): ReconcileOutcome {
  const { resource, target } = context;
  const outcome: ReconcileOutcome = {
    status: {
      ...(resource.status ?? {}),
      observedGeneration: resource.metadata.generation,
      conditions: context.conditions,
      ...context.status,
    },
    cluster: clusterLabel(resource.spec.clusterProfileRef),
    ...(context.applied ? { apply: context.applied } : {}),
    ...(context.drifted?.length ? { drifted: context.drifted } : {}),
    ...(context.reachable !== undefined ? { reachable: context.reachable } : {}),
    ...(target ? { requests: totalRequests(target.client) - context.requestsBefore! } : {}),
  };
  if (result.next === "wait") return { ...outcome, requeueAfterMs: result.afterMs };
  if (result.next === "fail" && result.retry) return { ...outcome, error: result.error };
  return outcome;
}

const totalRequests = (client: KubeClient): number =>
  [...client.rest.requestCounts.values()].reduce((sum, n) => sum + n, 0);

/** What finalize decided: release the CR (remove the finalizer), or keep it with this status and retry. */
type FinalizeOutcome = { release: true } | { release: false; status: KnativeStatus; error: Error };

/**
 * FinalizeRemoteCluster: unless another live CR of the same kind targets the same cluster, delete the
 * anchor (garbage collection removes what it owns) and the cluster-scoped objects; CRDs stay. An
 * unreachable spoke retries with backoff and says so; it never wedges the CR for good: the abandon
 * annotation releases it, and a ClusterProfile that left the inventory releases it by itself. One that is
 * only outside allowedClusterProfileNamespaces does not: its cluster may still run the install, so the CR
 * keeps its finalizer and the condition says how to release it (allow the namespace, or abandon cleanup).
 */
export async function finalizeInstall(
  resource: KnativeResource,
  hubCrs: readonly KnativeResource[],
  deps: ReconcileDeps,
  log: Logger,
): Promise<FinalizeOutcome> {
  deps.deploymentWatches?.release(resource);
  const ref = resource.spec.clusterProfileRef;
  const cluster = clusterLabel(ref);
  if (resource.metadata.annotations?.[ABANDON_CLEANUP_ANNOTATION] === "true") {
    log.warn({ cluster }, "cleanup abandoned by annotation; the cluster keeps what was installed");
    return { release: true };
  }
  const sharing = sharingCr(resource, hubCrs);
  if (sharing) {
    log.info(
      { others: [sharing.metadata.name] },
      "another CR targets the same cluster; leaving it untouched",
    );
    return { release: true };
  }
  const target = await deps.targets.resolve(ref);
  if (!target.ok) {
    if (target.reason === "ClusterProfileNotFound") {
      log.warn({ cluster }, "the ClusterProfile left the inventory; releasing the CR without cleanup");
      return { release: true };
    }
    const conditions = markCleanupBlocked(
      resource.status?.conditions ?? [],
      target.reason,
      target.message,
      cluster,
      ABANDON_CLEANUP_ANNOTATION,
      deps.now(),
    );
    return {
      release: false,
      status: { ...(resource.status ?? {}), conditions },
      error: new Error(`finalize ${cluster}: ${target.reason}: ${target.message}`),
    };
  }
  const { namespace } = await locateInstall(target.client, resource);
  const fallback = () =>
    deps.releases
      .load(resource)
      .then((release) => renderInstall(resource, release, namespace).map(refOf))
      .catch(() => []);
  const { deleted } = await removeInstall(target.client, resource, fallback, namespace);
  log.info({ cluster: target.cluster, deleted: deleted.length }, "FinalizeRemoteCluster done");
  return { release: true };
}
