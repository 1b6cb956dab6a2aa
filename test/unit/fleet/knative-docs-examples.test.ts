import { describe, expect, it } from "vitest";
import { admitHubCr } from "../../../src/admission/hub-cr.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { DEFAULT_FLEET_SETTINGS, hubCrPolicy } from "../../../src/sync/settings.ts";

// The shapes of the Knative documentation's operator examples (installing with the operator, configuring
// Serving and Eventing through the CRs, autoscaling, the multicluster guide), restated as test data of our
// own: each one copied into a fleet file either validates as it is, or is refused with a message that says
// exactly what to change.

/** A KnativeServing's head, as the docs write it; a test adds its spec. */
const SERVING = `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata: { name: knative-serving, namespace: knative-serving }
`;

const model = (text: string) =>
  buildFleetModel([{ path: "clusters/example.yaml", text }], { defaultNamespace: "knative-fleet" });
/** What the hub admission says of each CR of `text`, with the service's defaults; undefined: admitted. */
const refusals = (text: string) =>
  model(text).resources.map(({ resource }) => {
    const refusal = admitHubCr(resource, hubCrPolicy(DEFAULT_FLEET_SETTINGS, undefined));
    return refusal && `${refusal.field}: ${refusal.message}`;
  });
const messages = (text: string) =>
  model(text).diagnostics.map((d) => `${d.line}:${d.column} ${d.field}: ${d.message}`);

const VALID: Record<string, string> = {
  "Serving installed as the docs install it": `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: knative-serving
  namespace: knative-serving
`,
  "Serving with Kourier and its ingress class": `${SERVING}spec:
  ingress:
    kourier:
      enabled: true
  config:
    network:
      ingress-class: "kourier.ingress.networking.knative.dev"
`,
  "autoscaler settings in config": `${SERVING}spec:
  config:
    autoscaler:
      container-concurrency-target-default: "100"
      enable-scale-to-zero: "false"
`,
  "high availability and workload overrides": `${SERVING}spec:
  high-availability:
    replicas: 3
  workloads:
    - name: activator
      resources:
        - container: activator
          requests: { cpu: 300m, memory: 100Mi }
          limits: { cpu: 1000m, memory: 250Mi }
`,
  "a private registry": `${SERVING}spec:
  registry:
    default: registry.example.com/knative/\${NAME}:\${VERSION}
    imagePullSecrets:
      - name: regcred
`,
  "the security guard": `${SERVING}spec:
  security:
    securityGuard:
      enabled: true
`,
  "Eventing with the Kafka broker class": `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata: { name: knative-eventing, namespace: knative-eventing }
spec:
  defaultBrokerClass: Kafka
`,
  "the multicluster guide's CR, with its namespace labels under their CRD name": `${SERVING}spec:
  clusterProfileRef:
    name: cluster-a
    namespace: open-cluster-management
  namespace:
    labels:
      istio-injection: enabled
`,
};

describe("the Knative docs' operator examples in a fleet file", () => {
  it.each(Object.entries(VALID))("%s validates", (_name, text) => {
    expect(messages(text)).toEqual([]);
  });

  // The docs put the CR in knative-serving / knative-eventing; the service reconciles only the fleet's
  // namespace by default (a tenancy boundary, src/admission/README.md): such a CR is refused with the fix.
  it.each(Object.entries(VALID))("%s: admitted, or refused naming its one-line fix", (_name, text) => {
    const said = refusals(text);
    expect(said).toHaveLength(1);
    if (/^\s*namespace: knative-|namespace: knative-(serving|eventing) }/m.test(text)) {
      expect(said[0]).toMatch(
        /^metadata\.namespace: knative-(serving|eventing) is not a hub namespace whose CRs knative-fleet reconciles \(tenancy\.crNamespaces: knative-fleet\); delete the metadata\.namespace line \(the CR then goes to the fleet's namespace\), or add knative-(serving|eventing) to tenancy\.crNamespaces in the service's config \(the chart's value tenancy\.crNamespaces\)$/,
      );
    }
    // The fix is that one line: without it the example is admitted (or refused for another reason only).
    const fixed = text
      .replace(/^ {2}namespace: knative-(serving|eventing)\n/m, "")
      .replace(/, namespace: knative-(serving|eventing) }/, " }");
    expect(refusals(fixed)[0] ?? "").not.toMatch(/^metadata\.namespace/);
    expect(messages(fixed)).toEqual([]);
  });

  it("one event source installs that source; the hub CR gets the complete form upstream requires", () => {
    const { resources, diagnostics } = model(`
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata: { name: knative-eventing, namespace: knative-eventing }
spec:
  source:
    ceph:
      enabled: true
`);
    expect(diagnostics).toEqual([]);
    expect(resources[0]!.resource.spec).toMatchObject({
      source: {
        ceph: { enabled: true },
        github: { enabled: false },
        gitlab: { enabled: false },
        kafka: { enabled: false },
        rabbitmq: { enabled: false },
        redis: { enabled: false },
      },
    });
  });

  it("v1alpha1, the older examples' apiVersion, is refused with the one-line fix", () => {
    expect(
      messages(`
apiVersion: operator.knative.dev/v1alpha1
kind: KnativeServing
metadata: { name: knative-serving, namespace: knative-serving }
`),
    ).toEqual([
      "2:13 apiVersion: KnativeServing must be apiVersion operator.knative.dev/v1beta1, got operator.knative.dev/v1alpha1: v1alpha1 is the operator's older API, which it no longer serves; change the apiVersion to operator.knative.dev/v1beta1 (spec.deployments is spec.workloads there)",
    ]);
  });

  it("the multicluster guide's namespaceConfiguration is refused with the field the CRD serves", () => {
    expect(
      messages(`${SERVING}spec:
  namespaceConfiguration:
    labels: { istio-injection: enabled }
`),
    ).toEqual([
      "6:3 spec.namespaceConfiguration: unrecognized key; rename it to namespace: the Knative multicluster guide's name for it; the operator's CRD serves it as spec.namespace (labels, annotations)",
    ]);
  });

  it("an unquoted boolean in config is refused with the quotes it needs", () => {
    expect(
      messages(`${SERVING}spec:
  config:
    autoscaler:
      enable-scale-to-zero: false
`),
    ).toEqual([
      '8:29 spec.config.autoscaler.enable-scale-to-zero: expected string, got boolean: YAML 1.1 reads the unquoted false as a boolean; quote it ("false")',
    ]);
  });
});

describe("hints", () => {
  it("a key a typo away from a known one: did you mean it?", () => {
    expect(
      messages(`${SERVING}spec:
  verison: "1.22"
  ingress:
    kouirer: { enabled: true }
  workloads:
    - name: activator
      replica: 2
`),
    ).toEqual([
      "6:3 spec.verison: unrecognized key; did you mean version?",
      "8:5 spec.ingress.kouirer: unrecognized key; did you mean kourier?",
      "11:7 spec.workloads[0].replica: unrecognized key; did you mean replicas?",
    ]);
  });

  it("nothing is suggested for a key far from every known one", () => {
    expect(
      messages(`${SERVING}spec:
  frobnicate: true
`),
    ).toEqual(["6:3 spec.frobnicate: unrecognized key"]);
  });

  it("a duration written as a number is told its unit, not to quote it", () => {
    expect(
      messages(`
apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata: { name: knative }
spec:
  waves:
    - name: canary
      clusterProfiles: [{ namespace: fleet-system, name: spoke-1 }]
      soak: 600
  timeLimit: 30
`),
    ).toEqual([
      '9:13 spec.waves[0].soak: expected string, got number: a duration needs a unit, such as "600s" or "600m"',
      '10:14 spec.timeLimit: expected string, got number: a duration needs a unit, such as "30s" or "30m"',
    ]);
  });
});
