import { describe, expect, it } from "vitest";
import { admitHubCr } from "../../../src/admission/hub-cr.ts";
import { isError } from "../../../src/fleet/diagnostic.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { checkFleetSettings } from "../../../src/render/settings-check.ts";
import { DEFAULT_FLEET_SETTINGS, hubCrPolicy } from "../../../src/sync/settings.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

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

/** A KnativeEventing's head, as the docs write it. */
const EVENTING = `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata: { name: knative-eventing, namespace: knative-eventing }
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
  // The Serving CR configuration page (configuring-serving-cr.md), one entry per example.
  "a pinned version": `${SERVING}spec:\n  version: "1.21"\n`,
  "overwrite mode: the release from spec.manifests": `${SERVING}spec:
  version: "1.21"
  manifests:
    - URL: https://my-serving/serving.yaml
    - URL: https://my-net-istio/net-istio.yaml
`,
  "append mode: spec.additionalManifests": `${SERVING}spec:
  version: "1.21"
  additionalManifests:
    - URL: https://my-serving/serving-custom.yaml
`,
  "images from one registry template": `${SERVING}spec:
  registry:
    default: docker.io/knative-images/\${NAME}:latest
`,
  "images one by one, a deployment's container by deployment/container": `${SERVING}spec:
  registry:
    override:
      activator: docker.io/knative-images-repo1/activator:latest
      autoscaler-hpa: docker.io/knative-images-repo5/autoscaler-hpa:latest
      net-istio-controller/controller: docker.io/knative-images-repo6/prefix-net-istio-controller:latest
      queue-proxy: docker.io/knative-images-repo7/queue-proxy-suffix:latest
`,
  "several imagePullSecrets": `${SERVING}spec:
  registry:
    imagePullSecrets:
      - name: regcred
      - name: regcred-2
`,
  "the controller's custom registry certificate": `${SERVING}spec:
  controller-custom-certs:
    name: testCert
    type: ConfigMap
`,
  "another Istio ingress gateway, by selector and external-gateways": `${SERVING}spec:
  ingress:
    istio:
      enabled: true
      knative-ingress-gateway:
        selector:
          istio: ingressgateway
  config:
    istio:
      external-gateways: |
        - name: knative-ingress-gateway
          namespace: knative-serving
          service: custom-ingressgateway.custom-ns.svc.cluster.local
`,
  "a custom cluster-local gateway with its servers": `${SERVING}spec:
  ingress:
    istio:
      enabled: true
      knative-local-gateway:
        selector:
          custom: custom-local-gateway
        servers:
          - port: { number: 443, name: https, protocol: HTTPS, target_port: 8443 }
            hosts: [10.0.0.1]
  config:
    istio:
      local-gateways: |
        - name: knative-local-gateway
          namespace: knative-serving
          service: custom-local-gateway.istio-system.svc.cluster.local
`,
  "Kourier with its own bootstrap ConfigMap": `${SERVING}spec:
  config:
    network:
      ingress-class: kourier.ingress.networking.knative.dev
  ingress:
    kourier:
      bootstrap-configmap: my-configmap
      enabled: true
`,
  "a workload's replicas, labels, annotations and nodeSelector": `${SERVING}spec:
  high-availability:
    replicas: 2
  workloads:
    - name: webhook
      replicas: 3
      labels: { mylabel: foo }
      annotations: { myannotations: bar }
      nodeSelector: { disktype: hdd }
`,
  "a workload's tolerations, affinity and env": `${SERVING}spec:
  workloads:
    - name: activator
      tolerations:
        - { key: "key1", operator: "Equal", value: "value1", effect: "NoSchedule" }
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 1
              preference:
                matchExpressions:
                  - { key: disktype, operator: In, values: [ssd] }
    - name: controller
      env:
        - container: controller
          envVars:
            - name: METRICS_DOMAIN
              value: "knative.dev/my-repo"
`,
  "a service's labels, annotations and selector": `${SERVING}spec:
  services:
    - name: webhook
      labels: { mylabel: foo }
      annotations: { myannotations: bar }
      selector: { myselector: bar }
`,
  "a PodDisruptionBudget's minAvailable": `${SERVING}spec:
  podDisruptionBudgets:
    - name: activator-pdb
      minAvailable: 70%
`,
  // The Eventing CR configuration page (configuring-eventing-cr.md).
  "Eventing's default channel": `${EVENTING}spec:
  config:
    default-ch-webhook:
      default-ch-config: |
        clusterDefault:
          apiVersion: messaging.knative.dev/v1beta1
          kind: KafkaChannel
          spec: { numPartitions: 10, replicationFactor: 1 }
`,
  "the broker's default channel": `${EVENTING}spec:
  config:
    config-br-default-channel:
      channel-template-spec: |
        apiVersion: messaging.knative.dev/v1beta1
        kind: KafkaChannel
        spec: { numPartitions: 6, replicationFactor: 1 }
`,
  "Eventing images by template and deployment/container, an image env variable, pull secrets": `${EVENTING}spec:
  registry:
    default: docker.io/knative-images/\${NAME}:latest
    override:
      broker-controller/eventing-controller: docker.io/knative-images-repo1/broker-eventing-controller:latest
      imc-dispatcher/dispatcher: docker.io/knative-images-repo4/imc-dispatcher:latest
      DISPATCHER_IMAGE: docker.io/knative-images-repo5/DISPATCHER_IMAGE:latest
    imagePullSecrets:
      - name: regcred
      - name: regcred-2
`,
  "the MT channel-based broker as the default class": `${EVENTING}spec:\n  defaultBrokerClass: MTChannelBasedBroker\n`,
  "Eventing on a remote cluster": `${EVENTING}spec:
  clusterProfileRef:
    name: spoke-cluster-1
    namespace: fleet-system
`,
  "Eventing's high availability and a workload's resources": `${EVENTING}spec:
  high-availability:
    replicas: 3
  workloads:
    - name: eventing-controller
      resources:
        - container: eventing-controller
          requests: { cpu: 300m, memory: 100M }
          limits: { cpu: 1000m, memory: 250M }
`,
  "an Eventing workload's nodeSelector, tolerations, affinity and env": `${EVENTING}spec:
  workloads:
    - name: eventing-controller
      nodeSelector: { disktype: hdd }
      tolerations:
        - { key: "key1", operator: "Equal", value: "value1", effect: "NoSchedule" }
      affinity:
        nodeAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 1
              preference:
                matchExpressions:
                  - { key: disktype, operator: In, values: [ssd] }
      env:
        - container: eventing-controller
          envVars:
            - { name: METRICS_DOMAIN, value: "knative.dev/my-repo" }
`,
  "an Eventing service's labels and selector, a PodDisruptionBudget": `${EVENTING}spec:
  services:
    - name: eventing-webhook
      labels: { mylabel: foo }
      annotations: { myannotations: bar }
      selector: { myselector: bar }
  podDisruptionBudgets:
    - name: eventing-webhook
      minAvailable: 70%
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

  // What a release knows a CR may set (src/render/settings-check.ts): no example names a ConfigMap, key or
  // workload the release does not have. CRs that bring their own manifests are not checked there.
  it("every example passes the release-aware settings check (warnings aside)", async () => {
    const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
    const errors: string[] = [];
    for (const [name, text] of Object.entries(VALID)) {
      const files = [{ path: "clusters/example.yaml", text }];
      const { resources } = model(text);
      for (const found of await checkFleetSettings(resources, files, releases)) {
        if (isError(found))
          errors.push(`${name}: ${found.line}:${found.column} ${found.field}: ${found.message}`);
      }
    }
    expect(errors).toEqual([]);
  }, 60_000);

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
