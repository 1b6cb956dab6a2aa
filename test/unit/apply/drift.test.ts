import { describe, expect, it } from "vitest";
import { describeDrift } from "../../../src/apply/drift.ts";
import type { KubeObject } from "../../../src/kube/object.ts";

// managedFields as a kube-apiserver writes them: our server-side apply, then someone else's write.
const ours = (fieldsV1: object, time = "2026-11-28T10:00:00Z") => ({
  manager: "knative-fleet",
  operation: "Apply",
  apiVersion: "v1",
  time,
  fieldsType: "FieldsV1",
  fieldsV1,
});
const update = (manager: string, fieldsV1: object, time: string, subresource?: string) => ({
  manager,
  operation: "Update",
  apiVersion: "v1",
  time,
  fieldsType: "FieldsV1",
  fieldsV1,
  ...(subresource && { subresource }),
});

const autoscaler = (data: Record<string, string>, managedFields?: object[]): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: {
    name: "config-autoscaler",
    namespace: "knative-serving",
    ...(managedFields && { managedFields }),
  },
  data,
});

const controller = (replicas: number, cpu: string, managedFields?: object[]): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "controller", namespace: "knative-serving", ...(managedFields && { managedFields }) },
  spec: {
    replicas,
    template: {
      spec: {
        containers: [
          { name: "controller", image: "gcr.io/knative/controller", resources: { limits: { cpu } } },
        ],
      },
    },
  },
});

describe("describeDrift", () => {
  it("names a changed ConfigMap key, its old and new value, and the hand edit's manager and time", () => {
    const live = autoscaler({ "enable-scale-to-zero": "false", "max-scale": "0" }, [
      ours({ "f:data": { "f:max-scale": {} } }),
      update("kubectl-edit", { "f:data": { "f:enable-scale-to-zero": {} } }, "2026-11-28T10:05:00Z"),
    ]);
    const drift = describeDrift(
      autoscaler({ "enable-scale-to-zero": "true", "max-scale": "0" }),
      live,
      "knative-fleet",
    );
    expect(drift).toMatchObject({
      ref: { kind: "ConfigMap", namespace: "knative-serving", name: "config-autoscaler" },
      change: "changed",
      fields: [{ path: "data.enable-scale-to-zero", want: '"true"', have: '"false"' }],
      omittedFields: 0,
      manager: "kubectl-edit",
      operation: "Update",
      at: "2026-11-28T10:05:00Z",
    });
  });

  it("finds the manager that owns the changed field, not merely the latest writer", () => {
    const live = controller(5, "1", [
      ours({ "f:spec": { "f:template": {} } }),
      update("kube-controller-manager", { "f:spec": { "f:replicas": {} } }, "2026-11-28T10:05:00Z", "scale"),
      update("kubectl-label", { "f:metadata": { "f:labels": { "f:team": {} } } }, "2026-11-28T10:09:00Z"),
    ]);
    const drift = describeDrift(controller(2, "1"), live, "knative-fleet");
    expect(drift.fields.map((f) => f.path)).toEqual(["spec.replicas"]);
    expect(drift.manager).toBe("kube-controller-manager");
  });

  it("names a container by its name and the field inside it", () => {
    const live = controller(2, "2", [
      ours({}),
      update(
        "kubectl-edit",
        {
          "f:spec": {
            "f:template": {
              "f:spec": {
                "f:containers": {
                  'k:{"name":"controller"}': { "f:resources": { "f:limits": { "f:cpu": {} } } },
                },
              },
            },
          },
        },
        "2026-11-28T11:00:00Z",
      ),
    ]);
    const drift = describeDrift(controller(2, "500m"), live, "knative-fleet");
    expect(drift.fields).toMatchObject([
      {
        path: "spec.template.spec.containers[name=controller].resources.limits.cpu",
        want: '"500m"',
        have: '"2"',
      },
    ]);
    expect(drift.fields[0]!.steps).toEqual([
      "spec",
      "template",
      "spec",
      "containers",
      { name: "controller" },
      "resources",
      "limits",
      "cpu",
    ]);
    expect(drift.manager).toBe("kubectl-edit");
  });

  it("a removed key is owned by nobody: the writer after our last apply is named", () => {
    const live = autoscaler({}, [
      ours({ "f:data": {} }, "2026-11-28T10:00:00Z"),
      update("old-script", { "f:metadata": { "f:labels": {} } }, "2026-11-27T09:00:00Z"),
      update("kubectl-edit", { "f:data": {} }, "2026-11-28T10:07:00Z"),
    ]);
    const drift = describeDrift(autoscaler({ "stable-window": "60s" }), live, "knative-fleet");
    expect(drift.fields).toEqual([
      { path: "data.stable-window", steps: ["data", "stable-window"], want: '"60s"' },
    ]);
    expect(drift.manager).toBe("kubectl-edit");
  });

  it("without another writer on record, says no manager rather than guessing", () => {
    const drift = describeDrift(autoscaler({ a: "1" }), autoscaler({ a: "2" }, [ours({})]), "knative-fleet");
    expect(drift.manager).toBeUndefined();
    expect(drift.at).toBeUndefined();
  });

  it("never shows a Secret's values", () => {
    const secret = (value: string): KubeObject => ({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "webhook-certs", namespace: "knative-serving" },
      data: { key: value },
    });
    const drift = describeDrift(secret("c2VjcmV0"), secret("b3RoZXI="), "knative-fleet");
    expect(drift.fields).toMatchObject([{ path: "data.key", want: "(hidden)", have: "(hidden)" }]);
    expect(JSON.stringify(drift)).not.toContain("c2VjcmV0");
  });

  it("keys that hold dots are bracketed; values and the number of fields are bounded", () => {
    const data = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`k${i}`, "x".repeat(200)]));
    const drift = describeDrift(
      {
        ...autoscaler(data),
        metadata: { ...autoscaler({}).metadata, labels: { "app.kubernetes.io/name": "a" } },
      },
      autoscaler({}),
      "knative-fleet",
    );
    expect(drift.fields[0]!.path).toBe('metadata.labels["app.kubernetes.io/name"]');
    expect(drift.fields).toHaveLength(8);
    expect(drift.omittedFields).toBe(5);
    expect(drift.fields[1]!.want!.length).toBeLessThanOrEqual(80);
  });

  it("an object deleted by hand is reported as deleted", () => {
    expect(describeDrift(autoscaler({ a: "1" }), undefined, "knative-fleet")).toMatchObject({
      change: "deleted",
      fields: [],
    });
  });

  it("keys someone added to a watched ConfigMap are drift that an apply does not put back", () => {
    const live = autoscaler({ "enable-scale-to-zero": "true", "max-scale": "5" }, [
      ours({ "f:data": { "f:enable-scale-to-zero": {} } }),
      update("kubectl-edit", { "f:data": { "f:max-scale": {} } }, "2026-11-28T10:05:00Z"),
    ]);
    const wanted = autoscaler({ "enable-scale-to-zero": "true" });
    expect(describeDrift(wanted, live, "knative-fleet", true)).toMatchObject({
      fields: [{ path: "data.max-scale", have: '"5"' }],
      putBack: false,
      manager: "kubectl-edit",
    });
    // An edit beside the addition: the edit is put back; the added key is reported at the next check.
    const edited = { ...live, data: { "enable-scale-to-zero": "false", "max-scale": "5" } };
    const both = describeDrift(wanted, edited, "knative-fleet", true);
    expect(both.fields.map((f) => f.path)).toEqual(["data.enable-scale-to-zero"]);
    expect(both.putBack).toBe(true);
    // Not watched: only what the install sets counts.
    expect(describeDrift(wanted, edited, "knative-fleet").fields.map((f) => f.path)).toEqual([
      "data.enable-scale-to-zero",
    ]);
  });
});
