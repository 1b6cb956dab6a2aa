import { describe, expect, it } from "vitest";
import { locateCrField } from "../../../src/fleet/locate.ts";

const perCluster = `# spoke-2's Serving
apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: knative-serving
  namespace: knative-fleet
spec:
  version: "1.22"
  clusterProfileRef: {namespace: fleet-system, name: spoke-2}
  config:
    autoscaler:
      enable-scale-to-zero: "true"
  workloads:
    - name: activator
      replicas: 3
---
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata:
  name: knative-eventing
  namespace: knative-fleet
spec:
  clusterProfileRef: {namespace: fleet-system, name: spoke-2}
`;

const file = { path: "clusters/spoke-2/knative.yaml", text: perCluster };
const serving = { kind: "KnativeServing", name: "knative-serving" };

describe("locateCrField: the line of a fleet file to edit", () => {
  it("points at the key the CR sets", () => {
    expect(locateCrField(file, serving, ["spec", "config", "autoscaler", "enable-scale-to-zero"])).toBe(
      "clusters/spoke-2/knative.yaml:12",
    );
    expect(locateCrField(file, serving, ["spec", "workloads", 0, "replicas"])).toBe(
      "clusters/spoke-2/knative.yaml:15",
    );
  });

  it("for a key the CR does not set, points at where it would go", () => {
    expect(locateCrField(file, serving, ["spec", "config", "autoscaler", "max-scale"])).toBe(
      "clusters/spoke-2/knative.yaml:11",
    );
  });

  it("finds the CR's own document among several", () => {
    expect(
      locateCrField(file, { kind: "KnativeEventing", name: "knative-eventing" }, ["spec", "config"]),
    ).toBe("clusters/spoke-2/knative.yaml:22");
  });

  it("in a placement file, the field of the template", () => {
    const placement = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata:
  name: knative
spec:
  clusterSelector: {matchLabels: {ring: a}}
  template:
    spec:
      config:
        network:
          ingress-class: kourier.ingress.networking.knative.dev
`;
    expect(
      locateCrField(
        { path: "placements/serving.yaml", text: placement },
        { kind: "KnativeServing", name: "spoke-1-serving" },
        ["spec", "config", "network", "ingress-class"],
      ),
    ).toBe("placements/serving.yaml:11");
  });

  it("says nothing when no document holds the CR", () => {
    expect(locateCrField(file, { kind: "KnativeServing", name: "other" }, ["spec"])).toBeUndefined();
  });
});
