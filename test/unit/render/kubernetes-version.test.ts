import { describe, expect, it } from "vitest";
import { checkKubernetesVersion, minimumKubernetesVersion } from "../../../src/render/index.ts";

describe("the minimum Kubernetes of a Knative release", () => {
  it("is knative.dev/pkg's for each minor of the window, whatever the patch", () => {
    expect(minimumKubernetesVersion("1.20.3")).toBe("v1.32.0");
    expect(minimumKubernetesVersion("1.21.0")).toBe("v1.33.0");
    expect(minimumKubernetesVersion("1.21.4")).toBe("v1.33.0");
    expect(minimumKubernetesVersion("1.22.1")).toBe("v1.34.0");
    expect(minimumKubernetesVersion("1.23.0")).toBe("v1.34.0");
  });

  it("a newer minor needs at least the newest known minimum; an older one has none known", () => {
    expect(minimumKubernetesVersion("1.24.0")).toBe("v1.34.0");
    expect(minimumKubernetesVersion("2.0.0")).toBe("v1.34.0");
    expect(minimumKubernetesVersion("1.19.5")).toBeUndefined();
  });
});

describe("checkKubernetesVersion", () => {
  const compatible = (kubernetes: string | undefined, knative: string) =>
    checkKubernetesVersion(kubernetes, knative).compatible;

  it("passes a cluster at or above the minimum: gitVersions of real distributions", () => {
    for (const version of [
      "v1.34.0",
      "v1.34.1+k3s1",
      "v1.34.0-rc.1", // a pre-release of the minimum passes, as knative.dev/pkg allows -0 and up
      "v1.35.4",
      "v1.34.2-gke.1163000",
      "v1.34.3-eks-2f6a4b1",
      "v2.0.0",
      "1.34", // a ClusterProfile's status.version.kubernetes without the patch
    ]) {
      expect(compatible(version, "1.23.0"), version).toBe(true);
    }
  });

  it("refuses a cluster below it, saying both versions and where the minimum comes from", () => {
    expect(checkKubernetesVersion("v1.33.5-gke.1080000", "1.22.1")).toEqual({
      compatible: false,
      message:
        "Kubernetes v1.33.5-gke.1080000 is older than v1.34.0, the oldest Kubernetes Knative 1.22.1 runs on " +
        "(knative.dev/pkg's minimum version check)",
    });
    expect(compatible("v1.31.9", "1.20.3")).toBe(false);
    expect(compatible("v1.32.0", "1.20.3")).toBe(true);
    expect(compatible("v1.32.14", "1.21.3")).toBe(false);
    expect(compatible("v0.34.0", "1.23.0")).toBe(false);
    // An apiserver built without version stamping.
    expect(compatible("v0.0.0-master+$Format:%H$", "1.23.0")).toBe(false);
  });

  it("refuses a version it cannot read, and does not hold an unknown one against the cluster", () => {
    expect(checkKubernetesVersion("kubernetes-latest", "1.23.0")).toEqual({
      compatible: false,
      message:
        'the Kubernetes version "kubernetes-latest" cannot be compared with v1.34.0, the oldest Kubernetes ' +
        "Knative 1.23.0 runs on (knative.dev/pkg's minimum version check)",
    });
    expect(compatible(undefined, "1.23.0")).toBe(true);
    // No minimum known for the release: nothing to compare with.
    expect(compatible("v1.20.0", "1.19.5")).toBe(true);
  });
});
