import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  CRD_DIRECTORY,
  crdFileName,
  knativeCrd,
  renderKnativeCrds,
  type SchemaNode,
  toStructuralSchema,
} from "../../../src/api/crd.ts";
import { KNATIVE_KINDS, type KnativeKind, OPERATOR_VERSION } from "../../../src/api/knative.ts";
import { compatibilityProblems, readCrd, readCrdSchema, schemaNodes } from "../../support/openapi-schema.ts";
import { repoRoot, upstreamOperatorCrdsDir } from "../../support/shared.ts";

const generatedSchema = (kind: KnativeKind): SchemaNode =>
  knativeCrd(kind).spec.versions[0]!.schema.openAPIV3Schema;
const upstreamSchema = (kind: KnativeKind) =>
  readCrdSchema(join(upstreamOperatorCrdsDir(), crdFileName(kind)), OPERATOR_VERSION);
const property = (node: SchemaNode, name: string) => (node.properties as Record<string, SchemaNode>)[name]!;

describe("the checked-in CRDs", () => {
  for (const { fileName, content } of renderKnativeCrds()) {
    it(`${fileName} is what the schemas generate`, () => {
      const path = join(repoRoot, CRD_DIRECTORY, fileName);
      const stale = `${CRD_DIRECTORY}/${fileName} is out of date with src/api: run \`npm run generate:crds\``;
      expect(existsSync(path), stale).toBe(true);
      expect(readFileSync(path, "utf8"), stale).toBe(content);
    });
  }
});

describe.each(KNATIVE_KINDS)("the generated %s CRD", (kind) => {
  it("accepts every field the upstream operator's CRD accepts", () => {
    const ours = generatedSchema(kind);
    const upstream = upstreamSchema(kind);
    expect(compatibilityProblems(property(upstream, "spec"), property(ours, "spec"), ".spec")).toEqual([]);
    // The one deliberate narrowing: knative.dev/pkg only ever writes these three condition statuses.
    expect(compatibilityProblems(property(upstream, "status"), property(ours, "status"), ".status")).toEqual([
      ".status.conditions[].status: enum lacks any value",
    ]);
  });

  it("keeps spec.clusterProfileRef immutable with upstream's CEL rules", () => {
    const rules = (node: SchemaNode) => property(node, "spec")["x-kubernetes-validations"];
    expect(rules(generatedSchema(kind))).toEqual(rules(upstreamSchema(kind)));
  });

  it("is a structural schema the API server accepts", () => {
    const problems = [...schemaNodes(generatedSchema(kind))].flatMap(([path, node]) => {
      const typed =
        typeof node.type === "string" ||
        node["x-kubernetes-int-or-string"] === true ||
        node["x-kubernetes-preserve-unknown-fields"] === true;
      return [
        ...Object.keys(node)
          .filter((keyword) =>
            ["$ref", "$defs", "definitions", "oneOf", "allOf", "not", "const"].includes(keyword),
          )
          .map((keyword) => `${path}: ${keyword}`),
        ...(node.additionalProperties === false ? [`${path}: additionalProperties: false`] : []),
        ...(node.anyOf && node["x-kubernetes-int-or-string"] !== true ? [`${path}: anyOf`] : []),
        ...(node.properties && node.additionalProperties
          ? [`${path}: properties and additionalProperties`]
          : []),
        ...(typed ? [] : [`${path}: no type`]),
      ];
    });
    expect(problems).toEqual([]);
  });

  it("names, scopes and prints the resource like upstream, plus status columns", () => {
    const crd = knativeCrd(kind);
    const upstream = readCrd(join(upstreamOperatorCrdsDir(), crdFileName(kind)));
    expect(crd.spec.names).toEqual(upstream.spec.names);
    expect(crd.spec.scope).toBe(upstream.spec.scope);
    expect(crd.spec.versions[0]!.additionalPrinterColumns).toEqual(
      expect.arrayContaining(upstream.spec.versions[0]!.additionalPrinterColumns!),
    );
    expect(crd.spec.versions[0]!.additionalPrinterColumns.map((column) => column.name)).toEqual([
      "Target Cluster",
      "Version",
      "Ready",
      "Reason",
      "Age",
    ]);
  });
});

describe("toStructuralSchema", () => {
  it("writes integer widths as formats and int-or-string in the form the API server allows", () => {
    const schema = toStructuralSchema(
      z.strictObject({
        replicas: z.int32(),
        seconds: z.int().optional(),
        port: z.int32().min(1),
        maxUnavailable: z.union([z.int(), z.string()]).meta({ "x-kubernetes-int-or-string": true }),
      }),
    );
    expect(schema).toEqual({
      type: "object",
      properties: {
        maxUnavailable: {
          anyOf: [{ type: "integer" }, { type: "string" }],
          "x-kubernetes-int-or-string": true,
        },
        port: { type: "integer", format: "int32", minimum: 1 },
        replicas: { type: "integer", format: "int32" },
        seconds: { type: "integer", format: "int64" },
      },
      required: ["maxUnavailable", "port", "replicas"],
    });
  });

  it("marks open objects and maps with x-kubernetes-preserve-unknown-fields", () => {
    const schema = toStructuralSchema(
      z.strictObject({ loose: z.looseObject({ name: z.string() }), raw: z.record(z.string(), z.unknown()) }),
    );
    expect(schema.properties).toEqual({
      loose: {
        type: "object",
        properties: { name: { type: "string" } },
        required: ["name"],
        "x-kubernetes-preserve-unknown-fields": true,
      },
      raw: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    });
  });

  it("refuses what a structural schema cannot say instead of writing a CRD the API server rejects", () => {
    expect(() => toStructuralSchema(z.strictObject({ either: z.union([z.string(), z.boolean()]) }))).toThrow(
      ".either has several types (string,boolean); a CRD field has one",
    );
    expect(() => toStructuralSchema(z.strictObject({ pair: z.tuple([z.string(), z.int()]) }))).toThrow(
      'JSON Schema keyword "prefixItems" at .pair has no CRD equivalent',
    );
  });
});
