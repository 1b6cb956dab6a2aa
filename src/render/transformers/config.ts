import type { CommonSpec } from "../../api/knative.ts";
import {
  lookup,
  type StringMap,
  setConfigMapData,
  type Transformer,
  unchanged,
  updateWhere,
} from "../manifest.ts";

type ConfigMapData = NonNullable<CommonSpec["config"]>;

const CONFIG_PREFIX = "config-";

/**
 * spec.config entries for the ConfigMap `name`: keyed by the full name or, upstream's shorthand, without the
 * `config-` prefix (`network` for config-network). The full name wins when both are given.
 */
function configEntriesFor(config: ConfigMapData | undefined, name: string): StringMap | undefined {
  return (
    lookup(config, name) ??
    (name.startsWith(CONFIG_PREFIX) ? lookup(config, name.slice(CONFIG_PREFIX.length)) : undefined)
  );
}

/** Merges spec.config into the ConfigMaps' data: given keys are set, the release's other keys stay. */
export function applyConfig(config: ConfigMapData | undefined): Transformer {
  if (!config || Object.keys(config).length === 0) return unchanged;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        manifest.kind === "ConfigMap" && configEntriesFor(config, manifest.metadata.name ?? "") !== undefined,
      (configMap) => {
        setConfigMapData(configMap, configEntriesFor(config, configMap.metadata.name ?? "")!);
      },
    );
}
