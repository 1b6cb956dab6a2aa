import { KUBERNETES_VERSION_UNSUPPORTED } from "../api/conditions.ts";
import type { KnativeResource, KnativeServingSpec } from "../api/knative.ts";
import {
  checkKubernetesVersion,
  type IngressName,
  minorOf,
  resolveVersion,
  selectedIngresses,
} from "../render/index.ts";
import { endOfSupport } from "./support-window.ts";

// Whether a spoke is ready for a CR about to be applied: what Knative needs of the cluster that the release
// manifests do not bring. A missing prerequisite does not fail the apply (the objects go in), it fails later
// and less clearly: a controller whose informer waits forever on a CRD that is not there, a Certificate the
// API server refuses, webhooks that never get Ready. Pure: the facts come from surveySpoke (survey.ts).

/** What was read of one spoke (survey.ts). */
export interface SpokeFacts {
  /** GET /version's gitVersion (v1.33.5-gke.1080000, v1.34.1+k3s1); undefined when /version had none. */
  kubernetesVersion: string | undefined;
  /** The names of the spoke's CustomResourceDefinitions (`plural.group`); undefined when they could not be listed. */
  crds: ReadonlySet<string> | undefined;
  /** Why the CRDs could not be listed (a 403 names the missing permission). */
  crdsError?: string;
}

export interface PreflightFinding {
  /** An error holds the step back; a warning is shown and does not. */
  severity: "error" | "warning";
  /** CamelCase, for a condition's reason: GatewayAPIMissing, KubernetesVersionUnsupported, ... */
  reason: string;
  message: string;
}

export interface PreflightResult {
  /** No error finding. */
  passed: boolean;
  findings: PreflightFinding[];
}

interface PreflightOptions {
  /**
   * The release versions available for the CR's component: `latest`, an empty version and `x.y` resolve
   * against them, and a minor behind two of them is past its support. Without them an `x.y` version is
   * checked as its minor and `latest` is not checked.
   */
  releases?: readonly string[];
}

interface Prerequisite {
  reason: string;
  /** What to install, in words. */
  product: string;
  crds: readonly string[];
}

/**
 * What each ingress needs on the cluster: the CRDs of the objects its manifests create (net-istio's
 * Gateways and PeerAuthentications, net-contour's TLSCertificateDelegation) and of the objects its
 * controller watches (its ClusterRole's resources), or it waits on them forever. Kourier brings its own
 * gateway and needs nothing.
 */
const INGRESS_PREREQUISITES: Readonly<Record<IngressName, Prerequisite | undefined>> = {
  istio: {
    reason: "IstioMissing",
    product: "Istio",
    crds: [
      "gateways.networking.istio.io",
      "virtualservices.networking.istio.io",
      "destinationrules.networking.istio.io",
      "peerauthentications.security.istio.io",
    ],
  },
  contour: {
    reason: "ContourMissing",
    product: "Contour",
    crds: ["httpproxies.projectcontour.io", "tlscertificatedelegations.projectcontour.io"],
  },
  "gateway-api": {
    reason: "GatewayAPIMissing",
    product: "the Gateway API CRDs (standard channel) and an implementation",
    crds: [
      "gateways.gateway.networking.k8s.io",
      "httproutes.gateway.networking.k8s.io",
      "referencegrants.gateway.networking.k8s.io",
    ],
  },
  kourier: undefined,
};

/**
 * cert-manager, for the settings that make Knative issue certificates: Serving's controller then watches
 * Certificates and ClusterIssuers ("otherwise the Serving controller will not start up correctly", the
 * Knative cert-manager integration docs); Eventing's transport encryption installs Certificates issued by
 * a ClusterIssuer.
 */
const CERT_MANAGER: Prerequisite = {
  reason: "CertManagerMissing",
  product: "cert-manager",
  crds: ["certificates.cert-manager.io", "clusterissuers.cert-manager.io"],
};

/**
 * Whether the spoke `facts` describe is ready for `cr` (the content about to be applied), at `now`:
 * its Kubernetes is at least the target minor's minimum, the CRDs its ingress and its TLS settings need are
 * there, and (a warning) the target minor is still supported. Malformed input is a finding, never a throw.
 */
export function preflight(
  cr: KnativeResource,
  facts: SpokeFacts,
  now: Date,
  options: PreflightOptions = {},
): PreflightResult {
  const findings: PreflightFinding[] = [];
  const kind = (cr as { kind?: unknown } | null)?.kind;
  if (kind !== "KnativeServing" && kind !== "KnativeEventing") {
    findings.push({
      severity: "error",
      reason: "InvalidResource",
      message: `not a KnativeServing or KnativeEventing (kind ${JSON.stringify(kind ?? null)})`,
    });
    return verdict(findings);
  }
  const spec = recordOf(cr.spec);
  findings.push(...versionFindings(spec.version, facts, now, options));
  if (kind === "KnativeServing") {
    const ingresses = selectedIngresses(spec as KnativeServingSpec);
    const defaulted = !INGRESS_NAMES.some((name) => recordOf(recordOf(spec.ingress)[name]).enabled === true);
    for (const ingress of ingresses) {
      const needs = INGRESS_PREREQUISITES[ingress];
      const why = defaulted
        ? "Istio is the ingress when no spec.ingress.<name>.enabled is true, and it"
        : `spec.ingress.${ingress}.enabled`;
      if (needs) findings.push(...missing(needs, why, facts));
    }
  }
  const tls = kind === "KnativeServing" ? servingTls(spec.config) : eventingTls(spec.config);
  if (tls.length > 0) findings.push(...missing(CERT_MANAGER, tls.join(", "), facts));
  return verdict(findings);
}

const INGRESS_NAMES = Object.keys(INGRESS_PREREQUISITES);

function verdict(findings: PreflightFinding[]): PreflightResult {
  return { passed: findings.every((finding) => finding.severity !== "error"), findings };
}

/** The target release's minimum Kubernetes and its support window. */
function versionFindings(
  requested: unknown,
  facts: SpokeFacts,
  now: Date,
  { releases }: PreflightOptions,
): PreflightFinding[] {
  const version = targetVersion(requested, releases);
  if ("unresolved" in version) {
    return [
      {
        severity: "warning",
        reason: "KnativeVersionUnresolved",
        message: `${version.unresolved}: the Kubernetes version and support window are not checked`,
      },
    ];
  }
  const findings: PreflightFinding[] = [];
  if (facts.kubernetesVersion === undefined) {
    findings.push({
      severity: "warning",
      reason: "KubernetesVersionUnknown",
      message: "the cluster's /version gave no gitVersion: its Kubernetes version is not checked",
    });
  }
  const kubernetes = checkKubernetesVersion(facts.kubernetesVersion, version.target);
  if (!kubernetes.compatible) {
    findings.push({ severity: "error", reason: KUBERNETES_VERSION_UNSUPPORTED, message: kubernetes.message });
  }
  const ended = endOfSupport(version.target, now, releases);
  if (ended !== undefined) {
    findings.push({
      severity: "warning",
      reason: "KnativeVersionEndOfSupport",
      message: `${ended}: it gets no more fixes, security ones included; plan an upgrade`,
    });
  }
  return findings;
}

/**
 * spec.version as the release it installs: a full MAJOR.MINOR.PATCH as it is (spec.manifests may install
 * one the releases do not list), `latest`, empty and MAJOR.MINOR resolved against the releases, or without
 * them MAJOR.MINOR checked as its minor.
 */
function targetVersion(
  requested: unknown,
  releases: readonly string[] | undefined,
): { target: string } | { unresolved: string } {
  if (requested !== undefined && typeof requested !== "string") {
    return { unresolved: `spec.version is not a string (${JSON.stringify(requested)})` };
  }
  const wanted = requested?.trim() ?? "";
  try {
    if (releases !== undefined && !FULL_VERSION.test(wanted)) {
      return { target: resolveVersion(wanted, releases, "Knative") };
    }
    minorOf(wanted);
    return { target: wanted };
  } catch (err) {
    const given = wanted ? `spec.version "${wanted}"` : "spec.version (latest)";
    return { unresolved: releases !== undefined ? (err as Error).message : `${given} names no release here` };
  }
}

const FULL_VERSION = /^\d+\.\d+\.\d+$/;

/** The CRDs of `needs` the spoke lacks, as one finding; a warning when the CRDs could not be listed. */
function missing(needs: Prerequisite, why: string, facts: SpokeFacts): PreflightFinding[] {
  if (facts.crds === undefined) {
    return [
      {
        severity: "warning",
        reason: "PrerequisitesUnknown",
        message:
          `${why} needs ${needs.product} (${needs.crds.join(", ")}), which cannot be checked: ` +
          `${facts.crdsError ?? "the cluster's CustomResourceDefinitions could not be listed"}`,
      },
    ];
  }
  const absent = needs.crds.filter((crd) => !facts.crds!.has(crd));
  if (absent.length === 0) return [];
  return [
    {
      severity: "error",
      reason: needs.reason,
      message: `${why} needs ${needs.product} on the cluster; missing CRDs: ${absent.join(", ")}`,
    },
  ];
}

/**
 * config-network's settings that issue certificates through cert-manager, as knative.dev/networking reads
 * them: external-domain-tls (or the deprecated auto-tls when it is absent), cluster-local-domain-tls and
 * system-internal-tls `Enabled` (any case), or the deprecated internal-encryption `true`.
 */
function servingTls(config: unknown): string[] {
  const network = configMap(config, "network");
  const on = (key: string, value = "enabled") => network[key]?.trim().toLowerCase() === value;
  const where = (key: string, value: string) => `spec.config.network ${key}: ${value}`;
  const external = "external-domain-tls" in network ? "external-domain-tls" : "auto-tls";
  const internal = "system-internal-tls" in network ? "system-internal-tls" : "internal-encryption";
  return [
    ...(on(external) ? [where(external, "Enabled")] : []),
    ...(on("cluster-local-domain-tls") ? [where("cluster-local-domain-tls", "Enabled")] : []),
    ...(internal === "system-internal-tls" && on(internal) ? [where(internal, "Enabled")] : []),
    ...(internal === "internal-encryption" && on(internal, "true") ? [where(internal, "true")] : []),
  ];
}

const ENCRYPTED_TRANSPORT = new Set(["permissive", "strict"]);

/** config-features' transport-encryption permissive or strict: the release's Certificates are installed. */
function eventingTls(config: unknown): string[] {
  const value = configMap(config, "features")["transport-encryption"]?.trim().toLowerCase() ?? "";
  return ENCRYPTED_TRANSPORT.has(value) ? [`spec.config.features transport-encryption: ${value}`] : [];
}

/**
 * spec.config's entries for ConfigMap `config-<short>`: keyed by the full name or the short one (the full
 * name wins, as in the render's config transformer); string values only.
 */
function configMap(config: unknown, short: string): Record<string, string> {
  const maps = recordOf(config);
  const entries = recordOf(Object.hasOwn(maps, `config-${short}`) ? maps[`config-${short}`] : maps[short]);
  return Object.fromEntries(
    Object.entries(entries).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
  );
}

function recordOf(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}
