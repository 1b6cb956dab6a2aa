import { ClusterAccess } from "../access/cluster-access.ts";
import type { AccessPolicy } from "../access/policy.ts";
import { loadProviderConfig } from "../access/provider-config.ts";
import { createTargetResolver } from "../access/target.ts";
import type { LocationPolicy } from "../admission/locations.ts";
import type { CrAdmission } from "../admission/tenancy.ts";
import type { FleetFile } from "../fleet/file-text.ts";
import { type ClusterRef, clusterLabel, identityOf } from "../fleet/identity.ts";
import { DeploymentWatches } from "../install/deployment-watch.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../observability/log.ts";
import { createKodataSource, ReleaseLoader } from "../render/index.ts";
import { KnativeController, type ReconcileReport } from "./controller.ts";
import { locatorOver } from "./drift.ts";

interface ReconcilerOptions {
  /** The process's one hub client. */
  hub: KubeClient;
  /** The access-provider file (cluster-inventory-api pkg/access JSON); unset = multicluster off. */
  providerFile?: string;
  /** ClusterProfile namespaces a CR may reference; all when unset. */
  allowedClusterProfileNamespaces?: readonly string[];
  /** What a ClusterProfile may ask for beyond the safe defaults. */
  accessPolicy?: AccessPolicy;
  /** Which hub CRs are reconciled (tenancy); all when unset. */
  admits?: CrAdmission;
  /** Whether CRs without clusterProfileRef may install on the hub itself (default false). */
  hubInstall?: boolean;
  /** Release manifests in the upstream kodata layout. */
  kodataDir: string;
  /** Which spec.manifests / spec.additionalManifests locations may be read; default: none but kodata. */
  manifestLocations?: LocationPolicy;
  /**
   * The releases, parsed once and shared with the caller (the service's sync checks settings against the
   * same ones); else a loader of its own over kodataDir and manifestLocations.
   */
  releases?: ReleaseLoader;
  pollIntervalMs: number;
  /** How often a converged CR is checked for drift on its cluster. */
  resyncIntervalMs: number;
  workers: number;
  /** At most this many workers on one cluster at once; unbounded (up to `workers`) when unset. */
  workersPerCluster?: number;
  applyConcurrency: number;
  /** The fleet repository's files at a commit: drift records name the line of a fleet file to edit. */
  fleetFilesAt?(commit: string): Promise<{ files: FleetFile[] }>;
  log: Logger;
  onReconciled?(report: ReconcileReport): void;
  /** The sharding filter: whether this replica reconciles a cluster's CRs now; all when unset. */
  owns?(cluster: string): boolean;
  onStatusChanged?(): void;
  /** A ClusterProfile left the inventory (its `namespace/name`). */
  onClusterLeft?(cluster: string): void;
  onPluginRun?(run: { provider: string; cluster: string; durationMs: number; error: boolean }): void;
}

export interface Reconciler {
  controller: KnativeController;
  access: ClusterAccess;
  /** The Deployment watches of installs rolling out. */
  deploymentWatches: DeploymentWatches;
  /**
   * Lets go at once of every cluster `owns` no longer admits: its spoke client is closed (requests in
   * flight aborted) and its Deployment watches stop. Reconciles still running on it fail and write nothing.
   */
  releaseUnowned(): void;
  stop(): Promise<void>;
}

/** Below this a poll interval is a mistake (a hot loop against every spoke); upstream's rule. */
const MIN_POLL_INTERVAL_MS = 1_000;
const DEFAULT_POLL_INTERVAL_MS = 10_000;
/** After a Deployment watch of a cluster's namespace failed, that namespace is polled this long before watching again. */
const WATCH_FALLBACK_MS = 300_000;

/** --remote-deployments-poll-interval: below 1 s falls back to the default, as upstream does. */
export function effectivePollInterval(requestedMs: number | undefined): number {
  return requestedMs === undefined || requestedMs < MIN_POLL_INTERVAL_MS
    ? DEFAULT_POLL_INTERVAL_MS
    : requestedMs;
}

/**
 * Wires the reconcile stage: hub client, cluster access (ClusterProfile watch: a changed ClusterProfile
 * requeues its CRs at once), release manifests, and the controller. Resolves once the caches are synced.
 */
export async function startReconciler(options: ReconcilerOptions): Promise<Reconciler> {
  const { hub } = options;
  const providers = await loadProviderConfig(options.providerFile);
  const access = new ClusterAccess({
    hub,
    providers,
    namespaces: options.allowedClusterProfileNamespaces,
    policy: options.accessPolicy,
    logger: options.log,
    owns: options.owns,
    onPluginRun: options.onPluginRun,
  });
  const deploymentWatches = new DeploymentWatches({
    wake: (resource) => controller.enqueue(identityOf(resource)),
    fallbackMs: WATCH_FALLBACK_MS,
    onWatchError: (cluster, namespace, err) =>
      options.log.warn(
        { cluster, namespace, err: String(err) },
        "watching Deployments failed; polling every --remote-deployments-poll-interval",
      ),
  });
  const controller: KnativeController = new KnativeController({
    hub,
    workers: options.workers,
    workersPerCluster: options.workersPerCluster,
    owns: options.owns,
    ...(providers.enabled && { contact: (cluster: ClusterRef) => access.contact(cluster) }),
    onStatusChanged: options.onStatusChanged,
    resyncIntervalMs: options.resyncIntervalMs,
    onReconciled: options.onReconciled,
    admits: options.admits,
    deps: {
      releases:
        options.releases ??
        new ReleaseLoader(createKodataSource({ dir: options.kodataDir, policy: options.manifestLocations })),
      targets: createTargetResolver(hub, access, {
        hubInstall: options.hubInstall ?? false,
      }),
      pollIntervalMs: options.pollIntervalMs,
      deploymentWatches,
      applyConcurrency: options.applyConcurrency,
      ...(options.fleetFilesAt && { locate: locatorOver(options.fleetFilesAt) }),
      now: () => new Date(),
      log: options.log,
    },
  });
  options.log.info(
    { pollIntervalMs: options.pollIntervalMs, multicluster: providers.enabled, workers: options.workers },
    providers.enabled ? "reconciler starting" : `reconciler starting; multicluster off: ${providers.why}`,
  );
  if (providers.enabled) {
    access.onClusterProfileChange((ref, change) => {
      if (change === "deleted") options.onClusterLeft?.(clusterLabel(ref));
      controller.enqueueCluster(clusterLabel(ref));
    });
    await access.watch();
  }
  await controller.start();
  return {
    controller,
    access,
    deploymentWatches,
    releaseUnowned() {
      const owns = options.owns;
      if (!owns) return;
      deploymentWatches.releaseClusters((cluster) => !owns(cluster));
      access.releaseUnowned();
    },
    async stop() {
      await controller.stop();
      deploymentWatches.stop();
      await access.close();
    },
  };
}
