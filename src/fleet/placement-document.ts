import { isRecord } from "../kube/object.ts";
import type { Diagnostic, FieldPath } from "./diagnostic.ts";
import { formatFieldPath } from "./diagnostic.ts";
import { mergePatch } from "./merge-patch.ts";
import {
  isPlacementKind,
  PLACEMENT_API_VERSION,
  type PlacementDocument,
  PlacementDocumentSchema,
  TEMPLATE_SPEC_SCHEMAS,
} from "./placement-schema.ts";
import { safeParsePlainKeys, schemaProblems, validateAgainstSchema } from "./schema-diagnostics.ts";
import { withDefaultNamespace, withoutNullFields } from "./values.ts";
import { locateField, plainScalarSourceAt, type SourceDocument } from "./yaml-source.ts";

/** A valid placement document of a fleet file, with where it was written. */
export interface DeclaredPlacement {
  placement: PlacementDocument;
  /** The fleet file, relative to the repository root. */
  path: string;
  documentIndex: number;
  /** The document's syntax tree, to place what is found later (conflicts, merged specs) at file:line. */
  source: Pick<SourceDocument, "ast" | "lineCounter">;
}

/** Whether a decoded document is meant as a placement (so the fleet parser hands it over). */
export function isPlacementDocument(value: unknown): boolean {
  if (!isRecord(value)) return false;
  return value.apiVersion === PLACEMENT_API_VERSION || isPlacementKind(value.kind);
}

/**
 * Validates one placement document with the same schemas and diagnostics as a fleet file's CR: the
 * template's spec is a KnativeServing/KnativeEventing spec; each override is checked merged into the
 * template, the spec a cluster that only it matches gets, so a patch that breaks the spec is reported at
 * the patch's line offline. (Expansion checks the combinations the inventory makes the same way.)
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
  const declared: DeclaredPlacement = {
    placement: result.data,
    path,
    documentIndex: document.index,
    source: document,
  };
  const diagnostics = (result.data.spec.overrides ?? []).flatMap((_, index) =>
    mergedSpec(declared, [index]).problems.map((problem) =>
      at(
        problem.field,
        problem.inTemplate ? `${problem.message} (after override ${index})` : problem.message,
        problem.anchor,
      ),
    ),
  );
  return diagnostics.length > 0 ? { diagnostics } : { placement: declared, diagnostics };
}

export interface MergedSpec {
  /** The template's spec with the overrides applied (clusterProfileRef not included). */
  spec: Record<string, unknown>;
  /** What is wrong with it, each at the field of the document that wrote the value (see `sourceField`). */
  problems: { field: FieldPath; anchor: "key" | "value"; message: string; inTemplate: boolean }[];
}

/**
 * The spec a cluster gets: the overrides at `indexes` applied one after the other onto the template, each
 * an RFC 7386 merge patch (a null deletes, even a field the template set), validated with the CR's spec
 * schema. The one computation of a placement's spec: the offline check, expansion and plan all use it.
 */
export function mergedSpec(declared: DeclaredPlacement, indexes: readonly number[]): MergedSpec {
  const { placement, source } = declared;
  const patches = indexes.map((index) => ({ index, patch: placement.spec.overrides![index]!.patch }));
  const spec = patches.reduce<unknown>(
    (merged, { patch }) => mergePatch(merged, patch),
    placement.spec.template.spec,
  ) as Record<string, unknown>;
  const parsed = safeParsePlainKeys(TEMPLATE_SPEC_SCHEMAS[placement.kind], spec);
  if (parsed.success) return { spec, problems: [] };
  const fieldOf = (specPath: FieldPath) => sourceField(patches, spec, specPath);
  const problems = parsed.issues.flatMap((issue) =>
    schemaProblems(issue, spec, (specPath) => plainScalarSourceAt(source, fieldOf(specPath))).map(
      (problem) => {
        const field = fieldOf(problem.field);
        return { ...problem, field, inTemplate: field[1] === "template" };
      },
    ),
  );
  return { spec, problems };
}

/**
 * Where in the document a merged spec's field was written: the last source (the template, then each patch
 * in the order applied) that set it, or replaced or deleted a part of the spec it is in. A field that is
 * missing is placed where the object that lacks it was written.
 */
function sourceField(
  patches: readonly { index: number; patch: unknown }[],
  spec: unknown,
  specPath: FieldPath,
): FieldPath {
  const target = specPath.length > 0 && !hasPath(spec, specPath) ? specPath.slice(0, -1) : specPath;
  let field: FieldPath = ["spec", "template", "spec", ...specPath];
  for (const { index, patch } of patches) {
    if (determines(patch, target)) field = ["spec", "overrides", index, "patch", ...specPath];
  }
  return field;
}

/** Whether a merge patch sets the value at `path`, or replaces or deletes a part of the spec holding it. */
function determines(patch: unknown, path: FieldPath): boolean {
  let current = patch;
  for (const [depth, segment] of path.entries()) {
    if (typeof current !== "object" || current === null || !Object.hasOwn(current, segment)) return false;
    current = (current as Record<PropertyKey, unknown>)[segment];
    const replaces = typeof current !== "object" || current === null || Array.isArray(current);
    if (depth < path.length - 1 && replaces) return true;
  }
  return true;
}

/** Whether `value` has a property at every step of `path` (null and undefined values included). */
export function hasPath(value: unknown, path: FieldPath): boolean {
  let current = value;
  for (const segment of path) {
    if (typeof current !== "object" || current === null || !Object.hasOwn(current, segment)) return false;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return true;
}

/**
 * The template's nulls are dropped as the API server drops them; a patch's nulls are deletions. Anything
 * but a list under `overrides` is left for the schema to refuse: dropped here, no override would apply.
 */
function prepare(value: unknown, defaultNamespace: string): unknown {
  if (!isRecord(value)) return value;
  const { spec, ...rest } = value;
  if (!isRecord(spec) || !Array.isArray(spec.overrides)) {
    return withDefaultNamespace(withoutNullFields(value), defaultNamespace);
  }
  const { overrides, ...specRest } = spec;
  const cleaned = withDefaultNamespace(withoutNullFields({ ...rest, spec: specRest }), defaultNamespace) as {
    spec: Record<string, unknown>;
  };
  return { ...cleaned, spec: { ...cleaned.spec, overrides: overrides.map(overrideWithoutNulls) } };
}

/** An override's own fields lose their nulls; its patch keeps them. */
function overrideWithoutNulls(override: unknown): unknown {
  if (!isRecord(override)) return override;
  const { patch, ...rest } = override;
  const cleaned = withoutNullFields(rest) as Record<string, unknown>;
  return patch === undefined ? cleaned : { ...cleaned, patch };
}
