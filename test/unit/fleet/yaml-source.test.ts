import { describe, expect, it } from "vitest";
import { z } from "zod";
import { formatDiagnostic, formatFieldPath } from "../../../src/fleet/diagnostic.ts";
import { validateAgainstSchema } from "../../../src/fleet/schema-diagnostics.ts";
import { locateField, parseYamlFile } from "../../../src/fleet/yaml-source.ts";
import { parseManifests } from "../../../src/render/index.ts";

// A small stand-in schema: the generic parts (positions, issue mapping) do not depend on Knative's.
const Widget = z.strictObject({
  kind: z.literal("Widget"),
  metadata: z.strictObject({ name: z.string() }),
  spec: z
    .strictObject({
      registry: z.strictObject({ override: z.record(z.string(), z.string()) }).partial(),
      replicas: z.number().int(),
      config: z.record(z.string(), z.record(z.string(), z.string())),
    })
    .partial(),
});

function validate(text: string, path = "clusters/a/widget.yaml") {
  const parsed = parseYamlFile(path, text);
  expect(parsed.diagnostics).toEqual([]);
  const [document] = parsed.documents;
  const result = validateAgainstSchema(path, document!, document!.value, Widget);
  return result.success ? [] : result.diagnostics.map(formatDiagnostic);
}

describe("parseYamlFile", () => {
  it("reads YAML 1.1 scalars as Kubernetes does: yes/on are booleans, 0755 octal, times and dates strings", () => {
    const { documents } = parseYamlFile(
      "f.yaml",
      "a: yes\nb: on\nc: Off\nd: 0755\ne: 10:30\nf: 2024-01-01\ng: 1_000\non: x\n",
    );
    expect(documents[0]!.value).toEqual({
      a: true,
      b: true,
      c: false,
      d: 493,
      e: "10:30",
      f: "2024-01-01",
      g: 1000,
      true: "x",
    });
  });

  it("reads !!binary as go-yaml v2 does, into a string of the bytes, so a manifest holding one still parses", () => {
    const { documents, diagnostics } = parseYamlFile(
      "f.yaml",
      "a: !!binary aGk=\nb: !!binary |\n  aGVs\n  bG8=\n",
    );
    expect(diagnostics).toEqual([]);
    expect(documents[0]!.value).toEqual({ a: "hi", b: "hello" });
    const [secret] = parseManifests(
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  key: !!binary aGk=\n",
      "s.yaml",
    );
    expect(secret!.data).toEqual({ key: "hi" });
  });

  it("splits multi-document files, skips empty documents and counts indexes over all of them", () => {
    const text = "---\na: 1\n---\n# only a comment\n---\n\n---\nb: 2\n...\n";
    const { documents, diagnostics } = parseYamlFile("f.yaml", text);
    expect(diagnostics).toEqual([]);
    expect(documents.map((d) => [d.index, d.position.line, d.value])).toEqual([
      [0, 2, { a: 1 }],
      [3, 8, { b: 2 }],
    ]);
  });

  it("reports a syntax error with line and column, and keeps the file's other documents", () => {
    const text = "a: 1\n---\nspec:\n  list: [1, 2\nnext: 3\n---\nc: 3\n";
    const { documents, diagnostics } = parseYamlFile("clusters/x.yaml", text);
    expect(diagnostics.length).toBeGreaterThan(0);
    expect(diagnostics[0]).toMatchObject({ path: "clusters/x.yaml", line: 5, column: 1, field: "" });
    expect(formatDiagnostic(diagnostics[0]!)).toMatch(/^clusters\/x\.yaml:5:1: flow sequence/);
    expect(documents.map((d) => [d.index, d.wellFormed])).toEqual([
      [0, true],
      [1, false],
      [2, true],
    ]);
  });

  it("rejects duplicate keys at the second key, naming the field and the first occurrence", () => {
    const text = "metadata:\n  name: a\n  labels: {}\n  name: b\n";
    const { diagnostics } = parseYamlFile("f.yaml", text);
    expect(diagnostics.map(formatDiagnostic)).toEqual([
      "f.yaml:4:3 metadata.name: duplicate key (first at line 2)",
    ]);
  });

  it("refuses an alias bomb instead of expanding it", () => {
    const text = `a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
`;
    const { documents, diagnostics } = parseYamlFile("f.yaml", text);
    expect(diagnostics.map(formatDiagnostic)).toEqual([
      "f.yaml:1:1: excessive alias count indicates a resource exhaustion attack",
    ]);
    expect(documents[0]!.wellFormed).toBe(false);
  });

  it("locates fields inherited through a merge key at their anchor", () => {
    const text = "base: &base\n  name: a\nitem:\n  <<: *base\n  other: 1\n";
    const [document] = parseYamlFile("f.yaml", text).documents;
    expect(document!.value).toEqual({ base: { name: "a" }, item: { name: "a", other: 1 } });
    expect(locateField(document!, ["item", "name"], "value")).toEqual({ line: 2, column: 9 });
  });
});

describe("validateAgainstSchema", () => {
  it("points a misspelt key at the key itself", () => {
    const text = "kind: Widget\nmetadata:\n  name: w\nspec:\n  registry:\n    overide:\n      a: b\n";
    expect(validate(text)).toEqual([
      "clusters/a/widget.yaml:6:5 spec.registry.overide: unrecognized key; did you mean override?",
    ]);
  });

  it("points a wrong type at the value", () => {
    const text = "kind: Widget\nmetadata:\n  name: w\nspec:\n  replicas: two\n";
    expect(validate(text)).toEqual([
      "clusters/a/widget.yaml:5:13 spec.replicas: expected number, got string",
    ]);
  });

  it("explains a YAML 1.1 boolean where a string is expected", () => {
    const text =
      "kind: Widget\nmetadata:\n  name: w\nspec:\n  config:\n    features:\n      tag-header: on\n";
    expect(validate(text)).toEqual([
      'clusters/a/widget.yaml:7:19 spec.config.features.tag-header: expected string, got boolean: YAML 1.1 reads the unquoted on as a boolean; quote it ("on")',
    ]);
  });

  it("points a missing required field at its parent's key", () => {
    const text = "kind: Widget\nspec: {}\nmetadata:\n  labels: {}\n";
    expect(validate(text)).toEqual([
      "clusters/a/widget.yaml:3:1 metadata.name: required field is missing",
      "clusters/a/widget.yaml:4:3 metadata.labels: unrecognized key",
    ]);
  });

  it("brackets field names that are not plain identifiers", () => {
    expect(formatFieldPath(["metadata", "annotations", "fleet.knative.dev/prune"])).toBe(
      'metadata.annotations["fleet.knative.dev/prune"]',
    );
    expect(formatFieldPath(["spec", "registry", "imagePullSecrets", 0, "name"])).toBe(
      "spec.registry.imagePullSecrets[0].name",
    );
  });
});
