import { buildFleetModel, type FleetFile, type FleetModel } from "../../../src/fleet/model.ts";
import { type MirrorInput, MirrorOptionsSchema, type MirrorSource } from "../../../src/mirror/decide.ts";
import { ANY_NAMESPACE_ADMISSION, TEST_REPOSITORY } from "../../support/fleet-files.ts";

/** The mirror's tests declare CRs that install nowhere. */
export { inertCrFile as crFile } from "../../support/fleet-files.ts";

export const sourceAt = (commit: string): MirrorSource => ({
  repository: TEST_REPOSITORY,
  branch: "main",
  commit,
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
