// The preflight stage: whether a spoke is ready for a CR before an upgrade step opens on it.

import type { ClusterAccess } from "../access/cluster-access.ts";
import { AccessError } from "../access/errors.ts";
import { createTargetResolver, type TargetResolver } from "../access/target.ts";
import type { KnativeKind, KnativeResource } from "../api/knative.ts";
import { type ClusterRef, clusterLabel } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import { COMPONENT_OF_KIND, type ReleaseLoader } from "../render/index.ts";
import { type PreflightResult, preflight } from "./preflight.ts";
import { SpokeSurveys } from "./survey.ts";

export {
  type PreflightFinding,
  type PreflightResult,
  preflight,
  type SpokeFacts,
} from "./preflight.ts";
export { endOfSupport } from "./support-window.ts";
export { SpokeSurveys, surveySpoke } from "./survey.ts";

/** What the rollout (and plan) ask before a CR's step opens on its cluster. */
export interface Preflight {
  /**
   * Whether `cluster` is ready for `desired`, the CR about to be applied. Never throws for the cluster's
   * sake: an unreachable cluster is an error finding with the access reason (RemoteClientCreationFailed, ...).
   */
  check(cluster: ClusterRef | undefined, desired: KnativeResource): Promise<PreflightResult>;
  /** Forgets what was read of a cluster (of all when unset): its next check reads it again. */
  forget(cluster?: ClusterRef): void;
}

interface ClusterPreflightOptions {
  /** The clusters, as the reconcile reaches them. */
  targets: TargetResolver;
  /** The release versions shipped for a kind (ManifestSource.componentVersions): latest and x.y resolve. */
  releases?: (kind: KnativeKind) => Promise<readonly string[]>;
  /** How long a cluster's facts are used (default 5 minutes). */
  ttlMs?: number;
  /** The clock (default the system's). */
  now?: () => Date;
}

/** The preflight over the cluster access: one survey per cluster per TTL, shared by concurrent checks. */
export function createPreflight(options: ClusterPreflightOptions): Preflight {
  const now = options.now ?? (() => new Date());
  const surveys = new SpokeSurveys({ ttlMs: options.ttlMs, now: () => now().getTime() });
  return {
    async check(cluster, desired) {
      const target = await options.targets.resolve(cluster);
      if (!target.ok) {
        return {
          passed: false,
          findings: [{ severity: "error", reason: target.reason, message: target.message }],
        };
      }
      try {
        const [facts, releases] = await Promise.all([
          // The survey is the TTL: within it the version the resolver keeps is read afresh once.
          surveys.facts(target.cluster, target.client, {
            kubernetesVersion: () => target.kubernetesVersion({ fresh: true }),
          }),
          options.releases?.(desired.kind),
        ]);
        return preflight(desired, facts, now(), releases ? { releases } : {});
      } catch (err) {
        const reason = err instanceof AccessError ? err.reason : "PreflightFailed";
        const message = `${target.cluster}: ${err instanceof Error ? err.message : String(err)}`;
        return { passed: false, findings: [{ severity: "error", reason, message }] };
      }
    },
    forget(cluster) {
      surveys.forget(cluster && clusterLabel(cluster));
    },
  };
}

/**
 * The preflight of the service's leader: through the reconciler's cluster access, the releases its loader
 * ships. Its surveys hold a client per cluster only for the TTL's reads; the reconciler owns the access.
 */
export function clusterPreflight(
  hub: KubeClient,
  access: ClusterAccess,
  hubInstall: boolean,
  releases: ReleaseLoader,
): Preflight {
  return createPreflight({
    targets: createTargetResolver(hub, access, { hubInstall }),
    releases: (kind) => releases.availableVersions(COMPONENT_OF_KIND[kind]),
  });
}
