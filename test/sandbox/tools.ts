import { execFileSync } from "node:child_process";
import { readlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const buildScript = join(dirname(fileURLToPath(import.meta.url)), "build-tools.sh");

export type ToolName =
  | "etcd"
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kube-scheduler"
  | "kwok"
  | "secretreader"
  | "kubeconfig-secretreader"
  | "helm"
  | "kubectl"
  | "gitea";

/**
 * Builds (first time, or after a version bump) the sandbox's binaries from Go modules and returns the
 * cache directory that holds them; `names` builds only those (kubelet and kubectl are built only when named).
 * Progress and timings go to stderr.
 */
export function ensureTools(...names: string[]): string {
  const out = execFileSync("bash", [buildScript, ...names], {
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
  });
  const lines = out.trim().split("\n");
  return lines[lines.length - 1]!;
}

export const toolPath = (binDir: string, tool: ToolName): string => join(binDir, tool);

/** kwok's stage definitions, assembled from its module by build-tools.sh next to the binary. */
export function kwokStagesPath(binDir: string): string {
  const target = readlinkSync(join(binDir, "kwok")); // kwok -> kwok-<version>
  return join(binDir, `${target.replace(/^kwok-/, "kwok-stages-")}.yaml`);
}

/**
 * Gitea's static root (its options/, templates/ and public/, which a build without bindata reads at run
 * time), copied from its module by build-tools.sh next to the binary.
 */
export function giteaStaticRoot(binDir: string): string {
  const target = readlinkSync(join(binDir, "gitea")); // gitea -> gitea-<version>
  return join(binDir, `${target}-static`);
}
