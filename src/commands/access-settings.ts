import { ConfigError, loadFleetSettings, type ServiceConfig } from "../service/config.ts";
import type { AccessSettings, FleetSettings } from "../sync/settings.ts";
import { UsageError } from "./command.ts";

/**
 * The settings of the service's config file (`--config`, the file `run` reads), or the service's defaults
 * without one, so `plan`, `validate` and `clusters` treat files and spokes exactly as the service will. A bad
 * file is a usage error naming the file, line and field.
 */
export function commandSettings(configFile: string | undefined): {
  settings: FleetSettings;
  config?: ServiceConfig;
} {
  try {
    return loadFleetSettings(configFile);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
}

/** Which ClusterProfiles a command may use and what they may ask for: the service's, so they agree. */
export const accessSettings = (configFile: string | undefined): AccessSettings =>
  commandSettings(configFile).settings.access;
