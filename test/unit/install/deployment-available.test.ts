import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import { isDeploymentAvailable, unavailableDeployments } from "../../../src/install/health.ts";
import type { KubeObject } from "../../../src/kube/object.ts";

const deployment = (status: Record<string, unknown>): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "activator", namespace: "knative-serving", generation: 2 },
  spec: { replicas: 1 },
  status: { observedGeneration: 2, conditions: [{ type: "Available", status: "True" }], ...status },
});

describe("a Deployment counts as available as `kubectl rollout status` reads it", () => {
  it("when every replica is updated and available", () => {
    expect(isDeploymentAvailable(deployment({ replicas: 1, updatedReplicas: 1, availableReplicas: 1 }))).toBe(
      true,
    );
  });

  it("not while the new pod never starts and the old one keeps Available=True", () => {
    // The surge pod is Pending (no node matches): two replicas, one updated, only the old one available.
    expect(isDeploymentAvailable(deployment({ replicas: 2, updatedReplicas: 1, availableReplicas: 1 }))).toBe(
      false,
    );
    expect(isDeploymentAvailable(deployment({ replicas: 1, updatedReplicas: 1, availableReplicas: 0 }))).toBe(
      false,
    );
  });
});

describe("unavailableDeployments after an upgrade: every desired Deployment available at the new version", () => {
  const available = { replicas: 1, updatedReplicas: 1, availableReplicas: 1 };
  const named = (
    name: string,
    more: Partial<KubeObject["metadata"]> = {},
    status = available,
  ): KubeObject => {
    const d = deployment(status);
    return { ...d, metadata: { ...d.metadata, name, ...more } };
  };
  const stamped = (name: string, hash: string) =>
    named(name, { annotations: { [DESIRED_HASH_ANNOTATION]: hash } });

  it("not before the controller has seen the applied generation", () => {
    const applied = named("activator", { generation: 3 }); // status still says observedGeneration 2
    expect(isDeploymentAvailable(applied)).toBe(false);
    expect(unavailableDeployments([named("activator")], [applied])).toEqual(["activator"]);
  });

  it("a Deployment the new release renamed waits under its new name; one it removed is not waited on", () => {
    const live = [named("webhook"), named("old-name")];
    expect(unavailableDeployments([named("webhook"), named("new-name")], live)).toEqual(["new-name"]);
  });

  it("a live Deployment without the hash just applied is the previous version (a watch cache behind the write)", () => {
    const desired = [stamped("activator", "new"), stamped("webhook", "new")];
    expect(unavailableDeployments(desired, [stamped("activator", "new"), stamped("webhook", "old")])).toEqual(
      ["webhook"],
    );
    expect(unavailableDeployments(desired, [stamped("activator", "new"), named("webhook")])).toEqual([
      "webhook",
    ]);
    expect(unavailableDeployments(desired, [stamped("activator", "new"), stamped("webhook", "new")])).toEqual(
      [],
    );
    // Desired objects not stamped for apply (the rollout watch's own check) compare no hash.
    expect(unavailableDeployments([named("webhook")], [stamped("webhook", "old")])).toEqual([]);
  });
});
