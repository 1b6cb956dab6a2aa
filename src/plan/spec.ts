import type { KnativeResource } from "../api/knative.ts";
import { isRecord } from "../kube/object.ts";
import { isSensitive, MASKED } from "./mask.ts";

// What a reviewer reads of a CR the merge creates: not the hundred objects its release installs (listed by
// name) but what the CR itself asks of them, the fields that change how Knative runs on the cluster.

/** The spec fields a created CR shows, in this order; a field the CR leaves out is the release's default. */
const REVIEWED_FIELDS = [
  "version",
  "high-availability",
  "workloads",
  "deployments",
  "resources",
  "podDisruptionBudgets",
  "config",
] as const;

/** The fields of REVIEWED_FIELDS a CR sets, credential-like values masked; empty when it sets none. */
export function reviewedSpec(resource: KnativeResource): Record<string, unknown> {
  const spec = resource.spec as Record<string, unknown>;
  const picked = REVIEWED_FIELDS.filter((field) => spec[field] !== undefined).map(
    (field) => [field, masked(resource.kind, ["spec", field], spec[field])] as const,
  );
  return Object.fromEntries(picked);
}

/** Names of the reviewed fields, for saying which ones a CR leaves to the release. */
export const REVIEWED_FIELD_NAMES: readonly string[] = REVIEWED_FIELDS;

function masked(kind: string, path: readonly PropertyKey[], value: unknown): unknown {
  if (Array.isArray(value)) {
    // A list element matched by name counts as its name (env[name=DB_PASSWORD].value).
    return value.map((item, index) =>
      masked(kind, [...path, isRecord(item) && typeof item.name === "string" ? item.name : index], item),
    );
  }
  if (isRecord(value)) {
    return Object.fromEntries(
      Object.entries(value).map(([key, v]) => [key, masked(kind, [...path, key], v)]),
    );
  }
  return isSensitive(kind, path, value) ? MASKED : value;
}
