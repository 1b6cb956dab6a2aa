import { describe, expect, it } from "vitest";
import { objectKey } from "../../../src/kube/object.ts";
import { type Manifest, RenderError, render } from "../../../src/render/index.ts";
import { knativeEventing, knativeServing, NAME_PLACEHOLDER, releases } from "./fixtures.ts";

function kindCounts(manifests: readonly Manifest[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const manifest of manifests) counts[manifest.kind] = (counts[manifest.kind] ?? 0) + 1;
  return counts;
}

describe("render", () => {
  // Objects per Serving version and ingress: the release's 12 CRDs (which serving-core repeats) once, the
  // ingress's Namespace merged into the installation namespace.
  it.each([
    ["1.21.3", "istio", 76, ["net-istio-controller", "net-istio-webhook"]],
    ["1.21.3", "kourier", 75, ["net-kourier-controller", "3scale-kourier-gateway"]],
    ["1.21.3", "contour", 67, ["net-contour-controller"]],
    ["1.21.3", "gateway-api", 71, ["net-gateway-api-controller", "net-gateway-api-webhook"]],
    ["1.22.1", "istio", 76, ["net-istio-controller", "net-istio-webhook"]],
    ["1.22.1", "kourier", 75, ["net-kourier-controller", "3scale-kourier-gateway"]],
    ["1.22.1", "contour", 67, ["net-contour-controller"]],
    ["1.22.1", "gateway-api", 71, ["net-gateway-api-controller", "net-gateway-api-webhook"]],
  ] as const)(
    "renders Serving %s with %s: %i objects",
    async (version, ingress, total, ingressDeployments) => {
      const serving = knativeServing({ version, ingress: { [ingress]: { enabled: true } } });
      const manifests = render(serving, await releases.load(serving));
      expect(manifests).toHaveLength(total);
      expect(kindCounts(manifests)).toMatchObject({ CustomResourceDefinition: 12, Namespace: 1, Job: 2 });
      expect(
        manifests.filter((manifest) => manifest.kind === "Deployment").map((d) => d.metadata.name),
      ).toEqual([
        "activator",
        "autoscaler",
        "controller",
        "webhook",
        "autoscaler-hpa",
        ...ingressDeployments,
      ]);
      for (const manifest of manifests.filter((m) => m.metadata.labels?.["app.kubernetes.io/version"])) {
        expect(manifest.metadata.labels!["app.kubernetes.io/version"]).toMatch(
          new RegExp(`^${version.slice(0, 4)}`),
        );
      }
    },
  );

  it.each([
    ["1.21.4", 149],
    ["1.22.2", 150],
  ] as const)("renders Eventing %s: %i objects", async (version, total) => {
    const eventing = knativeEventing({ version });
    const manifests = render(eventing, await releases.load(eventing));
    expect(manifests).toHaveLength(total);
    expect(kindCounts(manifests)).toMatchObject({
      CustomResourceDefinition: 18,
      Namespace: 1,
      Deployment: 9,
      StatefulSet: 1,
      HorizontalPodAutoscaler: 3,
      Job: 1,
    });
  });

  it("returns the objects in apply order: CRDs first, then the release's order, each object once", async () => {
    const serving = knativeServing({ ingress: { kourier: { enabled: true } } });
    const manifests = render(serving, await releases.load(serving));
    const firstOther = manifests.findIndex((manifest) => manifest.kind !== "CustomResourceDefinition");
    expect(manifests.slice(firstOther).some((manifest) => manifest.kind === "CustomResourceDefinition")).toBe(
      false,
    );
    expect(manifests[firstOther]).toMatchObject({ kind: "Namespace" });
    // The release's files in order (its Jobs last), then the ingress's.
    const position = (kind: string, name: string) =>
      manifests.findIndex((manifest) => manifest.kind === kind && manifest.metadata.name === name);
    expect(position("Job", "cleanup-serving-serving-1.22.1")).toBeLessThan(
      position("ClusterRole", "net-kourier"),
    );
    expect(manifests.at(-1)).toMatchObject({
      kind: "PodDisruptionBudget",
      metadata: { name: "3scale-kourier-gateway-pdb" },
    });
    expect(new Set(manifests.map(objectKey)).size).toBe(manifests.length);
  });

  it("is deterministic and leaves the cached release as it was", async () => {
    const serving = knativeServing({
      "high-availability": { replicas: 2 },
      registry: { default: `mirror.example/${NAME_PLACEHOLDER}:v1`, imagePullSecrets: [{ name: "regcred" }] },
      workloads: [
        { name: "controller", env: [{ container: "controller", envVars: [{ name: "A", value: "1" }] }] },
      ],
      config: { network: { "domain-template": "{{.Name}}.{{.Namespace}}" } },
      ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
    });
    const release = await releases.load(serving);
    const snapshot = structuredClone(release.manifests);
    const first = render(serving, release);
    const second = render(serving, release);
    expect(second).toEqual(first);
    expect(release.manifests).toEqual(snapshot);
  });

  it("refuses a release of the other component and a CR without namespace", async () => {
    const eventing = knativeEventing();
    const servingRelease = await releases.load(knativeServing());
    expect(() => render(eventing, servingRelease)).toThrow(
      new RenderError("a KnativeEventing cannot be rendered from the knative-serving release"),
    );
    const unnamespaced = { ...knativeServing(), metadata: { name: "knative-serving" } };
    expect(() => render(unnamespaced, servingRelease)).toThrow(/metadata\.namespace is required/);
  });
});
