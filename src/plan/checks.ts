import { KUBERNETES_VERSION_UNSUPPORTED } from "../api/conditions.ts";
import type { KnativeResource } from "../api/knative.ts";
import { clusterKey, clusterLabel } from "../fleet/identity.ts";
import { installNamespace, sameClusterProfile } from "../install/identity.ts";
import type { KubeObject } from "../kube/object.ts";
import type { PlacementPlan } from "../placement/plan.ts";
import type { Preflight } from "../preflight/index.ts";
import {
  checkKubernetesVersion,
  checkVersionMigration,
  type Release,
  VersionError,
} from "../render/index.ts";
import type { RolloutPlan } from "../rollout/plan.ts";
import { maskText } from "./mask.ts";
import type { Finding, FleetFinding } from "./report.ts";

// Checks of an added or changed CR that stop the hub controller, or change more than the diff suggests.

/** Why head's manifests could not be loaded or rendered. */
export function renderFailure(err: unknown): Finding {
  const message = maskText(err instanceof Error ? err.message : String(err));
  return err instanceof VersionError
    ? { severity: "error", code: "version-unknown", message }
    : { severity: "error", code: "render-failed", message };
}

/** A move of more than one minor from the installed version: refused, nothing on the cluster changes. */
export function versionJump(
  resource: KnativeResource,
  installed: string | undefined,
  release: Release,
): Finding | undefined {
  const eligibility = checkVersionMigration(resource.kind, installed, release.version);
  if (eligibility.status === "True") return undefined;
  return {
    severity: "error",
    code: "version-jump",
    message:
      `${installed} -> ${release.version}: ${eligibility.message} The hub controller refuses it ` +
      "(VersionMigrationEligible=False) and changes nothing on the cluster; upgrade one minor at a time.",
  };
}

/**
 * Each cluster's Kubernetes version as its ClusterProfile reports it (status.version.kubernetes), by
 * `namespace/name`: what the plan knows of a cluster's Kubernetes without reaching it.
 */
export function clusterKubernetesVersions(profiles: readonly KubeObject[]): Map<string, string> {
  const versions = new Map<string, string>();
  for (const { kind, metadata, status } of profiles) {
    const version = (status as { version?: { kubernetes?: unknown } } | undefined)?.version?.kubernetes;
    if (kind === "ClusterProfile" && typeof version === "string") {
      versions.set(clusterKey({ namespace: metadata.namespace ?? "", name: metadata.name ?? "" }), version);
    }
  }
  return versions;
}

/** The cluster's Kubernetes is older than the release needs: the hub controller applies nothing to it. */
export function kubernetesTooOld(kubernetes: string | undefined, release: Release): Finding | undefined {
  const check = checkKubernetesVersion(kubernetes, release.version);
  if (check.compatible) return undefined;
  return {
    severity: "error",
    code: "kubernetes-version",
    message:
      `${check.message}, by the cluster's ClusterProfile (status.version.kubernetes). The hub controller ` +
      `applies nothing to it (InstallSucceeded=False, ${KUBERNETES_VERSION_UNSUPPORTED}) until it is upgraded.`,
  };
}

/**
 * Live, whether the cluster is ready for head's CR (src/preflight: its Kubernetes for the release spec.version
 * resolves to, the ingress's and TLS settings' CRDs, the support window), each finding led by its reason.
 */
export async function spokePreflight(preflight: Preflight, resource: KnativeResource): Promise<Finding[]> {
  const { findings } = await preflight.check(resource.spec.clusterProfileRef, resource);
  return findings.map(({ severity, reason, message }) => ({
    severity,
    code: "preflight",
    message: maskText(`${reason}: ${message}`),
  }));
}

/** spec.clusterProfileRef is immutable (the CRD's validation rule): the hub refuses the whole update. */
export function clusterChange(base: KnativeResource, head: KnativeResource): Finding | undefined {
  const [from, to] = [base.spec.clusterProfileRef, head.spec.clusterProfileRef];
  if (sameClusterProfile(from, to)) return undefined;
  return {
    severity: "error",
    code: "cluster-immutable",
    message:
      `spec.clusterProfileRef changes from ${clusterLabel(from)} to ${clusterLabel(to)}, which the hub refuses: ` +
      "the CR keeps its cluster. To move Knative, add a CR with another name for the new cluster and remove this one.",
  };
}

const INGRESS_CLASS_KEYS = ["ingress-class", "ingress.class"];

/**
 * A Serving whose ingress changes on a cluster that has it installed: other ingress objects, and Knative
 * routes switch to the new ingress class, so traffic through the old ingress stops.
 */
export function ingressChange(
  resource: KnativeResource,
  before: { release: Release | undefined; objects: Iterable<KubeObject> },
  after: { release: Release; objects: Iterable<KubeObject> },
): Finding | undefined {
  if (resource.kind !== "KnativeServing") return undefined;
  const namespace = installNamespace(resource);
  const [wasClass, willClass] = [
    ingressClass(before.objects, namespace),
    ingressClass(after.objects, namespace),
  ];
  const [was, will] = [before.release?.ingresses.join(", "), after.release.ingresses.join(", ")];
  const changes = [
    ...(was !== undefined && was !== will ? [`the ingress changes from ${was} to ${will}`] : []),
    ...(wasClass !== willClass
      ? [`ingress-class changes from ${wasClass || "unset"} to ${willClass || "unset"}`]
      : []),
  ];
  if (changes.length === 0) return undefined;
  return {
    severity: "warning",
    code: "ingress-change",
    message:
      `${changes.join("; ")}: Knative routes move to the new ingress, and traffic through the old one ` +
      "stops once its objects are pruned.",
  };
}

/** config-network's ingress-class ("" when unset), or undefined when the objects hold no config-network. */
function ingressClass(objects: Iterable<KubeObject>, namespace: string): string | undefined {
  for (const object of objects) {
    if (object.kind !== "ConfigMap" || object.metadata.name !== "config-network") continue;
    if (object.metadata.namespace !== namespace) continue;
    const data = (object.data ?? {}) as Record<string, string>;
    return INGRESS_CLASS_KEYS.map((key) => data[key]).find((value) => value !== undefined) ?? "";
  }
  return undefined;
}

/** The hub's admission refuses the CR, or another repository owns its name: nothing of it is applied. */
export function hubRefuses(refusal: string): Finding {
  return {
    severity: "error",
    code: "hub-refuses",
    message: `${maskText(refusal)}; the mirror does not write it, and nothing is pruned while it is refused`,
  };
}

/**
 * A placement that selects no cluster after the merge: a warning, naming the clusters it selected before
 * (their CRs go once the grace period ends). Placements whose selection is unknown for the same reason
 * (the hub's ClusterProfiles are needed): one warning naming them all, so the reason is said once.
 */
export function placementFindings(plan: PlacementPlan, gracePeriod: string): FleetFinding[] {
  const pending = Map.groupBy(
    plan.placements.filter((entry) => entry.pending !== undefined),
    (entry) => entry.pending!,
  );
  const unknown = [...pending].map(([reason, entries]): FleetFinding => {
    const one = entries.length === 1;
    return {
      subject: one ? entries[0]!.placement : entries.map((entry) => entry.placement).join(", "),
      severity: "warning",
      code: "placement-unknown",
      message: `what ${one ? "it selects" : `these ${entries.length} placements select`} is unknown (${reason}): ${one ? "its" : "their"} CRs are not in this plan`,
    };
  });
  const none = plan.placements.flatMap((entry): FleetFinding[] => {
    if (entry.pending !== undefined || entry.after === undefined || entry.after.length > 0) return [];
    const lost = entry.before ?? [];
    return [
      {
        subject: entry.placement,
        severity: "warning",
        code: "placement-selects-none",
        message:
          lost.length > 0
            ? `selects ${lost.join(", ")} before the merge and no cluster after it: ${lost.length === 1 ? "its CR is" : "their CRs are"} pruned once the departure grace period (${gracePeriod}) ends, uninstalling Knative there`
            : "selects no cluster after the merge",
      },
    ];
  });
  return [...unknown, ...none];
}

/** Removing or breaking the rollout policy, or setting allAtOnce: what the next change then does. */
export function rolloutFindings(plan: RolloutPlan | undefined): FleetFinding[] {
  if (plan === undefined) return [];
  if (plan.removed !== undefined) {
    return [
      {
        subject: plan.removed,
        severity: "warning",
        code: "rollout-removed",
        message:
          "the merge removes the rollout policy: from then on every change goes to every cluster at once, " +
          "without waves, soak or health checks",
      },
    ];
  }
  if (plan.policy === undefined) {
    return [
      {
        subject: plan.failedPaths.join(", "),
        severity: "warning",
        code: "rollout-invalid",
        message: "the rollout policy fails validation: after the merge every change waits until it is fixed",
      },
    ];
  }
  if (!plan.allAtOnce) return [];
  return [
    {
      subject: plan.policy,
      severity: "warning",
      code: "rollout-all-at-once",
      message:
        "allAtOnce is set: the merge goes to every cluster at once, without waves, soak or health checks",
    },
  ];
}
