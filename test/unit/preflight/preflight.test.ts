import { describe, expect, it } from "vitest";
import type { KnativeResource } from "../../../src/api/knative.ts";
import {
  endOfSupport,
  type PreflightFinding,
  type PreflightResult,
  preflight,
  type SpokeFacts,
} from "../../../src/preflight/index.ts";
import { type CrOptions, crObject } from "../../support/fleet-files.ts";

const NOW = new Date("2026-06-01T00:00:00Z");
const RELEASES = ["1.23.0", "1.22.1", "1.21.3", "1.20.3"];

const ISTIO = [
  "gateways.networking.istio.io",
  "virtualservices.networking.istio.io",
  "destinationrules.networking.istio.io",
  "peerauthentications.security.istio.io",
];
const CONTOUR = ["httpproxies.projectcontour.io", "tlscertificatedelegations.projectcontour.io"];
const GATEWAY_API = [
  "gateways.gateway.networking.k8s.io",
  "httproutes.gateway.networking.k8s.io",
  "referencegrants.gateway.networking.k8s.io",
];
const CERT_MANAGER = ["certificates.cert-manager.io", "clusterissuers.cert-manager.io"];

const facts = (
  crds: readonly string[] = [],
  kubernetesVersion: string | undefined = "v1.35.4",
): SpokeFacts => ({
  kubernetesVersion,
  crds: new Set(crds),
});
const cr = (options: Partial<CrOptions> = {}): KnativeResource =>
  crObject({ name: "knative", cluster: "spoke-1", version: "1.22", ...options }) as KnativeResource;
const serving = (spec: Record<string, unknown> = {}, version = "1.22") => cr({ version, spec });
const eventing = (spec: Record<string, unknown> = {}) => cr({ kind: "KnativeEventing", spec });
const reasons = (result: PreflightResult) =>
  result.findings.map((f: PreflightFinding) => `${f.severity}:${f.reason}`);

describe("preflight: the ingress's prerequisites", () => {
  it("Serving without spec.ingress installs Istio: it needs Istio's CRDs", () => {
    const result = preflight(serving(), facts(), NOW);
    expect(result.passed).toBe(false);
    expect(result.findings).toEqual([
      {
        severity: "error",
        reason: "IstioMissing",
        message:
          "Istio is the ingress when no spec.ingress.<name>.enabled is true, and it needs Istio on the cluster; " +
          `missing CRDs: ${ISTIO.join(", ")}`,
      },
    ]);
    expect(preflight(serving(), facts(ISTIO), NOW)).toEqual({ passed: true, findings: [] });
  });

  it("istio enabled: names only the CRDs that are missing", () => {
    const result = preflight(
      serving({ ingress: { istio: { enabled: true } } }),
      facts(ISTIO.slice(0, 2)),
      NOW,
    );
    expect(reasons(result)).toEqual(["error:IstioMissing"]);
    expect(result.findings[0]!.message).toBe(
      "spec.ingress.istio.enabled needs Istio on the cluster; missing CRDs: " +
        "destinationrules.networking.istio.io, peerauthentications.security.istio.io",
    );
  });

  it("contour enabled: Contour's CRDs, not Istio's", () => {
    const spec = { ingress: { contour: { enabled: true } } };
    expect(reasons(preflight(serving(spec), facts(ISTIO), NOW))).toEqual(["error:ContourMissing"]);
    expect(preflight(serving(spec), facts(CONTOUR), NOW).passed).toBe(true);
  });

  it("gateway-api enabled: GatewayAPIMissing until the Gateway API CRDs are there", () => {
    const spec = { ingress: { "gateway-api": { enabled: true } } };
    const result = preflight(serving(spec), facts(["httproutes.gateway.networking.k8s.io"]), NOW);
    expect(result.passed).toBe(false);
    expect(result.findings[0]).toMatchObject({
      severity: "error",
      reason: "GatewayAPIMissing",
      message: expect.stringContaining(
        "missing CRDs: gateways.gateway.networking.k8s.io, referencegrants.gateway.networking.k8s.io",
      ),
    });
    expect(preflight(serving(spec), facts(GATEWAY_API), NOW).passed).toBe(true);
  });

  it("kourier needs nothing; two ingresses need both's", () => {
    expect(preflight(serving({ ingress: { kourier: { enabled: true } } }), facts(), NOW)).toEqual({
      passed: true,
      findings: [],
    });
    const both = {
      ingress: { kourier: { enabled: true }, "gateway-api": { enabled: true }, istio: { enabled: false } },
    };
    expect(reasons(preflight(serving(both), facts(), NOW))).toEqual(["error:GatewayAPIMissing"]);
    const two = { ingress: { istio: { enabled: true }, contour: { enabled: true } } };
    expect(reasons(preflight(serving(two), facts(), NOW))).toEqual([
      "error:IstioMissing",
      "error:ContourMissing",
    ]);
  });

  it("Eventing has no ingress", () => {
    expect(preflight(eventing(), facts(), NOW)).toEqual({ passed: true, findings: [] });
  });

  it("CRDs that could not be listed are a warning that says why, not a blocker", () => {
    const unlisted: SpokeFacts = {
      kubernetesVersion: "v1.35.4",
      crds: undefined,
      crdsError: "no list on CRDs",
    };
    const result = preflight(serving({ ingress: { "gateway-api": { enabled: true } } }), unlisted, NOW);
    expect(result.passed).toBe(true);
    expect(result.findings).toEqual([
      expect.objectContaining({
        severity: "warning",
        reason: "PrerequisitesUnknown",
        message: expect.stringMatching(/gateway-api.enabled needs .*cannot be checked: no list on CRDs$/),
      }),
    ]);
  });
});

describe("preflight: cert-manager for the TLS settings", () => {
  const kourier = { kourier: { enabled: true } };
  const withNetwork = (network: Record<string, unknown>, key = "network") =>
    serving({ ingress: kourier, config: { [key]: network } });

  it.each([
    [{ "external-domain-tls": "Enabled" }, "spec.config.network external-domain-tls: Enabled"],
    [{ "external-domain-tls": "enabled" }, "spec.config.network external-domain-tls: Enabled"],
    [{ "auto-tls": "Enabled" }, "spec.config.network auto-tls: Enabled"],
    [{ "cluster-local-domain-tls": "Enabled" }, "spec.config.network cluster-local-domain-tls: Enabled"],
    [{ "system-internal-tls": "Enabled" }, "spec.config.network system-internal-tls: Enabled"],
    [{ "internal-encryption": "true" }, "spec.config.network internal-encryption: true"],
  ])("Serving with %j needs cert-manager", (network, why) => {
    const result = preflight(withNetwork(network), facts(), NOW);
    expect(result.findings).toEqual([
      {
        severity: "error",
        reason: "CertManagerMissing",
        message: `${why} needs cert-manager on the cluster; missing CRDs: ${CERT_MANAGER.join(", ")}`,
      },
    ]);
    expect(preflight(withNetwork(network), facts(CERT_MANAGER), NOW).passed).toBe(true);
  });

  it.each([
    [{}],
    [{ "external-domain-tls": "Disabled" }],
    // the new key wins over the deprecated one, as knative.dev/networking reads them
    [{ "external-domain-tls": "Disabled", "auto-tls": "Enabled" }],
    [{ "system-internal-tls": "Disabled", "internal-encryption": "true" }],
    [{ "internal-encryption": "false" }],
    [{ "http-protocol": "Redirected" }],
  ])("Serving with %j does not", (network) => {
    expect(preflight(withNetwork(network), facts(), NOW)).toEqual({ passed: true, findings: [] });
  });

  it("reads config-network under its full name too, which wins over the short one", () => {
    const both = serving({
      ingress: kourier,
      config: {
        network: { "external-domain-tls": "Disabled" },
        "config-network": { "external-domain-tls": "Enabled" },
      },
    });
    expect(reasons(preflight(both, facts(), NOW))).toEqual(["error:CertManagerMissing"]);
  });

  it("lists every TLS setting that needs it in one finding", () => {
    const network = { "external-domain-tls": "Enabled", "cluster-local-domain-tls": "Enabled" };
    expect(preflight(withNetwork(network), facts(), NOW).findings[0]!.message).toMatch(
      /^spec.config.network external-domain-tls: Enabled, spec.config.network cluster-local-domain-tls: Enabled needs/,
    );
  });

  it.each(["permissive", "strict", " Strict "])(
    "Eventing with transport-encryption %j needs cert-manager",
    (value) => {
      const result = preflight(
        eventing({ config: { features: { "transport-encryption": value } } }),
        facts(),
        NOW,
      );
      expect(reasons(result)).toEqual(["error:CertManagerMissing"]);
      expect(result.findings[0]!.message).toContain(
        `spec.config.features transport-encryption: ${value.trim().toLowerCase()} needs cert-manager`,
      );
      const present = preflight(
        eventing({ config: { "config-features": { "transport-encryption": value } } }),
        facts(CERT_MANAGER),
        NOW,
      );
      expect(present.passed).toBe(true);
    },
  );

  it.each(["disabled", ""])("Eventing with transport-encryption %j does not", (value) => {
    expect(
      preflight(eventing({ config: { features: { "transport-encryption": value } } }), facts(), NOW).passed,
    ).toBe(true);
  });
});

describe("preflight: the Kubernetes version", () => {
  const kourier = { ingress: { kourier: { enabled: true } } };

  it.each([
    ["v1.34.0", "1.22", true],
    ["v1.35.4", "1.23", true],
    ["v1.34.1+k3s1", "1.22", true],
    ["v1.33.5-gke.1080000", "1.21", true],
    ["v1.33.5-gke.1080000", "1.22", false],
    ["v1.30.2-gke.1000", "1.20", false],
    ["v1.29.5-eks-abc", "1.21", false],
    ["v1.31.0+k3s1", "1.20", false],
    ["v1.32.0-eks-1", "1.20", true],
  ])("Kubernetes %s for Knative %s: passes %s", (kubernetes, version, passes) => {
    const result = preflight(serving(kourier, version), facts([], kubernetes), NOW);
    const versionFindings = result.findings.filter((f) => f.reason === "KubernetesVersionUnsupported");
    expect(versionFindings.length === 0).toBe(passes);
    expect(result.passed).toBe(passes);
  });

  it("says both versions when it is too old, reusing the reconcile's check", () => {
    const result = preflight(serving(kourier, "1.22.1"), facts([], "v1.29.5-eks-abc"), NOW);
    expect(result.findings).toEqual([
      {
        severity: "error",
        reason: "KubernetesVersionUnsupported",
        message:
          "Kubernetes v1.29.5-eks-abc is older than v1.34.0, the oldest Kubernetes Knative 1.22.1 runs on " +
          "(knative.dev/pkg's minimum version check)",
      },
    ]);
  });

  it("a version it cannot read fails; a missing gitVersion is a warning", () => {
    expect(reasons(preflight(serving(kourier), facts([], "not-a-version"), NOW))).toEqual([
      "error:KubernetesVersionUnsupported",
    ]);
    const unknown = preflight(serving(kourier), { ...facts(), kubernetesVersion: undefined }, NOW);
    expect(unknown.passed).toBe(true);
    expect(reasons(unknown)).toEqual(["warning:KubernetesVersionUnknown"]);
  });

  it("latest resolves against the releases; without them it is not checked", () => {
    const latest = serving(kourier, "latest");
    expect(reasons(preflight(latest, facts([], "v1.33.0"), NOW, { releases: RELEASES }))).toEqual([
      "error:KubernetesVersionUnsupported",
    ]);
    expect(
      preflight(latest, facts([], "v1.33.0"), NOW, { releases: RELEASES }).findings[0]!.message,
    ).toContain("Knative 1.23.0");
    expect(reasons(preflight(latest, facts([], "v1.33.0"), NOW))).toEqual([
      "warning:KnativeVersionUnresolved",
    ]);
    expect(reasons(preflight(serving(kourier, "1.99"), facts(), NOW, { releases: RELEASES }))).toEqual([
      "warning:KnativeVersionUnresolved",
    ]);
  });
});

describe("preflight: the support window", () => {
  const kourier = { ingress: { kourier: { enabled: true } } };

  it("warns, without blocking, for a minor past its end of support", () => {
    const result = preflight(serving(kourier, "1.20"), facts([], "v1.35.4"), NOW);
    expect(result).toEqual({
      passed: true,
      findings: [
        {
          severity: "warning",
          reason: "KnativeVersionEndOfSupport",
          message:
            "Knative 1.20's community support ended on 2026-05-05: it gets no more fixes, security ones " +
            "included; plan an upgrade",
        },
      ],
    });
  });

  it("by endoflife.date's date, then by two newer minors released", () => {
    expect(endOfSupport("1.21.3", new Date("2026-08-03T23:59:59Z"))).toBeUndefined();
    expect(endOfSupport("1.21.3", new Date("2026-08-04T00:00:00Z"))).toBe(
      "Knative 1.21's community support ended on 2026-08-04",
    );
    expect(endOfSupport("1.22", NOW, RELEASES)).toBeUndefined();
    // patches of one newer minor are one minor
    expect(endOfSupport("1.23", NOW, [...RELEASES, "1.24.0", "1.24.1"])).toBeUndefined();
    expect(endOfSupport("1.22.1", NOW, [...RELEASES, "1.24.0", "not-a-version"])).toBe(
      "Knative 1.24 and 1.23 are released after 1.22: the community supports the 2 most recent minors",
    );
    expect(endOfSupport("1.12", NOW)).toBe(
      "Knative 1.12's community support ended before 2025-07-28 (when 1.17's did)",
    );
  });
});

describe("preflight: malformed input is a finding, never a throw", () => {
  it.each([
    ["null", null],
    ["a string", "KnativeServing"],
    ["another kind", { kind: "Deployment", spec: {} }],
  ])("%s", (_, input) => {
    const result = preflight(input as unknown as KnativeResource, facts(), NOW);
    expect(result.passed).toBe(false);
    expect(reasons(result)).toEqual(["error:InvalidResource"]);
  });

  it("odd spec shapes: no spec, a string ingress, non-string config values, a numeric version", () => {
    const bare = {
      apiVersion: "operator.knative.dev/v1beta1",
      kind: "KnativeServing",
      metadata: { name: "x" },
    };
    expect(reasons(preflight(bare as unknown as KnativeResource, facts(ISTIO), NOW))).toEqual([
      "warning:KnativeVersionUnresolved",
    ]);
    const odd = serving({
      ingress: "kourier",
      config: { network: { "external-domain-tls": true }, features: [] },
    });
    expect(reasons(preflight(odd, facts(ISTIO), NOW))).toEqual([]);
    const numeric = { ...serving(), spec: { version: 1.22, ingress: { kourier: { enabled: true } } } };
    expect(preflight(numeric as unknown as KnativeResource, facts(), NOW).findings).toEqual([
      expect.objectContaining({
        reason: "KnativeVersionUnresolved",
        message: expect.stringContaining("not a string (1.22)"),
      }),
    ]);
  });
});
