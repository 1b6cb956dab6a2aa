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
  | "helm";

/**
 * Builds (first time, or after a version bump) the sandbox's binaries from Go modules and returns the
 * cache directory that holds them. Progress and timings go to stderr.
 */
export function ensureTools(): string {
  const out = execFileSync("bash", [buildScript], { stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" });
  const lines = out.trim().split("\n");
  return lines[lines.length - 1]!;
}

export const toolPath = (binDir: string, tool: ToolName): string => join(binDir, tool);

/** kwok's stage definitions, assembled from its module by build-tools.sh next to the binary. */
export function kwokStagesPath(binDir: string): string {
  const target = readlinkSync(join(binDir, "kwok")); // kwok -> kwok-<version>
  return join(binDir, `${target.replace(/^kwok-/, "kwok-stages-")}.yaml`);
}
