import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { z } from "zod";
import { crdFileName, type SchemaNode } from "../../../src/api/crd.ts";
import {
  KNATIVE_KINDS,
  KnativeEventingSchema,
  KnativeEventingSpecSchema,
  KnativeResourceSchema,
  KnativeServingSchema,
  KnativeServingSpecSchema,
  KnativeStatusSchema,
  OPERATOR_VERSION,
} from "../../../src/api/knative.ts";
import { readCrdSchema, sampleInstance } from "../../support/openapi-schema.ts";
import { upstreamOperatorCrdsDir } from "../../support/shared.ts";

const SPEC_SCHEMAS = { KnativeServing: KnativeServingSpecSchema, KnativeEventing: KnativeEventingSpecSchema };

const servingYaml = `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: knative-serving
  namespace: fleet-prod-eu1
  labels:
    fleet.example.com/tier: prod
spec:
  version: "1.22"
  clusterProfileRef:
    name: prod-eu1
    namespace: fleet
  config:
    network:
      ingress-class: kourier.ingress.networking.knative.dev
    domain:
      eu1.example.com: ""
    autoscaler:
      enable-scale-to-zero: "true"
  registry:
    default: registry.example.com/knative/\${NAME}:v1.22.1
    override:
      queue-proxy: registry.example.com/knative/queue:v1.22.1-patched
    imagePullSecrets:
      - name: registry-credentials
  ingress:
    kourier:
      enabled: true
      service-type: LoadBalancer
  high-availability:
    replicas: 2
  workloads:
    - name: activator
      replicas: 3
      resources:
        - container: activator
          requests: { cpu: 300m, memory: 60Mi }
          limits: { cpu: 1, memory: 600Mi }
      env:
        - container: activator
          envVars:
            - name: POD_IP
              valueFrom: { fieldRef: { fieldPath: status.podIP } }
      tolerations:
        - { key: dedicated, operator: Equal, value: knative, effect: NoSchedule }
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector: { matchLabels: { app: activator } }
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
      readinessProbes:
        - { container: activator, periodSeconds: 5 }
  podDisruptionBudgets:
    - name: activator-pdb
      minAvailable: 50%
  namespace:
    labels:
      istio-injection: disabled
`;

const eventingYaml = `
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata:
  name: knative-eventing
spec:
  version: 1.22.2
  clusterProfileRef: { name: prod-eu1, namespace: fleet }
  defaultBrokerClass: MTChannelBasedBroker
  sinkBindingSelectionMode: inclusion
  source:
    ceph: { enabled: false }
    github: { enabled: true }
    gitlab: { enabled: false }
    kafka: { enabled: true }
    rabbitmq: { enabled: false }
    redis: { enabled: false }
  additionalManifests:
    - URL: https://github.com/knative-extensions/eventing-kafka-broker/releases/download/knative-v1.22.0/eventing-kafka-controller.yaml
`;

function issuesOf(schema: z.ZodType, value: unknown) {
  const result = schema.safeParse(value);
  if (result.success) throw new Error("expected the object to be rejected");
  return result.error.issues.map(({ code, path, message, ...rest }) => ({
    code,
    path,
    message,
    keys: "keys" in rest ? rest.keys : undefined,
  }));
}

describe("KnativeServing and KnativeEventing", () => {
  it("parse a Serving CR with kourier, config, registry, workloads and a target cluster", () => {
    const serving = KnativeServingSchema.parse(parse(servingYaml));
    expect(serving.spec.clusterProfileRef).toEqual({ name: "prod-eu1", namespace: "fleet" });
    expect(serving.spec.ingress?.kourier?.enabled).toBe(true);
    expect(serving.spec.workloads?.[0]?.resources?.[0]?.limits).toEqual({ cpu: 1, memory: "600Mi" });
    expect(serving.spec.podDisruptionBudgets?.[0]?.minAvailable).toBe("50%");
  });

  it("parse an Eventing CR with a default broker class and sources", () => {
    const eventing = KnativeEventingSchema.parse(parse(eventingYaml));
    expect(eventing.spec.defaultBrokerClass).toBe("MTChannelBasedBroker");
    expect(eventing.spec.source?.kafka.enabled).toBe(true);
    expect(eventing.spec.additionalManifests?.[0]?.URL).toMatch(/eventing-kafka-controller\.yaml$/);
  });

  it("tell the kinds apart and default a missing spec to empty", () => {
    const resources = [parse(servingYaml), parse(eventingYaml)].map((object) =>
      KnativeResourceSchema.parse(object),
    );
    expect(resources.map((resource) => resource.kind)).toEqual(["KnativeServing", "KnativeEventing"]);
    const bare = {
      apiVersion: "operator.knative.dev/v1beta1",
      kind: "KnativeServing",
      metadata: { name: "x" },
    };
    expect(KnativeResourceSchema.parse(bare).spec).toEqual({});
  });

  it("read a CR back from the API server, with server metadata and upstream's status", () => {
    const fromServer = {
      ...parse(servingYaml),
      metadata: {
        name: "knative-serving",
        namespace: "fleet-prod-eu1",
        uid: "0b7c6f2e-7f5e-4b8e-9f0e-2d1f4c1e9a11",
        resourceVersion: "4711",
        generation: 3,
        creationTimestamp: "2025-06-01T10:00:00Z",
        managedFields: [{ manager: "knative-fleet", operation: "Apply" }],
        finalizers: ["knativeservings.operator.knative.dev"],
      },
      status: {
        observedGeneration: 3,
        version: "1.22.1",
        manifests: ["/var/run/ko/knative-serving/1.22.1"],
        conditions: [
          {
            type: "Ready",
            status: "False",
            reason: "ClusterProfileNotReady",
            lastTransitionTime: "2025-06-01T10:00:05Z",
          },
          {
            type: "TargetClusterResolved",
            status: "False",
            reason: "ClusterProfileNotReady",
            message: "not ready",
          },
        ],
      },
    };
    const serving = KnativeServingSchema.parse(fromServer);
    expect(serving.metadata.generation).toBe(3);
    expect(serving.status?.conditions?.map((condition) => condition.type)).toEqual([
      "Ready",
      "TargetClusterResolved",
    ]);
  });

  // Go's encoding/json does not omit empty structs, so objects written by upstream's Go clients carry these.
  it("accept the empty structs upstream's Go clients write", () => {
    const spec = {
      "controller-custom-certs": { name: "", type: "" },
      registry: {},
      ingress: { istio: { enabled: false }, kourier: { enabled: false }, contour: {}, "gateway-api": {} },
    };
    expect(KnativeServingSpecSchema.parse(spec)).toEqual(spec);
  });

  for (const kind of KNATIVE_KINDS) {
    it(`accept every ${kind} field of the upstream CRD, with a value there, and keep it`, () => {
      const upstream = readCrdSchema(join(upstreamOperatorCrdsDir(), crdFileName(kind)), OPERATOR_VERSION);
      const properties = upstream.properties as Record<string, SchemaNode>;
      const spec = sampleInstance(properties.spec!);
      expect(SPEC_SCHEMAS[kind].parse(spec)).toEqual(spec);
      // Our Condition narrows status to the three values knative.dev/pkg writes.
      const status = sampleInstance(properties.status!, { ".conditions[].status": "True" });
      expect(KnativeStatusSchema.parse(status)).toEqual(status);
    });
  }
});

describe("validation errors", () => {
  it("reject a misspelt field, naming the object it is in", () => {
    const cr = parse(servingYaml);
    cr.spec.verison = "1.22";
    cr.spec.workloads[0].tolerations[0].opertor = "Exists";
    expect(issuesOf(KnativeServingSchema, cr)).toEqual([
      expect.objectContaining({
        code: "unrecognized_keys",
        path: ["spec", "workloads", 0, "tolerations", 0],
        keys: ["opertor"],
      }),
      expect.objectContaining({ code: "unrecognized_keys", path: ["spec"], keys: ["verison"] }),
    ]);
  });

  it("reject config values that are not strings, as the API server would", () => {
    const cr = parse(servingYaml);
    cr.spec.config.autoscaler["enable-scale-to-zero"] = true;
    expect(issuesOf(KnativeServingSchema, cr)).toEqual([
      expect.objectContaining({ path: ["spec", "config", "autoscaler", "enable-scale-to-zero"] }),
    ]);
  });

  it("say what a quantity looks like", () => {
    const cr = parse(servingYaml);
    cr.spec.workloads[0].resources[0].requests = { cpu: "lots", memory: 0.5 };
    const requests = ["spec", "workloads", 0, "resources", 0, "requests"];
    expect(issuesOf(KnativeServingSchema, cr)).toEqual([
      expect.objectContaining({
        path: [...requests, "cpu"],
        message: expect.stringContaining("Kubernetes quantity"),
      }),
      expect.objectContaining({ path: [...requests, "memory"], message: "expected an integer or a string" }),
    ]);
  });

  it("require all six sources once spec.source is set, as upstream's CRD does", () => {
    const cr = parse(eventingYaml);
    cr.spec.source = { kafka: { enabled: true } };
    expect(issuesOf(KnativeEventingSchema, cr).map((issue) => issue.path.join("."))).toEqual([
      "spec.source.ceph",
      "spec.source.github",
      "spec.source.gitlab",
      "spec.source.rabbitmq",
      "spec.source.redis",
    ]);
  });

  it("reject an empty clusterProfileRef name and an unknown kind", () => {
    const cr = parse(eventingYaml);
    cr.spec.clusterProfileRef.name = "";
    expect(issuesOf(KnativeEventingSchema, cr).map((issue) => issue.path.join("."))).toEqual([
      "spec.clusterProfileRef.name",
    ]);
    expect(issuesOf(KnativeResourceSchema, { ...cr, kind: "KnativeKafka" })[0]?.path).toEqual(["kind"]);
  });
});
