import type { KnativeKind } from "../../../src/api/knative.ts";
import { buildFleetModel, type FleetFile, type FleetModel } from "../../../src/fleet/model.ts";
import { type MirrorInput, MirrorOptionsSchema, type MirrorSource } from "../../../src/mirror/plan.ts";

export const REPOSITORY = "https://git.example/platform/fleet.git";

export const sourceAt = (commit: string): MirrorSource => ({
  repository: REPOSITORY,
  branch: "main",
  commit,
});

export interface CrOptions {
  kind?: KnativeKind;
  namespace: string;
  version?: string;
  annotations?: Record<string, string>;
}

/**
 * A fleet file declaring one CR. Each CR targets a ClusterProfile of its own name, which no sandbox cluster
 * has: nothing may install anything, and one cluster runs one CR of a kind.
 */
export function crFile(name: string, options: CrOptions): FleetFile {
  const annotations = Object.entries(options.annotations ?? {});
  return {
    path: `clusters/${name}.yaml`,
    text: [
      "apiVersion: operator.knative.dev/v1beta1",
      `kind: ${options.kind ?? "KnativeServing"}`,
      "metadata:",
      `  name: ${name}`,
      `  namespace: ${options.namespace}`,
      ...(annotations.length > 0
        ? ["  annotations:", ...annotations.map(([key, value]) => `    ${key}: ${JSON.stringify(value)}`)]
        : []),
      "spec:",
      `  version: "${options.version ?? "1.22"}"`,
      "  clusterProfileRef:",
      `    name: ${name}`,
      "    namespace: nowhere",
      "",
    ].join("\n"),
  };
}

export const modelOf = (files: readonly FleetFile[], namespace: string): FleetModel =>
  buildFleetModel(files, { defaultNamespace: namespace });

export function mirrorInput(
  files: readonly FleetFile[],
  namespace: string,
  commit: string,
  options: Partial<MirrorInput["options"]> = {},
): MirrorInput {
  return {
    model: modelOf(files, namespace),
    source: sourceAt(commit),
    sourceRead: true,
    options: MirrorOptionsSchema.parse(options),
    namespace,
  };
}
