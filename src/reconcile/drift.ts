import { ConditionType, DriftReason, findCondition, markDrifted } from "../api/conditions.ts";
import { DRIFT_LIMITS, type DriftRecord, parseDriftRecords, summary } from "../api/drift.ts";
import type { Condition, KnativeResource } from "../api/knative.ts";
import { DRIFT_STATUS_ANNOTATION, SOURCE_COMMIT_ANNOTATION, SOURCE_PATH_ANNOTATION } from "../api/labels.ts";
import type { DriftedObject } from "../apply/drift.ts";
import type { FieldPath } from "../fleet/diagnostic.ts";
import type { FleetFile } from "../fleet/file-text.ts";
import { locateCrField } from "../fleet/locate.ts";
import { driftOwner } from "../install/drift-owner.ts";

// A pass's drift as the hub CR's status says it: a record per changed object with the CR field (and fleet
// file line) to edit instead, the last DRIFT_LIMITS.records kept in status.annotations, and the Drifted
// condition. A record already there is not added again, so a drift kept in report mode writes nothing at rest.

/** Where a CR field is in its fleet file at a commit (`clusters/a/serving.yaml:14`); undefined when unknown. */
export type FieldLocator = (
  resource: KnativeResource,
  file: { path: string; commit: string },
  field: FieldPath,
) => Promise<string | undefined>;

/** The records of one pass's drifted objects. */
export async function driftRecords(
  resource: KnativeResource,
  drifted: readonly DriftedObject[],
  outcome: DriftRecord["outcome"],
  locate?: FieldLocator,
): Promise<DriftRecord[]> {
  const annotations = resource.metadata.annotations ?? {};
  const path = annotations[SOURCE_PATH_ANNOTATION];
  const commit = annotations[SOURCE_COMMIT_ANNOTATION];
  return Promise.all(
    drifted.map(async (object): Promise<DriftRecord> => {
      const { ref } = object;
      const fields = await Promise.all(
        object.fields.map(async ({ steps, ...field }) => {
          const owner = driftOwner(resource, ref, steps);
          if (!owner) return field;
          const at =
            path === undefined
              ? undefined
              : commit !== undefined && locate
                ? ((await locate(resource, { path, commit }, owner.path).catch(() => undefined)) ?? path)
                : path;
          return { ...field, owner: { field: owner.field, set: owner.set, ...(at && { at }) } };
        }),
      );
      return {
        object: `${ref.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`,
        change: object.change,
        fields,
        ...(object.omittedFields > 0 && { omittedFields: object.omittedFields }),
        ...(object.manager !== undefined && { manager: object.manager }),
        ...(object.operation !== undefined && { operation: object.operation }),
        ...(object.at !== undefined && { at: object.at }),
        // What an apply cannot take back (a key someone added) stays, whatever the mode.
        outcome: object.putBack ? outcome : "kept",
      };
    }),
  );
}

/** The same drift: object, fields and writer (a record's text may differ in the line alone). */
const sameDrift = (a: DriftRecord, b: DriftRecord) =>
  a.object === b.object &&
  a.change === b.change &&
  a.outcome === b.outcome &&
  a.manager === b.manager &&
  a.at === b.at &&
  JSON.stringify(a.fields.map((f) => [f.path, f.want, f.have])) ===
    JSON.stringify(b.fields.map((f) => [f.path, f.want, f.have]));

/**
 * The status with this pass's records: the new ones first, then the ones kept from before, at most
 * DRIFT_LIMITS.records; and Drifted as this pass leaves it. `fresh` are the records not seen before (an
 * Event each). A pass without drift leaves a CR that never drifted without the condition.
 */
export function withDrift(
  status: { annotations?: Record<string, string>; conditions: Condition[] },
  records: readonly DriftRecord[],
  now: Date,
): { annotations?: Record<string, string>; conditions: Condition[]; fresh: DriftRecord[] } {
  const before = parseDriftRecords(status.annotations?.[DRIFT_STATUS_ANNOTATION]);
  // A correction happened this pass, so it is news even when it looks like the last one (an object deleted
  // again: Kubernetes records no time of a delete); a kept drift is news only the first time it is seen.
  const fresh = records.filter((r) => r.outcome === "corrected" || !before.some((b) => sameDrift(b, r)));
  const condition = findCondition(status.conditions, ConditionType.Drifted);
  let conditions = status.conditions;
  const kept = records.filter((r) => r.outcome === "kept");
  if (kept.length > 0) {
    conditions = markDrifted(conditions, DriftReason.Kept, `kept: ${kept.map(summary).join("; ")}`, now);
  } else if (fresh.length > 0) {
    conditions = markDrifted(
      conditions,
      DriftReason.Corrected,
      `put back: ${fresh.map(summary).join("; ")}`,
      now,
    );
  } else if (condition?.status === "True") {
    conditions = markDrifted(conditions, DriftReason.Gone, "the cluster has what Git wants again", now);
  }
  if (fresh.length === 0) return { ...status, conditions, fresh };
  const stored = [...fresh, ...before.filter((b) => !fresh.some((f) => sameDrift(b, f)))].slice(
    0,
    DRIFT_LIMITS.records,
  );
  return {
    annotations: { ...(status.annotations ?? {}), [DRIFT_STATUS_ANNOTATION]: JSON.stringify(stored) },
    conditions,
    fresh,
  };
}

/** A locator over the fleet repository's files at a commit (the last commit's files kept for the next field). */
export function locatorOver(snapshotAt: (commit: string) => Promise<{ files: FleetFile[] }>): FieldLocator {
  let last: { commit: string; files: Promise<FleetFile[]> } | undefined;
  return async (resource, { path, commit }, field) => {
    if (last?.commit !== commit) last = { commit, files: snapshotAt(commit).then((s) => s.files) };
    const file = (await last.files).find((f) => f.path === path);
    return file && locateCrField(file, { kind: resource.kind, name: resource.metadata.name ?? "" }, field);
  };
}
