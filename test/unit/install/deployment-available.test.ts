import { describe, expect, it } from "vitest";
import { isDeploymentAvailable } from "../../../src/install/health.ts";

const deployment = (status: Record<string, unknown>) => ({
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
