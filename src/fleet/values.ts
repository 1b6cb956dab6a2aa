import { isRecord } from "../kube/object.ts";

// How a fleet document's decoded value is read before its schema sees it, the same for every kind.

/**
 * The API server drops null fields of a CR before validating it (`registry:` with everything below
 * commented out), so they count as absent here too.
 */
export function withoutNullFields(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNullFields);
  if (!isRecord(value)) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, field]) => field !== null)
      .map(([key, field]) => [key, withoutNullFields(field)]),
  );
}

export function withDefaultNamespace(value: unknown, defaultNamespace: string): unknown {
  if (!isRecord(value) || !isRecord(value.metadata) || value.metadata.namespace !== undefined) return value;
  return { ...value, metadata: { ...value.metadata, namespace: defaultNamespace } };
}
