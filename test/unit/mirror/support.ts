import type { KnativeKind } from "../../../src/api/knative.ts";
import { buildFleetModel, type FleetFile, type FleetModel } from "../../../src/fleet/model.ts";
import { type MirrorInput, MirrorOptionsSchema, type MirrorSource } from "../../../src/mirror/decide.ts";
import { ANY_NAMESPACE_ADMISSION, crFile as sharedCrFile } from "../../support/fleet-files.ts";

export const REPOSITORY = "https://git.example/platform/fleet.git";

export const sourceAt = (commit: string): MirrorSource => ({
  repository: REPOSITORY,
  branch: "main",
  commit,
});

export interface MirrorCrOptions {
  kind?: KnativeKind;
  namespace: string;
  version?: string;
  annotations?: Record<string, string>;
}

/**
 * A fleet file declaring one CR. Each CR targets a ClusterProfile of its own name, which no sandbox cluster
 * has: nothing may install anything, and one cluster runs one CR of a kind.
 */
export const crFile = (name: string, options: MirrorCrOptions): FleetFile =>
  sharedCrFile({
    ...options,
    name,
    version: options.version ?? "1.22",
    cluster: name,
    clusterNamespace: "nowhere",
  });

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
    options: MirrorOptionsSchema.parse(options),
    namespace,
    admission: ANY_NAMESPACE_ADMISSION,
  };
}
