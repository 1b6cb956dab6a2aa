import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { VersionError } from "../../../src/render/index.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { knativeEventing, knativeServing, NAME_PLACEHOLDER, releases } from "./fixtures.ts";

const providers = (manifests: readonly { metadata: { labels?: Record<string, string> } }[]) =>
  new Set(manifests.map((manifest) => manifest.metadata.labels?.["networking.knative.dev/ingress-provider"]));

describe("ReleaseLoader", () => {
  it("loads the newest Serving, 1.23.0, with Istio when nothing is asked for; latest is the same", async () => {
    const release = await releases.load(knativeServing());
    expect(release).toMatchObject({ component: "knative-serving", version: "1.23.0", ingresses: ["istio"] });
    expect(providers(release.manifests)).toEqual(new Set([undefined, "istio"]));
    expect((await releases.load(knativeEventing({ version: "latest" }))).version).toBe("1.23.0");
  });

  it("loads every minor of the window, 1.20 to 1.23, with its own minor's ingress", async () => {
    for (const [minor, serving, eventing] of [
      ["1.20", "1.20.3", "1.20.3"],
      ["1.21", "1.21.3", "1.21.4"],
      ["1.22", "1.22.1", "1.22.2"],
      ["1.23", "1.23.0", "1.23.0"],
    ] as const) {
      const release = await releases.load(
        knativeServing({ version: minor, ingress: { kourier: { enabled: true } } }),
      );
      expect(release.version).toBe(serving);
      const versions = new Set(
        release.manifests.map((m) => m.metadata.labels?.["app.kubernetes.io/version"]),
      );
      // Serving's own objects are at its patch, Kourier's at the same minor (its own patch).
      expect(versions.has(serving)).toBe(true);
      expect(
        [...versions].every((v) => v === undefined || v.startsWith(`${minor}.`)),
        minor,
      ).toBe(true);
      expect((await releases.load(knativeEventing({ version: minor }))).version).toBe(eventing);
    }
  });

  it("includes only the enabled ingress, of the release's minor", async () => {
    const release = await releases.load(
      knativeServing({ version: "1.21", ingress: { kourier: { enabled: true } } }),
    );
    expect(release).toMatchObject({ version: "1.21.3", ingresses: ["kourier"] });
    expect(providers(release.manifests)).toEqual(new Set([undefined, "kourier"]));
    const gateway = release.manifests.find((manifest) => manifest.metadata.name === "3scale-kourier-gateway");
    expect(gateway?.metadata.labels?.["app.kubernetes.io/version"]).toMatch(/^1\.21\./);
  });

  it("includes every enabled ingress, in upstream's order", async () => {
    const release = await releases.load(
      knativeServing({
        ingress: { kourier: { enabled: true }, istio: { enabled: true }, contour: { enabled: false } },
      }),
    );
    expect(release.ingresses).toEqual(["istio", "kourier"]);
  });

  it("loads Eventing without ingress", async () => {
    const release = await releases.load(knativeEventing({ version: "1.21.4" }));
    expect(release).toMatchObject({ component: "knative-eventing", version: "1.21.4", ingresses: [] });
  });

  it("parses a release once: later loads share its objects", async () => {
    const first = await releases.load(knativeServing({ version: "1.22.1" }));
    const second = await releases.load(
      knativeServing({ version: "1.22", registry: { default: `x/${NAME_PLACEHOLDER}` } }),
    );
    expect(second.manifests).toHaveLength(first.manifests.length);
    for (const [index, manifest] of second.manifests.entries()) expect(manifest).toBe(first.manifests[index]);
  });

  it("refuses a version the source does not ship", async () => {
    await expect(releases.load(knativeServing({ version: "1.24.0" }))).rejects.toThrow(
      new VersionError("Knative Serving 1.24.0 is not available (available: 1.23.0, 1.22.1, 1.21.3, 1.20.3)"),
    );
    await expect(releases.load(knativeEventing({ version: "1.19" }))).rejects.toThrow(
      new VersionError("Knative Eventing 1.19 is not available (available: 1.23.0, 1.22.2, 1.21.4, 1.20.3)"),
    );
  });

  it("takes spec.manifests instead of the release, with the VERSION placeholder resolved, then the bundled ingress", async () => {
    const core = pathToFileURL(join(knativeReleasesDir(), "knative-serving")).href;
    const release = await releases.load(
      knativeServing({
        version: "1.21.3",
        manifests: [{ URL: `${core}/\${VERSION}/2-serving-core.yaml` }],
        ingress: { contour: { enabled: true } },
      }),
    );
    expect(release.version).toBe("1.21.3");
    expect(release.manifests.some((manifest) => manifest.kind === "Job")).toBe(false);
    expect(release.manifests.at(-1)?.metadata.labels?.["networking.knative.dev/ingress-provider"]).toBe(
      "contour",
    );
    expect(release.locations).toEqual([
      `${core}/1.21.3/2-serving-core.yaml`,
      join(knativeReleasesDir(), "ingress", "1.21", "contour"),
    ]);
  });

  it("appends spec.additionalManifests after the release and its ingress", async () => {
    const hpa = join(knativeReleasesDir(), "knative-serving", "1.22.1", "3-serving-hpa.yaml");
    const release = await releases.load(knativeServing({ additionalManifests: [{ URL: hpa }] }));
    expect(release.manifests.slice(-2).map((manifest) => manifest.metadata.name)).toEqual([
      "autoscaler-hpa",
      "autoscaler-hpa",
    ]);
  });

  it("records where it read from as upstream's status.manifests does: kodata directories, then URLs", async () => {
    // What the upstream operator wrote for the same CRs with KO_DATA_PATH at the same directory (read back
    // from a hub in the hand-over tests): the directories it read, no `kodata:` names it could not resolve.
    const hpa = join(knativeReleasesDir(), "knative-serving", "1.22.1", "3-serving-hpa.yaml");
    const serving = await releases.load(
      knativeServing({
        version: "1.22",
        ingress: { kourier: { enabled: true } },
        additionalManifests: [{ URL: hpa }],
      }),
    );
    expect(serving.locations).toEqual([
      join(knativeReleasesDir(), "knative-serving", "1.22.1"),
      join(knativeReleasesDir(), "ingress", "1.22", "kourier"),
      hpa,
    ]);
    const eventing = await releases.load(knativeEventing({ version: "1.22" }));
    expect(eventing.locations).toEqual([join(knativeReleasesDir(), "knative-eventing", "1.22.2")]);
  });

  it("needs spec.version with spec.manifests: nothing else says which release they hold", async () => {
    await expect(releases.load(knativeServing({ manifests: [{ URL: "/nowhere.yaml" }] }))).rejects.toThrow(
      VersionError,
    );
  });
});
