import { describe, expect, it } from "vitest";
import { describeRef, type KubeObject, objectKey, refOf } from "../../../src/kube/object.ts";

describe("the one object identity", () => {
  it("keys an object by group, kind, namespace and name, not by version", () => {
    const v1: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "a", namespace: "ns" },
    };
    expect(objectKey(v1)).toBe("apps/Deployment/ns/a");
    expect(objectKey({ ...v1, apiVersion: "apps/v1beta1" })).toBe(objectKey(v1));
    expect(objectKey({ apiVersion: "v1", kind: "Namespace", metadata: { name: "ns" } })).toBe(
      "/Namespace//ns",
    );
  });

  it("keys a manifest the server still has to name by its generateName, the same in every stage", () => {
    // Render, apply and prune used two key functions; only render's knew generateName, so a generateName-only
    // manifest had the key ".../undefined" in apply.
    const job: KubeObject = {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { generateName: "storage-version-migration-", namespace: "knative-serving" },
    };
    expect(objectKey(job)).toBe("batch/Job/knative-serving/storage-version-migration-");
    expect(refOf(job).name).toBe("storage-version-migration-");
    expect(describeRef(refOf(job))).toBe("Job.batch knative-serving/storage-version-migration-");
  });
});
