import { describe, expect, it } from "vitest";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { driftOwner } from "../../../src/install/drift-owner.ts";

const serving = (spec: object): KnativeResource =>
  KnativeResourceSchema.parse({
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeServing",
    metadata: { name: "knative-serving", namespace: "knative-fleet" },
    spec: { clusterProfileRef: { namespace: "fleet-system", name: "spoke-1" }, ...spec },
  });

const configMap = (name: string) => ({ kind: "ConfigMap", name });
const deployment = (name: string) => ({ kind: "Deployment", name });
const container = (name: string, ...rest: string[]) => [
  "spec",
  "template",
  "spec",
  "containers",
  { name },
  ...rest,
];

describe("driftOwner: the CR field that sets a drifted field", () => {
  it("a Knative ConfigMap's key is spec.config.<name>.<key>, set or not", () => {
    const cr = serving({ config: { autoscaler: { "enable-scale-to-zero": "true" } } });
    expect(driftOwner(cr, configMap("config-autoscaler"), ["data", "enable-scale-to-zero"])).toEqual({
      path: ["spec", "config", "autoscaler", "enable-scale-to-zero"],
      field: "spec.config.autoscaler.enable-scale-to-zero",
      set: true,
    });
    expect(driftOwner(cr, configMap("config-autoscaler"), ["data", "max-scale"])).toMatchObject({
      field: "spec.config.autoscaler.max-scale",
      set: false,
    });
    expect(driftOwner(cr, configMap("config-network"), ["data", "ingress-class"])).toMatchObject({
      field: "spec.config.network.ingress-class",
      set: false,
    });
  });

  it("keeps the section name the file uses (upstream reads config-autoscaler: too)", () => {
    const cr = serving({ config: { "config-autoscaler": { "max-scale": "3" } } });
    expect(driftOwner(cr, configMap("config-autoscaler"), ["data", "max-scale"])).toMatchObject({
      field: "spec.config.config-autoscaler.max-scale",
      set: true,
    });
  });

  it("a Deployment's replicas, labels and scheduling are its spec.workloads entry's fields", () => {
    const cr = serving({ workloads: [{ name: "webhook" }, { name: "activator", replicas: 3 }] });
    expect(driftOwner(cr, deployment("activator"), ["spec", "replicas"])).toEqual({
      path: ["spec", "workloads", 1, "replicas"],
      field: "spec.workloads[1].replicas",
      set: true,
    });
    expect(
      driftOwner(cr, deployment("activator"), ["spec", "template", "spec", "nodeSelector", "zone"]),
    ).toMatchObject({
      field: "spec.workloads[1].nodeSelector",
      set: false,
    });
    expect(driftOwner(cr, deployment("webhook"), ["metadata", "labels", "team"])).toMatchObject({
      field: "spec.workloads[0].labels",
      set: false,
    });
  });

  it("a container's resources and env are the entry's per-container lists", () => {
    const cr = serving({
      workloads: [{ name: "controller", resources: [{ container: "controller", limits: { cpu: "1" } }] }],
    });
    expect(
      driftOwner(cr, deployment("controller"), container("controller", "resources", "limits", "cpu")),
    ).toMatchObject({
      field: "spec.workloads[0].resources",
      set: true,
    });
    expect(driftOwner(cr, deployment("controller"), container("controller", "env"))).toMatchObject({
      field: "spec.workloads[0].env",
      set: false,
    });
    // Another field of the container: the entry as a whole.
    expect(driftOwner(cr, deployment("controller"), container("controller", "image"))).toMatchObject({
      field: "spec.workloads[0]",
      set: true,
    });
  });

  it("a workload without an entry points at spec.workloads, where one would go", () => {
    expect(driftOwner(serving({}), deployment("activator"), ["spec", "replicas"])).toEqual({
      path: ["spec", "workloads"],
      field: "spec.workloads",
      set: false,
    });
  });

  it("what no CR field sets comes from the release manifests: no owner", () => {
    const cr = serving({});
    expect(driftOwner(cr, { kind: "Service", name: "activator-service" }, ["spec", "ports"])).toBeUndefined();
    expect(driftOwner(cr, configMap("kube-root-ca"), ["data", "ca.crt"])).toBeUndefined();
  });
});
