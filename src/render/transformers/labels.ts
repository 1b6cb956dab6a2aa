import { NAME_LABEL } from "../../api/labels.ts";
import { type Transformer, updateWhere } from "../manifest.ts";
import type { Component } from "../source.ts";

/**
 * Every object says which component it belongs to: upstream labels the objects a release ships without
 * `app.kubernetes.io/name` (Serving's internal Certificate, Eventing's Roles and some ConfigMaps) with the
 * component's name, and keeps the label where the release sets it.
 */
export function labelComponentName(component: Component): Transformer {
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.metadata.labels?.[NAME_LABEL] === undefined,
      ({ metadata }) => {
        metadata.labels = { ...metadata.labels, [NAME_LABEL]: component };
      },
    );
}
