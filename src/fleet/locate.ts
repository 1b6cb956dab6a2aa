import type { FieldPath } from "./diagnostic.ts";
import { locateField, parseYamlFile } from "./yaml-source.ts";

// Where a CR field is in the fleet file a hub CR came from, for a person told to edit it there: the CR's own
// document in a per-cluster file, or the placement's template in a placement file. A field the file does not
// set points at the deepest part of its path that it does (`spec.config.autoscaler:` for a missing key).

/** `path:line` of `field` of the CR `kind`/`name` in the file's `text`; undefined when no document holds it. */
export function locateCrField(
  file: { path: string; text: string },
  cr: { kind: string; name: string },
  field: FieldPath,
): string | undefined {
  const { documents } = parseYamlFile(file.path, file.text);
  const documentValue = (d: (typeof documents)[number]) =>
    (d.value ?? {}) as { kind?: unknown; metadata?: { name?: unknown } };
  const own = documents.find(
    (d) => documentValue(d).kind === cr.kind && documentValue(d).metadata?.name === cr.name,
  );
  if (own) return `${file.path}:${locateField(own, field, "key").line}`;
  const placements = documents.filter((d) => documentValue(d).kind === `${cr.kind}Placement`);
  if (placements.length !== 1 || field[0] !== "spec") return undefined;
  const inTemplate = ["spec", "template", "spec", ...field.slice(1)];
  return `${file.path}:${locateField(placements[0]!, inTemplate, "key").line}`;
}
