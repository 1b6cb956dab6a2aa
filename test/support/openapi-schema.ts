import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import type { SchemaNode } from "../../src/api/crd.ts";

// Helpers over CRD openAPIV3Schema trees, shared by the API tests that hold our schemas against the upstream
// CRDs in ../shared.

interface CustomResourceDefinition {
  spec: {
    names: object;
    scope: string;
    versions: {
      name: string;
      additionalPrinterColumns?: object[];
      schema: { openAPIV3Schema: SchemaNode };
    }[];
  };
}

/** The CustomResourceDefinition in the YAML file at `path`. */
export function readCrd(path: string): CustomResourceDefinition {
  const crd = parseAllDocuments(readFileSync(path, "utf8"))
    .map((document) => document.toJS())
    .find((object) => object?.kind === "CustomResourceDefinition");
  if (!crd) throw new Error(`${path} holds no CustomResourceDefinition`);
  return crd;
}

/** The openAPIV3Schema of `version` in the CRD file at `path`. */
export function readCrdSchema(path: string, version: string): SchemaNode {
  const served = readCrd(path).spec.versions.find((candidate) => candidate.name === version);
  if (!served) throw new Error(`${path} does not serve ${version}`);
  return served.schema.openAPIV3Schema;
}

const properties = (node: SchemaNode) => (node.properties ?? {}) as Record<string, SchemaNode>;
const isOpen = (node: SchemaNode) => node["x-kubernetes-preserve-unknown-fields"] === true;
const isIntOrString = (node: SchemaNode) => node["x-kubernetes-int-or-string"] === true;

/**
 * What keeps `ours` from accepting everything `upstream` accepts, one line per problem: a property path
 * upstream has and ours lacks (so the API server would prune it), a different type, a field only ours
 * requires, or enum values ours lacks. Paths use `[]` for list items and `{}` for map values.
 */
export function compatibilityProblems(upstream: SchemaNode, ours: SchemaNode, path = ""): string[] {
  if (isOpen(ours)) return [];
  const at = path || ".";
  const problems: string[] = [];
  if (isIntOrString(upstream) !== isIntOrString(ours)) {
    problems.push(`${at}: int-or-string is ${isIntOrString(ours)} here, ${isIntOrString(upstream)} upstream`);
  } else if (upstream.type !== ours.type) {
    problems.push(`${at}: type ${String(ours.type)} where upstream has ${String(upstream.type)}`);
  }
  const upstreamRequired = new Set((upstream.required ?? []) as string[]);
  for (const name of (ours.required ?? []) as string[]) {
    if (!upstreamRequired.has(name)) problems.push(`${path}.${name}: required here, optional upstream`);
  }
  if (ours.enum) {
    const allowed = new Set(ours.enum as unknown[]);
    const missing = ((upstream.enum ?? ["any value"]) as unknown[]).filter((value) => !allowed.has(value));
    if (missing.length > 0) problems.push(`${at}: enum lacks ${missing.join(", ")}`);
  }
  for (const [name, child] of Object.entries(properties(upstream))) {
    const ourChild = properties(ours)[name];
    if (ourChild) problems.push(...compatibilityProblems(child, ourChild, `${path}.${name}`));
    else problems.push(`${path}.${name}: missing`);
  }
  for (const [keyword, suffix] of [
    ["items", "[]"],
    ["additionalProperties", "{}"],
  ] as const) {
    const child = upstream[keyword] as SchemaNode | undefined;
    if (!child || typeof child !== "object") continue;
    const ourChild = ours[keyword] as SchemaNode | undefined;
    if (ourChild) problems.push(...compatibilityProblems(child, ourChild, `${path}${suffix}`));
    else problems.push(`${path}${suffix}: missing`);
  }
  return problems;
}

/**
 * An object that fills in every property the schema declares, with a valid value for each: one map entry,
 * one list item, the first enum value. `overrides` pins values by path where a test narrows on purpose.
 */
export function sampleInstance(
  node: SchemaNode,
  overrides: Record<string, unknown> = {},
  path = "",
): unknown {
  if (path in overrides) return overrides[path];
  if (isIntOrString(node)) return "1";
  if (node.enum) return (node.enum as unknown[])[0];
  switch (node.type) {
    case "object": {
      if (node.properties) {
        return Object.fromEntries(
          Object.entries(properties(node)).map(([name, child]) => [
            name,
            sampleInstance(child, overrides, `${path}.${name}`),
          ]),
        );
      }
      const values = node.additionalProperties as SchemaNode | undefined;
      return values ? { sample: sampleInstance(values, overrides, `${path}{}`) } : {};
    }
    case "array":
      return [sampleInstance(node.items as SchemaNode, overrides, `${path}[]`)];
    case "integer":
      return 1;
    case "boolean":
      return true;
    case "string":
      if (node.format === "date-time") return "2025-01-01T00:00:00Z";
      if (node.format === "byte") return Buffer.from("sample").toString("base64");
      return "sample";
    default:
      throw new Error(`${path || "."}: no sample for schema type ${String(node.type)}`);
  }
}

/** Every node of a schema tree with its path, the root first. */
export function* schemaNodes(node: SchemaNode, path = ""): Generator<[string, SchemaNode]> {
  yield [path || ".", node];
  for (const [name, child] of Object.entries(properties(node))) yield* schemaNodes(child, `${path}.${name}`);
  if (node.items) yield* schemaNodes(node.items as SchemaNode, `${path}[]`);
  if (node.additionalProperties && typeof node.additionalProperties === "object") {
    yield* schemaNodes(node.additionalProperties as SchemaNode, `${path}{}`);
  }
}
