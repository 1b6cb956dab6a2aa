import type { FleetFile } from "../../src/fleet/model.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { type MirrorOptions, MirrorOptionsSchema } from "../../src/mirror/decide.ts";
import { hubMirror } from "../../src/mirror/mirror.ts";
import type { Inventory } from "../../src/placement/inventory.ts";
import type { ReleaseLoader } from "../../src/render/index.ts";
import type { FleetSettings } from "../../src/sync/settings.ts";
import {
  fixedPlacements,
  type SyncPlacements,
  type SyncResult,
  type SyncRollout,
  sync,
} from "../../src/sync/sync.ts";
import { ANY_NAMESPACE_SETTINGS, TEST_REPOSITORY } from "./fleet-files.ts";

export interface SyncIntoOptions {
  files: readonly FleetFile[];
  /** knative-fleet's own hub namespace, and that of a CR that names none. */
  namespace: string;
  commit: string;
  repository?: string;
  branch?: string;
  prune?: Partial<MirrorOptions>;
  /** The service's settings beside these (default: any namespace admitted, see ANY_NAMESPACE_SETTINGS). */
  settings?: Partial<FleetSettings>;
  /** What placements select (default: no ClusterProfile at all), or the placements' edge itself. */
  inventory?: Inventory;
  placements?: SyncPlacements;
  rollout?: SyncRollout;
  /** The releases the CRs install (the settings check, the upgrade chains); none by default. */
  releases?: ReleaseLoader;
}

/** One sync of `files` into the hub behind `client`, the service's steps (src/sync/sync.ts). */
export function syncInto(client: KubeClient, options: SyncIntoOptions): Promise<SyncResult> {
  const fleet: FleetSettings = {
    ...ANY_NAMESPACE_SETTINGS,
    defaultNamespace: options.namespace,
    prune: MirrorOptionsSchema.parse(options.prune ?? {}),
    ...options.settings,
  };
  const placements =
    options.placements ??
    fixedPlacements(options.inventory ?? { clusters: [], decisions: [] }, fleet.departureGracePeriodMs);
  return sync(
    {
      source: {
        repository: options.repository ?? TEST_REPOSITORY,
        branch: options.branch ?? "main",
        commit: options.commit,
      },
      files: options.files,
    },
    { fleet, kodataDir: undefined },
    {
      hub: hubMirror(client, options.namespace),
      placements,
      ...(options.rollout && { rollout: options.rollout }),
      ...(options.releases && { releases: options.releases }),
    },
  );
}
