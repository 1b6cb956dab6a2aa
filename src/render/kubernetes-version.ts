import { minorOf, newestFirst } from "./version.ts";

// Every Knative process checks at start that its cluster runs at least the Kubernetes version its
// knative.dev/pkg was built for (version.CheckMinimumVersion, called by sharedmain): below it the webhooks and
// controllers exit, so an install there never becomes Ready. The upstream operator runs the check only for
// the cluster it runs in; here each CR's cluster is checked before anything is applied to it.

/**
 * The minimum per Knative minor: knative.dev/pkg's `version.DefaultKubernetesMinVersion`
 * (version/version.go) in the knative.dev/pkg each release is built with. The release manifests do not say it
 * (no KUBERNETES_MIN_VERSION in them), so this is its one home. Newest first.
 */
const MINIMUM_KUBERNETES: readonly (readonly [knativeMinor: string, kubernetes: string])[] = [
  ["1.23", "v1.34.0"],
  ["1.22", "v1.34.0"],
  ["1.21", "v1.33.0"],
  ["1.20", "v1.32.0"],
];

interface KubernetesVersion {
  major: number;
  minor: number;
  patch: number;
}

// gitVersion as /version reports it (v1.35.4, v1.33.5-gke.1080000, v1.34.1+k3s1) or as a ClusterProfile's
// status.version.kubernetes may hold it (1.34, without the patch).
const KUBERNETES_VERSION = /^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$/;

function parseKubernetesVersion(version: string): KubernetesVersion | undefined {
  const match = KUBERNETES_VERSION.exec(version.trim());
  if (!match) return undefined;
  const [, major, minor, patch] = match;
  return { major: Number(major), minor: Number(minor), patch: Number(patch ?? 0) };
}

/**
 * The oldest Kubernetes a Knative release runs on. A minor newer than the table needs at least what the
 * newest one does (no Knative release has lowered it); one older than the table has no known minimum.
 */
export function minimumKubernetesVersion(knativeVersion: string): string | undefined {
  const minor = minorOf(knativeVersion);
  const exact = MINIMUM_KUBERNETES.find(([knative]) => knative === minor);
  if (exact) return exact[1];
  const [newestMinor, newestMinimum] = MINIMUM_KUBERNETES[0]!;
  return newestFirst(minor, newestMinor) < 0 ? newestMinimum : undefined;
}

/** Whether a cluster running Kubernetes `kubernetes` may get a Knative release, and if not, why. */
export type KubernetesCompatibility = { compatible: true } | { compatible: false; message: string };

/**
 * knative.dev/pkg's comparison: a cluster at the minimum's MAJOR.MINOR.PATCH passes, its pre-releases and
 * builds included (the check allows `-0` and up). A version that cannot be read fails, as it does there; an
 * unknown one (`/version` refused, no ClusterProfile version) is not held against the cluster.
 */
export function checkKubernetesVersion(
  kubernetes: string | undefined,
  knativeVersion: string,
): KubernetesCompatibility {
  const minimum = minimumKubernetesVersion(knativeVersion);
  if (kubernetes === undefined || minimum === undefined) return { compatible: true };
  const need = `${minimum}, the oldest Kubernetes Knative ${knativeVersion} runs on (knative.dev/pkg's minimum version check)`;
  const have = parseKubernetesVersion(kubernetes);
  if (!have) {
    return {
      compatible: false,
      message: `the Kubernetes version "${kubernetes}" cannot be compared with ${need}`,
    };
  }
  const { major, minor, patch } = parseKubernetesVersion(minimum)!;
  if ((have.major - major || have.minor - minor || have.patch - patch) >= 0) return { compatible: true };
  return { compatible: false, message: `Kubernetes ${kubernetes} is older than ${need}` };
}
