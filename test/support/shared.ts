import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

// Where the same files are published: the fallback when ../shared is not beside the checkout.
export const CLUSTER_INVENTORY_CRDS_URL =
  "https://raw.githubusercontent.com/kubernetes-sigs/cluster-inventory-api/v0.1.2/config/crd/bases";
/** The Cluster Inventory API's CRDs in ../shared/crds, as release v0.1.2 publishes them. */
const CLUSTER_INVENTORY_CRDS = [
  "multicluster.x-k8s.io_clusterprofiles.yaml",
  "multicluster.x-k8s.io_placementdecisions.yaml",
] as const;
const OPERATOR_CRD_URL = (kind: string) =>
  `https://raw.githubusercontent.com/knative/operator/main/config/crd/bases/operator.knative.dev_${kind}.yaml`;

/**
 * The folder of the shared data that holds the Knative releases: the four minors of the upstream operator's
 * window (Serving and Eventing 1.20 to 1.23, ingress 1.20 to 1.23) in its kodata layout.
 */
const RELEASES_FOLDER = "knative-releases-all";

/**
 * The shared test data (real Knative release manifests in the operator's kodata layout, the ClusterProfile
 * CRD, the upstream operator CRDs for reference). Read in place, never copied into the repository:
 * KNATIVE_FLEET_SHARED, else `../shared` beside the checkout, else downloaded once from the public release
 * locations into ~/.cache/knative-fleet/shared.
 */
export function sharedDir(): string {
  const explicit = process.env.KNATIVE_FLEET_SHARED;
  if (explicit) {
    if (!existsSync(join(explicit, RELEASES_FOLDER))) {
      throw new Error(`KNATIVE_FLEET_SHARED=${explicit} has no ${RELEASES_FOLDER}/ folder`);
    }
    return explicit;
  }
  const beside = join(repoRoot, "..", "shared");
  return existsSync(join(beside, RELEASES_FOLDER)) ? beside : downloadedShared();
}

function downloadedShared(): string {
  const dir = join(process.env.KNATIVE_FLEET_CACHE ?? join(homedir(), ".cache", "knative-fleet"), "shared");
  const complete = join(dir, ".complete");
  // A download made before the window grew holds another folder (or fewer CRDs): fetched again.
  const crds = CLUSTER_INVENTORY_CRDS.map((file) => join(dir, "crds", file));
  if (existsSync(complete) && existsSync(join(dir, RELEASES_FOLDER)) && crds.every((f) => existsSync(f)))
    return dir;
  process.stderr.write(
    `knative-fleet: ../shared is not beside the checkout; downloading the Knative releases and CRDs from their ` +
      `public release locations into ${dir} (once)\n`,
  );
  try {
    execFileSync("sh", [join(repoRoot, "scripts", "fetch-kodata.sh"), join(dir, RELEASES_FOLDER)], {
      stdio: "inherit",
    });
    const download = (url: string, file: string) => {
      mkdirSync(dirname(file), { recursive: true });
      execFileSync("curl", ["-fsSL", "--retry", "3", "-o", file, url], { stdio: "inherit" });
    };
    for (const file of CLUSTER_INVENTORY_CRDS)
      download(`${CLUSTER_INVENTORY_CRDS_URL}/${file}`, join(dir, "crds", file));
    for (const kind of ["knativeservings", "knativeeventings"]) {
      download(
        OPERATOR_CRD_URL(kind),
        join(dir, "reference", "knative-operator-crds", `operator.knative.dev_${kind}.yaml`),
      );
    }
    writeFileSync(complete, "");
    return dir;
  } catch (err) {
    throw new Error(
      `the shared test data is missing: no ../shared beside the checkout, KNATIVE_FLEET_SHARED is unset, and the ` +
        `download from the public release locations failed (${(err as Error).message}). Put the project's shared/ ` +
        `folder beside the repository, or set KNATIVE_FLEET_SHARED to a folder with ${RELEASES_FOLDER}/ (the ` +
        "operator's kodata layout), crds/ and reference/knative-operator-crds/.",
    );
  }
}

export const knativeReleasesDir = (): string => join(sharedDir(), RELEASES_FOLDER);
/** A Cluster Inventory API CRD by its file name in the release (`multicluster.x-k8s.io_<plural>.yaml`). */
export function clusterInventoryCrdPath(file: string): string {
  if (!(CLUSTER_INVENTORY_CRDS as readonly string[]).includes(file))
    throw new Error(`the shared data holds no Cluster Inventory API CRD ${file} (${CLUSTER_INVENTORY_CRDS})`);
  return join(sharedDir(), "crds", file);
}
export const clusterProfileCrdPath = (): string => clusterInventoryCrdPath(CLUSTER_INVENTORY_CRDS[0]);
export const upstreamOperatorCrdsDir = (): string => join(sharedDir(), "reference", "knative-operator-crds");
