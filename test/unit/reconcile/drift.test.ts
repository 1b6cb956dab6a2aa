import { describe, expect, it } from "vitest";
import { findCondition } from "../../../src/api/conditions.ts";
import { type DriftRecord, describeRecord, parseDriftRecords } from "../../../src/api/drift.ts";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { DRIFT_STATUS_ANNOTATION } from "../../../src/api/labels.ts";
import { describeDrift } from "../../../src/apply/drift.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { driftRecords, locatorOver, withDrift } from "../../../src/reconcile/drift.ts";

const NOW = new Date("2026-11-28T12:00:00Z");
const LATER = new Date("2026-11-28T12:10:00Z");

const FILE = `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: knative-serving
  namespace: knative-fleet
spec:
  clusterProfileRef: {namespace: fleet-system, name: spoke-2}
  config:
    autoscaler:
      enable-scale-to-zero: "true"
`;

const cr: KnativeResource = KnativeResourceSchema.parse({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: {
    name: "knative-serving",
    namespace: "knative-fleet",
    annotations: {
      "fleet.knative.dev/source-path": "clusters/spoke-2/serving.yaml",
      "fleet.knative.dev/source-commit": "c0ffee",
    },
  },
  spec: {
    clusterProfileRef: { namespace: "fleet-system", name: "spoke-2" },
    config: { autoscaler: { "enable-scale-to-zero": "true" } },
  },
});

const autoscaler = (value: string, time = "2026-11-28T11:59:00Z"): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: {
    name: "config-autoscaler",
    namespace: "knative-serving",
    managedFields: [
      { manager: "knative-fleet", operation: "Apply", time: "2026-11-28T11:00:00Z", fieldsV1: {} },
      {
        manager: "kubectl-edit",
        operation: "Update",
        time,
        fieldsV1: { "f:data": { "f:enable-scale-to-zero": {} } },
      },
    ],
  },
  data: { "enable-scale-to-zero": value },
});
const wanted: KubeObject = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "config-autoscaler", namespace: "knative-serving" },
  data: { "enable-scale-to-zero": "true" },
};
const drifted = (value: string, time?: string) =>
  describeDrift(wanted, autoscaler(value, time), "knative-fleet");

const files = async (commit: string) => {
  reads.push(commit);
  return { files: [{ path: "clusters/spoke-2/serving.yaml", text: FILE }] };
};
let reads: string[] = [];

describe("drift records", () => {
  it("name the CR field and the fleet file line to edit instead", async () => {
    reads = [];
    const [record] = await driftRecords(cr, [drifted("false")], "corrected", locatorOver(files));
    expect(record).toEqual({
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
            at: "clusters/spoke-2/serving.yaml:10",
          },
        },
      ],
      manager: "kubectl-edit",
      operation: "Update",
      at: "2026-11-28T11:59:00Z",
      outcome: "corrected",
    });
    expect(reads).toEqual(["c0ffee"]);
    expect(describeRecord(record!)).toBe(
      'put back ConfigMap knative-serving/config-autoscaler changed by kubectl-edit at 2026-11-28T11:59:00Z; data.enable-scale-to-zero: "true" -> "false"; edit spec.config.autoscaler.enable-scale-to-zero in clusters/spoke-2/serving.yaml:10 instead',
    );
  });

  it("a key added by hand is kept whatever the mode (an apply cannot take it back), and says where it would go", async () => {
    const live = { ...autoscaler("true"), data: { "enable-scale-to-zero": "true", "max-scale": "5" } };
    const [record] = await driftRecords(
      cr,
      [describeDrift(wanted, live, "knative-fleet", true)],
      "corrected",
      locatorOver(files),
    );
    expect(record).toMatchObject({
      outcome: "kept",
      fields: [
        {
          path: "data.max-scale",
          have: '"5"',
          owner: {
            field: "spec.config.autoscaler.max-scale",
            set: false,
            at: "clusters/spoke-2/serving.yaml:9",
          },
        },
      ],
    });
  });

  it("without the file (or when reading it fails), still name the file", async () => {
    const failing = locatorOver(async () => {
      throw new Error("git 500");
    });
    for (const locate of [undefined, failing]) {
      const [record] = await driftRecords(cr, [drifted("false")], "kept", locate);
      expect(record!.fields[0]!.owner).toEqual({
        field: "spec.config.autoscaler.enable-scale-to-zero",
        set: true,
        at: "clusters/spoke-2/serving.yaml",
      });
    }
  });
});

describe("withDrift: the status a pass leaves", () => {
  const record = (value: string, outcome: DriftRecord["outcome"], time?: string) =>
    driftRecords(cr, [drifted(value, time)], outcome);

  it("a CR that never drifted gets no condition and no annotation", () => {
    const status = { conditions: [] };
    const out = withDrift(status, [], NOW);
    expect(out).toEqual({ conditions: [], fresh: [] });
  });

  it("a kept drift sets Drifted True once; the same drift at the next pass changes nothing (no write at rest)", async () => {
    const first = withDrift({ conditions: [] }, await record("false", "kept"), NOW);
    expect(first.fresh).toHaveLength(1);
    expect(findCondition(first.conditions, "Drifted")).toMatchObject({
      status: "True",
      severity: "Info",
      reason: "DriftKept",
      message: "kept: ConfigMap knative-serving/config-autoscaler changed by kubectl-edit",
    });
    expect(parseDriftRecords(first.annotations![DRIFT_STATUS_ANNOTATION])).toHaveLength(1);
    const again = withDrift(
      { annotations: first.annotations!, conditions: first.conditions },
      await record("false", "kept"),
      LATER,
    );
    expect(again.fresh).toEqual([]);
    expect(again.conditions).toBe(first.conditions);
    expect(again.annotations).toBe(first.annotations);
  });

  it("a kept drift that went away turns Drifted False", async () => {
    const kept = withDrift({ conditions: [] }, await record("false", "kept"), NOW);
    const gone = withDrift({ annotations: kept.annotations!, conditions: kept.conditions }, [], LATER);
    expect(findCondition(gone.conditions, "Drifted")).toMatchObject({ status: "False", reason: "NoDrift" });
  });

  it("a correction is recorded as put back, newest first, and the list is bounded", async () => {
    let status: { annotations?: Record<string, string>; conditions: never[] } = { conditions: [] };
    for (let i = 0; i < 7; i++) {
      const out = withDrift(status, await record(`v${i}`, "corrected", `2026-11-28T11:0${i}:00Z`), NOW);
      expect(out.fresh).toHaveLength(1);
      expect(findCondition(out.conditions, "Drifted")).toMatchObject({
        status: "False",
        reason: "DriftCorrected",
      });
      status = { annotations: out.annotations!, conditions: out.conditions as never[] };
    }
    const stored = parseDriftRecords(status.annotations![DRIFT_STATUS_ANNOTATION]);
    expect(stored.map((r) => r.fields[0]!.have)).toEqual(['"v6"', '"v5"', '"v4"', '"v3"', '"v2"']);
  });

  it("an object deleted again and put back again is a new record each time (a delete leaves no time to tell them apart)", async () => {
    const deleted = await driftRecords(cr, [describeDrift(wanted, undefined, "knative-fleet")], "corrected");
    const first = withDrift({ conditions: [] }, deleted, NOW);
    const again = withDrift(
      { annotations: first.annotations!, conditions: first.conditions },
      deleted,
      LATER,
    );
    expect(first.fresh).toHaveLength(1);
    expect(again.fresh).toHaveLength(1);
    // Its Event and count, each time; the status keeps one record of it (the two say the same).
    expect(parseDriftRecords(again.annotations![DRIFT_STATUS_ANNOTATION])).toHaveLength(1);
  });

  it("an annotation that is not ours to read counts as no record", () => {
    expect(parseDriftRecords("{not json")).toEqual([]);
    expect(parseDriftRecords('[{"object": 1}]')).toEqual([]);
  });
});
