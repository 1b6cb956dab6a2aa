import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ConditionType } from "../../../src/api/conditions.ts";
import type { Condition } from "../../../src/api/knative.ts";
import { MANAGED_BY, MANAGED_BY_LABEL, SOURCE_REPOSITORY_ANNOTATION } from "../../../src/api/labels.ts";
import { renderStatusTable, statusRows } from "../../../src/commands/status.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { healthOf } from "../../../src/rollout/weigh.ts";
import { renderStatusSummary } from "../../../src/status/summary.ts";

// The same hub CR read by the three readers people and the rollout meet: the status file committed back to
// Git, `knative-fleet status`, and the rollout gate that decides whether a wave may go on. Each shows the
// one verdict of readinessOf: the same phase, and the same line saying why it is not Current.

const at = "2026-01-01T00:00:00Z";
const condition = (type: string, status: Condition["status"], reason?: string, message?: string) => ({
  type,
  status,
  lastTransitionTime: at,
  ...(reason && { reason }),
  ...(message && { message }),
});
const TRUE = Object.values(ConditionType).map((type) => condition(type, "True"));
const replacing = (...changed: ReturnType<typeof condition>[]) =>
  TRUE.map((c) => changed.find((d) => d.type === c.type) ?? c);

interface Case {
  name: string;
  status?: { observedGeneration?: number; conditions?: Condition[] };
  generation?: number;
  deleting?: boolean;
  phase: string;
}

const CASES: Case[] = [
  { name: "current", status: { observedGeneration: 2, conditions: TRUE }, phase: "Current" },
  {
    name: "unresolved",
    status: {
      observedGeneration: 2,
      conditions: replacing(
        condition("TargetClusterResolved", "False", "ClusterProfileNotFound", "no ClusterProfile spoke-9"),
        condition("Ready", "False", "ClusterProfileNotFound", "no ClusterProfile spoke-9"),
      ),
    },
    phase: "Failed",
  },
  {
    name: "rolling-out",
    status: {
      observedGeneration: 2,
      conditions: replacing(
        condition("DeploymentsAvailable", "False", "NotReady", "Waiting on deployments: webhook"),
        condition("Ready", "Unknown", "NotReady", "Waiting on deployments: webhook"),
      ),
    },
    phase: "InProgress",
  },
  {
    name: "ready-without-deployments",
    status: { observedGeneration: 2, conditions: [condition("Ready", "True")] },
    phase: "InProgress",
  },
  { name: "behind", status: { observedGeneration: 1, conditions: TRUE }, phase: "InProgress" },
  { name: "never-reported", phase: "InProgress" },
  {
    name: "deleting",
    status: { observedGeneration: 2, conditions: TRUE },
    deleting: true,
    phase: "Terminating",
  },
];

function hubCr({ name, status, deleting, generation = 2 }: Case): KubeObject {
  return {
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeServing",
    metadata: {
      name,
      namespace: "knative-fleet",
      generation,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
      annotations: { [SOURCE_REPOSITORY_ANNOTATION]: "https://git.example/fleet.git" },
      ...(deleting && { deletionTimestamp: at, finalizers: ["knativeservings.operator.knative.dev"] }),
    },
    spec: { clusterProfileRef: { namespace: "fleet-system", name: "spoke-1" } },
    ...(status && { status }),
  };
}

describe("the readiness verdict, read by the status file, `knative-fleet status` and the rollout gate", () => {
  const objects = CASES.map(hubCr);
  const statusFile = parse(
    renderStatusSummary({
      resources: objects,
      sync: {
        source: { repository: "https://git.example/fleet.git", branch: "main", commit: "c".repeat(40) },
        resources: [],
        prune: { state: "none", candidates: [], retained: [] },
        diagnostics: [],
        failedFiles: [],
      },
    }).find((file) => file.name === "fleet.yaml")!.content,
  ) as { resources: { name: string; phase: string; message?: string }[] };
  const command = statusRows(objects);

  it.each(CASES)("$name: $phase everywhere, with the same reason", (c) => {
    const object = objects.find((o) => o.metadata.name === c.name)!;
    const file = statusFile.resources.find((row) => row.name === c.name)!;
    const row = command.find((r) => r.name === c.name)!;
    const gate = healthOf(object);
    expect(file.phase).toBe(c.phase);
    expect(row.phase).toBe(c.phase);
    expect(gate.healthy).toBe(c.phase === "Current");
    expect(row.message).toBe(file.message);
    expect(gate.reason).toBe(file.message ?? "");
    // The table a person reads says it too.
    const line = renderStatusTable([row]).split("\n")[1]!;
    expect(line).toContain(c.phase);
    if (c.phase !== "Current" && c.phase !== "Terminating") expect(line).toContain(file.message);
  });
});
