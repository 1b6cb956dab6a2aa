import { z } from "zod";
import { count } from "../text/count.ts";

// What a hub CR's status says about drift on its cluster (status.annotations, DRIFT_STATUS_ANNOTATION): the
// last objects someone else changed, which fields, who, and which field of the CR to edit instead. Bounded,
// so a status stays small whatever happens on a spoke.

/** Records kept per CR, fields per record, characters per value. */
export const DRIFT_LIMITS = { records: 5, fields: 8, valueChars: 80 } as const;

export const DriftModeSchema = z.enum(["correct", "report"]);

const FieldChangeSchema = z.strictObject({
  /** The object's field, e.g. `data.enable-scale-to-zero` or `spec.template.spec.containers[name=controller].resources`. */
  path: z.string(),
  /** What the install applies and what the cluster has, as JSON text (absent: the field is not there). */
  want: z.string().optional(),
  have: z.string().optional(),
  /**
   * The CR field that sets it (`spec.config.autoscaler.enable-scale-to-zero`), whether the CR sets it now,
   * and where in the fleet file (`clusters/a/serving.yaml:14`) when that was known.
   */
  owner: z.strictObject({ field: z.string(), set: z.boolean(), at: z.string().optional() }).optional(),
});

const DriftRecordSchema = z.strictObject({
  /** `Kind namespace/name` (`Kind name` when cluster-scoped). */
  object: z.string(),
  change: z.enum(["changed", "deleted"]),
  fields: z.array(FieldChangeSchema),
  /** Fields left out by DRIFT_LIMITS.fields. */
  omittedFields: z.int().optional(),
  /** The field manager that made the change, as the cluster's managedFields name it, and when. */
  manager: z.string().optional(),
  operation: z.string().optional(),
  at: z.string().optional(),
  /** `corrected`: put back; `kept`: left in place (report mode). */
  outcome: z.enum(["corrected", "kept"]),
});
export type DriftRecord = z.infer<typeof DriftRecordSchema>;
export type FieldChange = z.infer<typeof FieldChangeSchema>;

const DriftRecordsSchema = z.array(DriftRecordSchema);

/** The records a status annotation holds; none when it is absent or not ours to read. */
export function parseDriftRecords(text: string | undefined): DriftRecord[] {
  if (text === undefined) return [];
  try {
    const parsed = DriftRecordsSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : [];
  } catch {
    return [];
  }
}

/** `ConfigMap knative-serving/config-autoscaler by kubectl-edit`. */
export const summary = (record: DriftRecord): string =>
  `${record.object} ${record.change === "deleted" ? "deleted" : "changed"}${record.manager ? ` by ${record.manager}` : ""}`;

/** One record for an Event or a log: what, who, which fields, and what to edit instead. */
export function describeRecord(record: DriftRecord): string {
  const head = `${record.outcome === "kept" ? "kept" : "put back"} ${summary(record)}${record.at ? ` at ${record.at}` : ""}`;
  const fields = record.fields.map((f) => {
    const change = `${f.path}: ${f.want ?? "(absent)"} -> ${f.have ?? "(absent)"}`;
    if (!f.owner) return `${change} (from the release manifests)`;
    const where = f.owner.at ? ` in ${f.owner.at}` : "";
    return `${change}; ${f.owner.set ? "edit" : "set"} ${f.owner.field}${where} instead`;
  });
  const omitted = record.omittedFields ? [count(record.omittedFields, "more field")] : [];
  return [head, ...fields, ...omitted].join("; ");
}
