import type { DriftRecord } from "../../../src/api/drift.ts";

// Drift records as src/reconcile/drift.ts writes them into a hub CR's status, for the tests of what shows
// them (the status files, `knative-fleet status`).

export const KEPT: DriftRecord = {
  object: "ConfigMap knative-serving/config-autoscaler",
  change: "changed",
  fields: [
    {
      path: "data.enable-scale-to-zero",
      want: '"true"',
      have: '"false"',
      owner: {
        field: "spec.config.autoscaler.enable-scale-to-zero",
        set: true,
        at: "clusters/spoke-1-serving.yaml:14",
      },
    },
  ],
  manager: "kubectl-edit",
  operation: "Update",
  at: "2026-11-28T15:00:00Z",
  outcome: "kept",
};

export const CORRECTED: DriftRecord = {
  object: "Deployment knative-serving/activator",
  change: "changed",
  fields: [
    {
      path: "spec.replicas",
      want: "2",
      have: "5",
      owner: { field: "spec.workloads", set: false, at: "clusters/spoke-2-serving.yaml:6" },
    },
    { path: "spec.template.spec.priorityClassName", have: '"high"' },
    {
      path: "spec.template.spec.containers[name=activator].resources",
      want: '{"limits":{"cpu":"1"}}',
      have: '{"limits":{"cpu":"2"}}',
      owner: { field: "spec.workloads", set: false, at: "clusters/spoke-2-serving.yaml:6" },
    },
  ],
  omittedFields: 2,
  manager: "kube-controller-manager",
  operation: "Update",
  at: "2026-11-28T14:00:00Z",
  outcome: "corrected",
};
