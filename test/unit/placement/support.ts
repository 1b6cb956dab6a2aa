import { buildFleetModel, type FleetModel } from "../../../src/fleet/model.ts";
import type { Inventory, InventoryCluster, InventoryDecision } from "../../../src/placement/inventory.ts";

export { cluster } from "../../support/fleet-files.ts";

export const NS = "knative-fleet";
export const PROFILES = "fleet-system";

export function inventory(
  clusters: InventoryCluster[] | undefined,
  decisions: InventoryDecision[] | undefined = [],
): Inventory {
  return { clusters, decisions };
}

export function model(files: Record<string, string>): FleetModel {
  return buildFleetModel(
    Object.entries(files).map(([path, text]) => ({ path, text })),
    { defaultNamespace: NS },
  );
}

/** A placement file; `selection` and `rest` are YAML indented for `spec:`. */
export function placementFile(name: string, selection: string, rest = "", kind = "KnativeServingPlacement") {
  return `apiVersion: fleet.knative.dev/v1alpha1
kind: ${kind}
metadata:
  name: ${name}
spec:
${selection}
  template:
    spec:
      version: "1.22"
      config:
        autoscaler:
          enable-scale-to-zero: "true"
${rest}`;
}

export const servingFile = (name: string, clusterName: string) => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: ${name}
spec:
  clusterProfileRef:
    name: ${clusterName}
    namespace: ${PROFILES}
`;
