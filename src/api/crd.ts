import { stringify } from "yaml";
import { z } from "zod";
import {
  KNATIVE_KINDS,
  KnativeEventingSpecSchema,
  type KnativeKind,
  KnativeServingSpecSchema,
  KnativeStatusSchema,
  OPERATOR_GROUP,
  OPERATOR_VERSION,
} from "./knative.ts";

// The CustomResourceDefinitions for KnativeServing and KnativeEventing, generated from the zod schemas so the
// API server and `knative-fleet validate` accept the same objects. Pure: scripts/generate-crds.ts writes the
// files, test/unit/api checks that the checked-in copies are current.

/** Where the chart keeps the generated CRDs, relative to the repository root. */
export const CRD_DIRECTORY = "charts/knative-fleet/crds";

/** A node of an openAPIV3Schema (apiextensions.k8s.io/v1 JSONSchemaProps). */
export type SchemaNode = { [keyword: string]: unknown };

interface GeneratedFile {
  fileName: string;
  content: string;
}

const KINDS: Record<KnativeKind, { component: string; spec: z.ZodType }> = {
  KnativeServing: { component: "Knative Serving", spec: KnativeServingSpecSchema },
  KnativeEventing: { component: "Knative Eventing", spec: KnativeEventingSpecSchema },
};

const READY = '.status.conditions[?(@.type=="Ready")]';

// The upstream CRD shows only Target Cluster; declaring columns drops kubectl's default Age, so it comes back.
const PRINTER_COLUMNS = [
  { name: "Target Cluster", type: "string", jsonPath: ".spec.clusterProfileRef.name" },
  { name: "Version", type: "string", jsonPath: ".status.version" },
  { name: "Ready", type: "string", jsonPath: `${READY}.status` },
  { name: "Reason", type: "string", jsonPath: `${READY}.reason` },
  { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
];

export function crdFileName(kind: KnativeKind): string {
  return `${OPERATOR_GROUP}_${plural(kind)}.yaml`;
}

export function knativeCrd(kind: KnativeKind) {
  const { component, spec } = KINDS[kind];
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural(kind)}.${OPERATOR_GROUP}` },
    spec: {
      group: OPERATOR_GROUP,
      names: { kind, listKind: `${kind}List`, plural: plural(kind), singular: kind.toLowerCase() },
      scope: "Namespaced",
      versions: [
        {
          name: OPERATOR_VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: PRINTER_COLUMNS,
          schema: {
            openAPIV3Schema: {
              description: `${kind} installs ${component} on the hub or on the cluster spec.clusterProfileRef names.`,
              properties: {
                apiVersion: { type: "string" },
                kind: { type: "string" },
                metadata: { type: "object" },
                spec: toStructuralSchema(spec),
                status: toStructuralSchema(KnativeStatusSchema),
              },
              type: "object",
            },
          },
        },
      ],
    },
  };
}

export function renderKnativeCrds(): GeneratedFile[] {
  return KNATIVE_KINDS.map((kind) => ({
    fileName: crdFileName(kind),
    content:
      "# Generated from src/api/knative.ts by `npm run generate:crds`. Do not edit.\n" +
      stringify(knativeCrd(kind), { lineWidth: 0 }),
  }));
}

/**
 * A zod schema as a Kubernetes structural schema: no $ref, no additionalProperties:false (pruning does that),
 * open objects marked x-kubernetes-preserve-unknown-fields, int-or-string in the one form the API server
 * allows, integer widths as `format`, everything sorted so the output is stable and diffs well.
 */
export function toStructuralSchema(schema: z.ZodType): SchemaNode {
  return structural(z.toJSONSchema(schema, { io: "input" }), "");
}

const INT32 = { format: "int32", minimum: -(2 ** 31), maximum: 2 ** 31 - 1 };
const INT64 = { format: "int64", minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };

// Keywords copied as they are; anything else zod emits has no structural-schema equivalent here and fails loudly
// rather than producing a CRD the API server rejects.
const PLAIN_KEYWORDS = new Set(["type", "description", "enum", "pattern", "minLength", "maxLength"]);
// The dialect marker; map keys (always strings in Kubernetes); integer bounds, which become `format`.
const IGNORED_KEYWORDS = new Set(["$schema", "propertyNames", "minimum", "maximum"]);

function structural(node: SchemaNode, path: string): SchemaNode {
  const result: SchemaNode = {};
  for (const [keyword, value] of Object.entries(node)) {
    if (keyword === "type" && typeof value !== "string") {
      throw new Error(`${path || "."} has several types (${String(value)}); a CRD field has one`);
    } else if (PLAIN_KEYWORDS.has(keyword) || keyword.startsWith("x-kubernetes-")) {
      result[keyword] = value;
    } else if (keyword === "properties") {
      const properties = value as Record<string, SchemaNode>;
      result.properties = Object.fromEntries(
        Object.keys(properties)
          .sort()
          .map((name) => [name, structural(properties[name]!, `${path}.${name}`)]),
      );
    } else if (keyword === "required") {
      result.required = [...(value as string[])].sort();
    } else if (keyword === "items") {
      result.items = structural(value as SchemaNode, `${path}[]`);
    } else if (keyword === "additionalProperties") {
      // false is a strict object, which pruning already enforces; {} is an open map or object.
      if (value === false) continue;
      const values = value as SchemaNode;
      if (Object.keys(values).length === 0) result["x-kubernetes-preserve-unknown-fields"] = true;
      else result.additionalProperties = structural(values, `${path}{}`);
    } else if (keyword === "anyOf" && node["x-kubernetes-int-or-string"] === true) {
      result.anyOf = [{ type: "integer" }, { type: "string" }];
    } else if (!IGNORED_KEYWORDS.has(keyword)) {
      throw new Error(
        `JSON Schema keyword "${keyword}" at ${path || "."} has no CRD equivalent in this generator`,
      );
    }
  }
  if (node.type === "integer") Object.assign(result, integerFormat(node));
  // Keywords in alphabetical order, as controller-gen writes them.
  return Object.fromEntries(Object.entries(result).sort(([a], [b]) => (a < b ? -1 : 1)));
}

function integerFormat(node: SchemaNode): SchemaNode {
  const width = node.maximum !== undefined && (node.maximum as number) <= INT32.maximum ? INT32 : INT64;
  const bounds: SchemaNode = { format: width.format };
  if (node.minimum !== undefined && node.minimum !== width.minimum) bounds.minimum = node.minimum;
  if (node.maximum !== undefined && node.maximum !== width.maximum) bounds.maximum = node.maximum;
  return bounds;
}

function plural(kind: KnativeKind): string {
  return `${kind.toLowerCase()}s`;
}
