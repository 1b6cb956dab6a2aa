import { isRecord } from "../kube/object.ts";
import type { Diagnostic, SourcePosition } from "./diagnostic.ts";
import { type RolloutDocument, RolloutDocumentSchema } from "./rollout-schema.ts";
import { validateAgainstSchema } from "./schema-diagnostics.ts";
import { withDefaultNamespace, withoutNullFields } from "./values.ts";
import type { SourceDocument } from "./yaml-source.ts";

/** The valid rollout policy of a fleet repository, with where it was written. */
export interface DeclaredRollout {
  rollout: RolloutDocument;
  /** The fleet file, relative to the repository root. */
  path: string;
  position: SourcePosition;
}

/** Validates one KnativeRollout document; every problem is a diagnostic at its file, line and field. */
export function parseRolloutDocument(
  path: string,
  document: SourceDocument,
  defaultNamespace: string,
): { rollout?: DeclaredRollout; diagnostics: Diagnostic[] } {
  const value = withDefaultNamespace(withoutNullFields(document.value), defaultNamespace);
  const result = validateAgainstSchema(path, document, isRecord(value) ? value : {}, RolloutDocumentSchema);
  if (!result.success) return { diagnostics: result.diagnostics };
  return { rollout: { rollout: result.data, path, position: document.position }, diagnostics: [] };
}
