import { ConditionType, type ConditionUpdate, findCondition, markCondition } from "../api/conditions.ts";
import type { Condition, KnativeResource, KnativeStatus } from "../api/knative.ts";
import { type ApplyOutcome, applyInstall } from "../apply/apply.ts";
import type { KubeObject } from "../apply/objects.ts";
import { selectorFor } from "../apply/ownership.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../observability/log.ts";
import { checkVersionMigration, type Release, type ReleaseLoader, VersionError } from "../render/index.ts";
import { ownerOf, renderInstall } from "./desired.ts";
import { unavailableDeployments } from "./health.ts";
import { locateInstall } from "./layout.ts";
import { clusterLabel, type TargetResolver } from "./target.ts";

export interface EngineDeps {
  releases: ReleaseLoader;
  targets: TargetResolver;
  /** Requeue interval while Deployments become Available (--remote-deployments-poll-interval). */
  pollIntervalMs: number;
  /** Objects applied at once per cluster. */
  applyConcurrency: number;
  now(): Date;
  log: Logger;
}

export interface ReconcileOutcome {
  status: KnativeStatus;
  /** "hub" or the ClusterProfile `namespace/name`. */
  cluster: string;
  /** Re-check after this long (Deployments still becoming Available). */
  requeueAfterMs?: number;
  /** Requests sent to the target cluster by this reconcile (reads and writes). */
  requests?: number;
  /** Set when the reconcile failed and should be retried with backoff (after the status is written). */
  error?: Error;
  apply?: ApplyOutcome;
}

/**
 * One level-based pass of the upstream operator's stages for a CR: version eligibility, target cluster,
 * render, apply, health. It reads the world and acts on the difference; the caller writes the returned
 * status only if it differs from the stored one.
 */
export async function reconcileInstall(
  resource: KnativeResource,
  deps: EngineDeps,
): Promise<ReconcileOutcome> {
  const now = deps.now();
  const cluster = clusterLabel(resource.spec.clusterProfileRef);
  let conditions = initialize(resource.status?.conditions ?? [], now);
  const mark = (update: ConditionUpdate) => {
    conditions = markCondition(conditions, update, now);
  };
  const statusWith = (extra: Partial<KnativeStatus> = {}): KnativeStatus => ({
    ...(resource.status ?? {}),
    observedGeneration: resource.metadata.generation,
    conditions,
    ...extra,
  });
  const failInstall = (err: unknown): ReconcileOutcome => {
    const message = err instanceof Error ? err.message : String(err);
    mark({
      type: ConditionType.InstallSucceeded,
      status: "False",
      reason: "Error",
      message: `Install failed with message: ${message}`,
    });
    return { status: statusWith(), cluster, error: err instanceof Error ? err : new Error(message) };
  };

  let release: Release;
  try {
    release = await deps.releases.load(resource);
  } catch (err) {
    // An unknown version waits for a spec change: retrying cannot make it appear.
    if (err instanceof VersionError) return { ...failInstall(err), error: undefined };
    return failInstall(err);
  }

  const migration = checkVersionMigration(resource.kind, resource.status?.version, release.version);
  mark(migration);
  if (migration.status === "False") return { status: statusWith(), cluster }; // nothing is touched

  const target = await deps.targets.resolve(resource.spec.clusterProfileRef);
  if (!target.ok) {
    mark({
      type: ConditionType.TargetClusterResolved,
      status: "False",
      reason: target.reason,
      message: target.message,
    });
    return { status: statusWith(), cluster, error: new Error(`${target.reason}: ${target.message}`) };
  }
  mark({ type: ConditionType.TargetClusterResolved, status: "True" });
  const requestsBefore = totalRequests(target.client);

  const owner = ownerOf(resource);
  let namespace: string;
  let desired: KubeObject[];
  let applied: ApplyOutcome;
  try {
    ({ namespace } = await locateInstall(target.client, resource));
    desired = renderInstall(resource, release, namespace);
    applied = await applyInstall(
      {
        client: target.client,
        owner,
        namespace,
        namespaceMetadata: resource.spec.namespace,
        anchorOwner: target.local ? ownerRefTo(resource) : undefined,
        concurrency: deps.applyConcurrency,
      },
      desired,
    );
  } catch (err) {
    return failInstall(err);
  }
  mark({ type: ConditionType.InstallSucceeded, status: "True" });
  if ((findCondition(conditions, ConditionType.DependenciesInstalled)?.status ?? "Unknown") === "Unknown") {
    mark({ type: ConditionType.DependenciesInstalled, status: "True" });
  }
  if (applied.drift.length > 0) {
    deps.log.info(
      {
        cr: `${resource.metadata.namespace}/${resource.metadata.name}`,
        cluster,
        drift: applied.drift.length,
      },
      "restored drifted objects",
    );
  }

  const namespaces = [
    ...new Set(desired.filter((o) => o.kind === "Deployment").map((o) => o.metadata.namespace ?? namespace)),
  ];
  const live = (
    await Promise.all(
      namespaces.map((ns) =>
        target.client.list("apps/v1", "Deployment", { namespace: ns, labelSelector: selectorFor(owner) }),
      ),
    )
  ).flatMap((l) => l.items);
  const waiting = unavailableDeployments(desired, live);
  const manifests = [...release.locations];
  if (waiting.length > 0) {
    mark({
      type: ConditionType.DeploymentsAvailable,
      status: "False",
      reason: "NotReady",
      message: `Waiting on deployments: ${waiting.join(", ")}`,
    });
    return {
      status: statusWith({ manifests }),
      cluster,
      requeueAfterMs: deps.pollIntervalMs,
      apply: applied,
      requests: totalRequests(target.client) - requestsBefore,
    };
  }
  mark({ type: ConditionType.DeploymentsAvailable, status: "True" });
  return {
    status: statusWith({ manifests, version: release.version }),
    cluster,
    apply: applied,
    requests: totalRequests(target.client) - requestsBefore,
  };
}

const totalRequests = (client: KubeClient): number =>
  [...client.rest.requestCounts.values()].reduce((sum, n) => sum + n, 0);

/** Every dependency condition present (Unknown when never set), as upstream's InitializeConditions does. */
function initialize(conditions: Condition[], now: Date): Condition[] {
  let out = conditions;
  for (const type of [
    ConditionType.DependenciesInstalled,
    ConditionType.DeploymentsAvailable,
    ConditionType.InstallSucceeded,
    ConditionType.VersionMigrationEligible,
    ConditionType.TargetClusterResolved,
  ]) {
    if (!findCondition(out, type)) out = markCondition(out, { type, status: "Unknown" }, now);
  }
  return out;
}

function ownerRefTo(resource: KnativeResource) {
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    name: resource.metadata.name,
    uid: String(resource.metadata.uid ?? ""),
  };
}
