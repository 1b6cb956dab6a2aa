import { describe, expect, it } from "vitest";
import {
  ConditionType,
  computeReady,
  markCondition,
  READY_DEPENDENCIES,
  readinessOf,
  setCondition,
  TargetClusterReason,
} from "../../../src/api/conditions.ts";
import type { Condition } from "../../../src/api/knative.ts";

const t0 = new Date("2025-06-01T10:00:00.123Z");
const t1 = new Date("2025-06-01T10:05:00.456Z");

const allTrue = (): Condition[] =>
  READY_DEPENDENCIES.map((type) => ({ type, status: "True", lastTransitionTime: "2025-06-01T09:00:00Z" }));

describe("condition names", () => {
  it("spell each value as its key, the way upstream's Go constants read", () => {
    for (const names of [ConditionType, TargetClusterReason]) {
      for (const [key, value] of Object.entries(names)) expect(value).toBe(key);
    }
  });
});

describe("setCondition", () => {
  it("adds a condition stamped with the time to the second, keeping conditions sorted by type", () => {
    const conditions = setCondition(
      [{ type: "Ready", status: "Unknown" }],
      { type: ConditionType.InstallSucceeded, status: "True" },
      t0,
    );
    expect(conditions).toEqual([
      { type: "InstallSucceeded", status: "True", lastTransitionTime: "2025-06-01T10:00:00Z" },
      { type: "Ready", status: "Unknown" },
    ]);
  });

  it("returns the same array when nothing changes, so the caller can skip the write", () => {
    const conditions = setCondition([], { type: "InstallSucceeded", status: "False", reason: "Error" }, t0);
    expect(setCondition(conditions, { type: "InstallSucceeded", status: "False", reason: "Error" }, t1)).toBe(
      conditions,
    );
  });

  it("moves lastTransitionTime only when the status changes", () => {
    const failed = setCondition(
      [],
      { type: "InstallSucceeded", status: "False", reason: "Error", message: "a" },
      t0,
    );
    const stillFailed = setCondition(failed, { type: "InstallSucceeded", status: "False", message: "b" }, t1);
    expect(stillFailed).toEqual([
      { type: "InstallSucceeded", status: "False", lastTransitionTime: "2025-06-01T10:00:00Z", message: "b" },
    ]);
    const succeeded = setCondition(stillFailed, { type: "InstallSucceeded", status: "True" }, t1);
    expect(succeeded).toEqual([
      { type: "InstallSucceeded", status: "True", lastTransitionTime: "2025-06-01T10:05:00Z" },
    ]);
  });

  it("never mutates its input", () => {
    const conditions = Object.freeze([Object.freeze<Condition>({ type: "Ready", status: "Unknown" })]);
    expect(() =>
      setCondition(conditions as Condition[], { type: "Ready", status: "True" }, t0),
    ).not.toThrow();
    expect(conditions).toEqual([{ type: "Ready", status: "Unknown" }]);
  });
});

describe("computeReady", () => {
  it("is True when every dependency is True", () => {
    expect(computeReady(allTrue())).toEqual({ type: "Ready", status: "True" });
  });

  it("is False with the reason of a False dependency, even after an Unknown one", () => {
    const conditions = allTrue().map((condition): Condition => {
      if (condition.type === ConditionType.DependenciesInstalled) return { ...condition, status: "Unknown" };
      if (condition.type === ConditionType.TargetClusterResolved) {
        return {
          ...condition,
          status: "False",
          reason: TargetClusterReason.ClusterProfileNotFound,
          message: "ClusterProfile fleet/prod-eu1 not found",
        };
      }
      return condition;
    });
    expect(computeReady(conditions)).toEqual({
      type: "Ready",
      status: "False",
      reason: "ClusterProfileNotFound",
      message: "ClusterProfile fleet/prod-eu1 not found",
    });
  });

  it("is Unknown while a dependency is missing", () => {
    const conditions = allTrue().filter((condition) => condition.type !== ConditionType.DeploymentsAvailable);
    expect(computeReady(conditions)).toEqual({ type: "Ready", status: "Unknown" });
  });
});

describe("markCondition", () => {
  it("sets the condition and brings Ready along", () => {
    const failing = markCondition(
      allTrue(),
      {
        type: ConditionType.DeploymentsAvailable,
        status: "False",
        reason: "NotReady",
        message: "Waiting on deployments: activator",
      },
      t0,
    );
    expect(failing.find((condition) => condition.type === "Ready")).toEqual({
      type: "Ready",
      status: "False",
      lastTransitionTime: "2025-06-01T10:00:00Z",
      reason: "NotReady",
      message: "Waiting on deployments: activator",
    });
    const recovered = markCondition(
      failing,
      { type: ConditionType.DeploymentsAvailable, status: "True" },
      t1,
    );
    expect(recovered.find((condition) => condition.type === "Ready")).toEqual({
      type: "Ready",
      status: "True",
      lastTransitionTime: "2025-06-01T10:05:00Z",
    });
    expect(markCondition(recovered, { type: ConditionType.DeploymentsAvailable, status: "True" }, t1)).toBe(
      recovered,
    );
  });
});

describe("readinessOf: the one reader of a CR's readiness", () => {
  const at = "2026-01-01T00:00:00Z";
  const c = (type: string, status: "True" | "False" | "Unknown", reason?: string, message?: string) => ({
    type,
    status,
    lastTransitionTime: at,
    ...(reason && { reason }),
    ...(message && { message }),
  });

  it("names the first condition in install order that is not True as what blocks Ready", () => {
    const read = readinessOf({
      metadata: { generation: 2 },
      status: {
        observedGeneration: 2,
        conditions: [
          c("DeploymentsAvailable", "False", "NotReady", "Waiting on deployments: webhook"),
          c("InstallSucceeded", "False", "Error", "Install failed with message: boom"),
          c("Ready", "False", "NotReady", "Waiting on deployments: webhook"),
          c("TargetClusterResolved", "True"),
        ],
      },
    });
    expect(read).toEqual({
      phase: "Failed",
      reason: "Error",
      message: "InstallSucceeded=False (Error: Install failed with message: boom)",
      ready: "False",
      stale: false,
      deleting: false,
      blocking: {
        type: "InstallSucceeded",
        status: "False",
        reason: "Error",
        message: "Install failed with message: boom",
      },
    });
  });

  it("is stale when the status describes an older generation or none, and says when the CR is deleting", () => {
    expect(readinessOf({ metadata: { generation: 3 }, status: { observedGeneration: 2 } })).toMatchObject({
      phase: "InProgress",
      reason: "Reconciling",
      ready: "Unknown",
      stale: true,
    });
    expect(readinessOf({ metadata: { generation: 1 } }).stale).toBe(true);
    expect(
      readinessOf({
        metadata: { deletionTimestamp: at },
        status: { observedGeneration: 1, conditions: [c("Ready", "True")] },
      }),
    ).toMatchObject({
      phase: "Terminating",
      reason: "Deleting",
      ready: "True",
      stale: false,
      deleting: true,
    });
    // Marking a custom resource deleted bumps its generation: its last conditions still say what holds it.
    expect(
      readinessOf({
        metadata: { deletionTimestamp: at, generation: 2 },
        status: {
          observedGeneration: 1,
          conditions: [c("Ready", "False"), { ...c("TargetClusterResolved", "False"), reason: "Gone" }],
        },
      }),
    ).toMatchObject({
      phase: "Terminating",
      stale: true,
      message: "the CR is being deleted; its cluster is being cleaned up; TargetClusterResolved=False (Gone)",
    });
  });

  it("is Current only with Ready and DeploymentsAvailable True on the current spec; Failed while Ready is False", () => {
    const read = (conditions: Condition[]) =>
      readinessOf({ metadata: { generation: 2 }, status: { observedGeneration: 2, conditions } });
    expect(read(allTrue().concat(c("Ready", "True")))).toMatchObject({ phase: "Current" });
    expect(read(allTrue().concat(c("Ready", "True"))).message).toBeUndefined();
    // Ready alone: its Deployments are not reported available, so it is not serving yet.
    expect(read([c("Ready", "True")])).toMatchObject({
      phase: "InProgress",
      message: "DeploymentsAvailable=Unknown",
    });
    expect(read([c("Ready", "Unknown", "Installing")])).toMatchObject({
      phase: "InProgress",
      reason: "Installing",
      message: "Ready=Unknown (Installing)",
    });
    expect(read([c("Ready", "False", "Failed", "it broke")])).toMatchObject({
      phase: "Failed",
      message: "Ready=False (Failed: it broke)",
    });
    // A status written by no controller yet: whatever it says, the spec is not reported on.
    const unreported = {
      metadata: { generation: 2 },
      status: { conditions: [...allTrue(), c("Ready", "True")] },
    };
    expect(readinessOf(unreported)).toMatchObject({ phase: "InProgress", reason: "Reconciling" });
  });
});
