import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/**
 * The `../shared` data directory (real Knative release manifests, CRDs) that sits beside the project.
 * It is read in place, never copied into the repository. Override with KNATIVE_FLEET_SHARED.
 */
export function sharedDir(): string {
  const dir = process.env.KNATIVE_FLEET_SHARED ?? join(repoRoot, "..", "shared");
  if (!existsSync(join(dir, "knative-releases"))) {
    throw new Error(
      `the shared test data is missing: expected ${dir}/knative-releases (the Knative release manifests in the ` +
        "operator's kodata layout) and crds/. Put the project's shared/ folder beside the repository or set " +
        "KNATIVE_FLEET_SHARED; the same files are published with the Knative releases " +
        "(https://github.com/knative/serving/releases, https://github.com/knative/eventing/releases) and " +
        "cluster-inventory-api (config/crd/bases).",
    );
  }
  return dir;
}

export const knativeReleasesDir = (): string => join(sharedDir(), "knative-releases");
export const clusterProfileCrdPath = (): string =>
  join(sharedDir(), "crds", "multicluster.x-k8s.io_clusterprofiles.yaml");
export const upstreamOperatorCrdsDir = (): string => join(sharedDir(), "reference", "knative-operator-crds");
