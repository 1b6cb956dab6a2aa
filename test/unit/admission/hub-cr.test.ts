import { describe, expect, it } from "vitest";
import { admitHubCr, admitHubObject, type HubCrPolicy } from "../../../src/admission/hub-cr.ts";
import { DEFAULT_LOCATION_POLICY, VERSION_VARIABLE } from "../../../src/admission/locations.ts";
import { ABANDON_CLEANUP_ANNOTATION } from "../../../src/api/labels.ts";

const RELEASES = "https://github.com/knative/serving/releases/download/";
const policy = (over: Partial<HubCrPolicy> = {}): HubCrPolicy => ({
  crNamespaces: ["knative-fleet"],
  clusterProfileNamespaces: ["fleet-system"],
  hubInstall: false,
  locations: { ...DEFAULT_LOCATION_POLICY, allowedPrefixes: [RELEASES] },
  kodataDir: "/var/run/ko",
  ...over,
});
type Cr = Parameters<typeof admitHubCr>[0];
const cr = (spec: Cr["spec"] = {}, metadata: Partial<Cr["metadata"]> = {}): Cr => ({
  metadata: { namespace: "knative-fleet", ...metadata },
  spec: { clusterProfileRef: { name: "spoke-1", namespace: "fleet-system" }, ...spec },
});

describe("admitHubCr: what may come onto the hub, and the field to fix when not", () => {
  it("admits a CR in a reconciled namespace, on an allowed ClusterProfile, reading allowed locations", () => {
    expect(
      admitHubCr(
        cr({
          version: "1.22.0",
          manifests: [{ URL: `${RELEASES}knative-v${VERSION_VARIABLE}/serving-core.yaml` }],
          additionalManifests: [{ URL: "serving/1.22.0/extra.yaml" }],
        }),
        policy(),
      ),
    ).toBeUndefined();
  });

  it("refuses the abandon-cleanup annotation from a fleet file, with or without a policy", () => {
    const annotated = cr({}, { annotations: { [ABANDON_CLEANUP_ANNOTATION]: "true" } });
    for (const given of [policy(), undefined]) {
      expect(admitHubCr(annotated, given)).toEqual({
        field: `metadata.annotations.${ABANDON_CLEANUP_ANNOTATION}`,
        message: expect.stringContaining("a hub operator sets it on the hub CR"),
      });
    }
    // Without a policy nothing else is checked: a picture of the hub, not a write.
    expect(admitHubCr(cr({}, { namespace: "elsewhere" }), undefined)).toBeUndefined();
  });

  it("refuses a namespace the service does not reconcile, naming both ways out", () => {
    expect(admitHubCr(cr({}, { namespace: "knative-serving" }), policy())).toEqual({
      field: "metadata.namespace",
      message:
        "knative-serving is not a hub namespace whose CRs knative-fleet reconciles (tenancy.crNamespaces: " +
        "knative-fleet); delete the metadata.namespace line (the CR then goes to the fleet's namespace), or " +
        "add knative-serving to tenancy.crNamespaces in the service's config (the chart's value " +
        "tenancy.crNamespaces)",
    });
    expect(admitHubCr(cr({}, { namespace: "a" }), policy({ crNamespaces: ["a", "b"] }))).toBeUndefined();
    expect(admitHubCr(cr({}, { namespace: "c" }), policy({ crNamespaces: ["a", "b"] }))?.message).toContain(
      "(tenancy.crNamespaces: a, b)",
    );
    expect(
      admitHubCr(cr({}, { namespace: "anything" }), policy({ crNamespaces: undefined })),
    ).toBeUndefined();
  });

  it("a CR without clusterProfileRef installs on the hub only when hub installs are on", () => {
    const onHub: Cr = { metadata: { namespace: "knative-fleet" }, spec: {} };
    expect(admitHubCr(onHub, policy())).toEqual({
      field: "spec.clusterProfileRef",
      message: expect.stringContaining("hubInstall.enabled is false"),
    });
    expect(admitHubCr(onHub, policy({ hubInstall: true }))).toBeUndefined();
  });

  it("refuses a ClusterProfile namespace that may not be targeted", () => {
    const elsewhere = cr({ clusterProfileRef: { name: "spoke-1", namespace: "open-cluster-management" } });
    expect(admitHubCr(elsewhere, policy())).toEqual({
      field: "spec.clusterProfileRef.namespace",
      message:
        "ClusterProfiles in namespace open-cluster-management may not be targeted " +
        "(allowedClusterProfileNamespaces: fleet-system)",
    });
    expect(admitHubCr(elsewhere, policy({ clusterProfileNamespaces: undefined }))).toBeUndefined();
  });

  it("names the first location refused by its list and index, with the version variable filled in", () => {
    const refused = admitHubCr(
      cr({
        version: "1.22.0",
        manifests: [{ URL: `${RELEASES}ok.yaml` }],
        additionalManifests: [
          { URL: `${RELEASES}fine.yaml` },
          { URL: `https://evil.example/knative-v${VERSION_VARIABLE}.yaml` },
        ],
      }),
      policy(),
    );
    expect(refused?.field).toBe("spec.additionalManifests[1].URL");
    expect(refused?.message).toContain("https://evil.example/knative-v1.22.0.yaml is refused");
    expect(admitHubCr(cr({ manifests: [{ URL: "/etc/passwd" }] }), policy())?.field).toBe(
      "spec.manifests[0].URL",
    );
    // Without a version the variable becomes empty, never left in.
    expect(
      admitHubCr(cr({ manifests: [{ URL: `https://evil.example/v${VERSION_VARIABLE}` }] }), policy())
        ?.message,
    ).toContain("https://evil.example/v is refused");
  });

  it("checks in order: the namespace before the ClusterProfile before the locations", () => {
    const everythingWrong = cr(
      { clusterProfileRef: { name: "x", namespace: "other" }, manifests: [{ URL: "http://10.0.0.1/x" }] },
      { namespace: "other" },
    );
    expect(admitHubCr(everythingWrong, policy())?.field).toBe("metadata.namespace");
    expect(admitHubCr(everythingWrong, policy({ crNamespaces: undefined }))?.field).toBe(
      "spec.clusterProfileRef.namespace",
    );
    expect(
      admitHubCr(everythingWrong, policy({ crNamespaces: undefined, clusterProfileNamespaces: undefined }))
        ?.field,
    ).toBe("spec.manifests[0].URL");
  });
});

describe("admitHubObject: a CR in hub form, its fields read as they are", () => {
  const hubObject = (spec: unknown, namespace: string | undefined = "knative-fleet") => ({
    metadata: namespace === undefined ? {} : { namespace },
    spec,
  });

  it("admits what admitHubCr admits, and refuses what it refuses", () => {
    const spec = { clusterProfileRef: { name: "spoke-1", namespace: "fleet-system" } };
    expect(admitHubObject(hubObject(spec), policy())).toBeUndefined();
    expect(admitHubObject(hubObject(spec, "other"), policy())?.field).toBe("metadata.namespace");
    // No namespace at all is no reconciled namespace.
    expect(admitHubObject({ metadata: {}, spec }, policy())?.field).toBe("metadata.namespace");
    expect(admitHubObject(hubObject(undefined), policy())?.field).toBe("spec.clusterProfileRef");
    // A list the API server holds as null is an empty one.
    expect(admitHubObject(hubObject({ ...spec, manifests: null }), policy())).toBeUndefined();
  });

  it("refuses a spec whose fields the admission cannot read, rather than reading past them", () => {
    const unreadable = [
      { clusterProfileRef: { name: "spoke-1" } },
      { clusterProfileRef: { name: "spoke-1", namespace: 7 } },
      { clusterProfileRef: null, manifests: "https://evil.example/x.yaml" },
      { manifests: { URL: `${RELEASES}x.yaml` } },
      { additionalManifests: "x" },
      { manifests: [{ URL: `${RELEASES}x.yaml` }, { url: "https://evil.example/" }] },
      { additionalManifests: [null] },
    ];
    for (const spec of unreadable) {
      expect(admitHubObject(hubObject(spec), policy({ hubInstall: true })), JSON.stringify(spec)).toEqual({
        field: "spec",
        message: "is not a KnativeServing/KnativeEventing spec the admission can read",
      });
    }
  });
});
