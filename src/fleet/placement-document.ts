import {
  type Diagnostic,
  type FieldPath,
  formatFieldPath,
  lowercaseFirst,
  type SourcePosition,
} from "./diagnostic.ts";
import { mergePatch } from "./merge-patch.ts";
import { isRecord, withDefaultNamespace, withoutNullFields } from "./parse.ts";
import {
  isPlacementKind,
  PLACEMENT_API_VERSION,
  type PlacementDocument,
  PlacementDocumentSchema,
  TEMPLATE_SPEC_SCHEMAS,
} from "./placement-schema.ts";
import { validateAgainstSchema } from "./schema-diagnostics.ts";
import { locateField, type SourceDocument } from "./yaml-source.ts";

/** A valid placement document of a fleet file, with where it was written. */
export interface DeclaredPlacement {
  placement: PlacementDocument;
  /** The fleet file, relative to the repository root. */
  path: string;
  documentIndex: number;
  /** Where a field of the document is, for diagnostics found later (conflicts, merged specs). */
  locate(field: FieldPath): SourcePosition;
}

/** Whether a decoded document is meant as a placement (so the fleet parser hands it over). */
export function isPlacementDocument(value: unknown): boolean {
  if (!isRecord(value)) return false;
  return value.apiVersion === PLACEMENT_API_VERSION || isPlacementKind(value.kind);
}

/**
 * Validates one placement document with the same schemas and diagnostics as a fleet file's CR: the
 * template's spec is a KnativeServing/KnativeEventing spec; each override is checked by merging it into
 * the template on its own, so a patch that breaks the spec is reported at the patch's line offline.
 */
export function parsePlacementDocument(
  path: string,
  document: SourceDocument,
  defaultNamespace: string,
): { placement?: DeclaredPlacement; diagnostics: Diagnostic[] } {
  const at = (field: FieldPath, message: string, anchor: "key" | "value" = "key"): Diagnostic => ({
    path,
    ...locateField(document, field, anchor),
    field: formatFieldPath(field),
    message,
  });
  const value = prepare(document.value, defaultNamespace);
  if (isRecord(value) && !isPlacementKind(value.kind)) {
    return {
      diagnostics: [
        at(
          ["kind"],
          `${JSON.stringify(value.kind)} is not a placement kind; ${PLACEMENT_API_VERSION} holds KnativeServingPlacement or KnativeEventingPlacement`,
          "value",
        ),
      ],
    };
  }
  const templateSpec = (value as { spec?: { template?: { spec?: unknown } } }).spec?.template?.spec;
  if (isRecord(templateSpec) && templateSpec.clusterProfileRef !== undefined) {
    return {
      diagnostics: [
        at(
          ["spec", "template", "spec", "clusterProfileRef"],
          "a placement's template names no cluster: the placement selects them (clusterSelectorTerms, clusterProfiles, placementDecisionRef)",
        ),
      ],
    };
  }
  const result = validateAgainstSchema(path, document, value, PlacementDocumentSchema);
  if (!result.success) return { diagnostics: result.diagnostics };
  const placement = result.data;
  const declared: DeclaredPlacement = {
    placement,
    path,
    documentIndex: document.index,
    locate: (field) => locateField(document, field, "key"),
  };
  const diagnostics = (placement.spec.overrides ?? []).flatMap((override, index) =>
    mergedSpecDiagnostics(declared, override.patch, index).map((problem) =>
      at(problem.field, problem.message, "value"),
    ),
  );
  return diagnostics.length > 0 ? { diagnostics } : { placement: declared, diagnostics };
}

/**
 * Validates the template merged with a patch; each problem is placed in the patch when the patch wrote
 * that field, else in the template.
 */
export function mergedSpecDiagnostics(
  declared: DeclaredPlacement,
  patch: unknown,
  overrideIndex: number,
): { field: FieldPath; message: string }[] {
  const { placement } = declared;
  const merged = mergePatch(placement.spec.template.spec, patch);
  const parsed = TEMPLATE_SPEC_SCHEMAS[placement.kind].safeParse(merged);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => {
    const issuePath = issue.code === "unrecognized_keys" ? [...issue.path, issue.keys[0]!] : issue.path;
    const inPatch = hasPath(patch, issuePath);
    const field: FieldPath = inPatch
      ? ["spec", "overrides", overrideIndex, "patch", ...issuePath]
      : ["spec", "template", "spec", ...issuePath];
    const message = issue.code === "unrecognized_keys" ? "unrecognized key" : lowercaseFirst(issue.message);
    return { field, message: inPatch ? message : `${message} (after override ${overrideIndex})` };
  });
}

/** The template's nulls are dropped as the API server drops them; a patch's nulls are deletions. */
function prepare(value: unknown, defaultNamespace: string): unknown {
  if (!isRecord(value)) return value;
  const { spec, ...rest } = value;
  const { overrides, ...specRest } = isRecord(spec) ? spec : { overrides: undefined };
  const cleaned = withDefaultNamespace(
    withoutNullFields(isRecord(spec) ? { ...rest, spec: specRest } : value),
    defaultNamespace,
  ) as Record<string, unknown>;
  if (!Array.isArray(overrides)) return cleaned;
  return {
    ...cleaned,
    spec: { ...(cleaned.spec as object), overrides: overrides.map(overrideWithoutNulls) },
  };
}

/** An override's own fields lose their nulls; its patch keeps them. */
function overrideWithoutNulls(override: unknown): unknown {
  if (!isRecord(override)) return override;
  const { patch, ...rest } = override;
  const cleaned = withoutNullFields(rest) as Record<string, unknown>;
  return patch === undefined ? cleaned : { ...cleaned, patch };
}

function hasPath(value: unknown, path: readonly PropertyKey[]): boolean {
  let current = value;
  for (const segment of path) {
    if (typeof current !== "object" || current === null || !Object.hasOwn(current, segment)) return false;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return true;
}
