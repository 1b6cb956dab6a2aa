import { z } from "zod";
import { decodeFleetFile, type FleetFile, fileProblem } from "../../../src/fleet/file-text.ts";
import {
  createFileFilter,
  DEFAULT_FILE_SELECTION,
  type EntryKind,
  entryAction,
} from "../../../src/fleet/select.ts";

// Generators of broken fleet files for the hostile-input corpora (mutation-corpus.test.ts): every one takes
// a good file and gives mutated copies of it, the same for a per-cluster file, a placement and a rollout
// policy. Seeded: the same seed gives the same files on every run.

export type FieldPath = (string | number)[];

/** One mutated file and the family of mutation that made it. */
export interface Mutation {
  family: string;
  file: FleetFile;
}

export const utf8 = (text: string) => new TextEncoder().encode(text);

/** Random choices from a seeded generator. */
export function chooser(next: () => number) {
  return {
    next,
    int: (below: number) => Math.floor(next() * below),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
  };
}
export type Chooser = ReturnType<typeof chooser>;

/** Every field path a schema knows, from its JSON schema: objects by key, arrays by index 0, maps by `x`. */
export function schemaPaths(schema: z.ZodType): FieldPath[] {
  const json = z.toJSONSchema(schema, { unrepresentable: "any" }) as JsonSchema;
  const paths: FieldPath[] = [];
  const walk = (node: JsonSchema, path: FieldPath, depth: number) => {
    if (depth > 8) return;
    for (const branch of [...(node.oneOf ?? []), ...(node.anyOf ?? []), ...(node.allOf ?? [])]) {
      walk(branch, path, depth + 1);
    }
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      paths.push([...path, key]);
      walk(child, [...path, key], depth + 1);
    }
    if (node.items && !Array.isArray(node.items)) walk(node.items, [...path, 0], depth + 1);
    if (typeof node.additionalProperties === "object")
      walk(node.additionalProperties, [...path, "x"], depth + 1);
  };
  walk(json, [], 0);
  return [...new Map(paths.map((path) => [JSON.stringify(path), path])).values()];
}
interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  oneOf?: JsonSchema[];
  anyOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

/** Sets `value` at `path`, making the objects and lists on the way. */
export function setAt(
  document: Record<string, unknown>,
  path: readonly (string | number)[],
  value: unknown,
): void {
  let node: Record<string | number, unknown> = document;
  path.forEach((segment, index) => {
    if (index === path.length - 1) {
      node[segment] = value;
      return;
    }
    const next = node[segment];
    if (typeof next !== "object" || next === null)
      node[segment] = typeof path[index + 1] === "number" ? [] : {};
    node = node[segment] as Record<string | number, unknown>;
  });
}

export const WRONG_VALUES: unknown[] = ["text", 42, true, null, [1, "two"], { bogus: { nested: 1 } }];

/** A wrong value at every path of `paths` in `document` (`perPath` of them), written as JSON. */
export function wrongTypes(
  path: string,
  document: unknown,
  paths: readonly FieldPath[],
  random: Chooser,
  perPath = 2,
): Mutation[] {
  return paths.flatMap((field) =>
    Array.from({ length: perPath }, () => {
      const copy = structuredClone(document) as Record<string, unknown>;
      setAt(copy, field, random.pick(WRONG_VALUES));
      return { family: "wrong types", file: { path, text: JSON.stringify(copy, null, 1) } };
    }),
  );
}

/** 1-4 random bytes replaced, decoded as the readers decode files. */
export function byteFlips(path: string, text: string, count: number, random: Chooser): Mutation[] {
  return Array.from({ length: count }, () => {
    const bytes = utf8(text);
    for (let flips = 1 + random.int(4); flips > 0; flips--) bytes[random.int(bytes.length)] = random.int(256);
    return { family: "byte flips", file: decodeFleetFile(path, bytes) };
  });
}

/** The file cut at a random byte. */
export function truncations(path: string, text: string, count: number, random: Chooser): Mutation[] {
  return Array.from({ length: count }, () => ({
    family: "truncation",
    file: decodeFleetFile(path, utf8(text).subarray(0, random.int(utf8(text).length))),
  }));
}

/** The file saved in encodings YAML readers do not take, or take differently. */
export function encodings(path: string, text: string): Mutation[] {
  const variants: Uint8Array[] = [
    new Uint8Array([0xff, 0xfe, ...Buffer.from(text, "utf16le")]),
    new Uint8Array([0xfe, 0xff, ...Buffer.from(text, "utf16le").swap16()]),
    new Uint8Array(Buffer.from(text, "utf16le")),
    new Uint8Array([0xef, 0xbb, 0xbf, ...utf8(text)]),
    new Uint8Array(Buffer.from(text.replace(/a/, "ä"), "latin1")),
    utf8(text.replaceAll("\n", "\r")),
    utf8(text.replaceAll("\n", "\r\n")),
    utf8(text.replace("\n", "\r")),
    utf8(text.replace(/e/, "\0")),
  ];
  return variants.map((bytes) => ({ family: "encodings", file: decodeFleetFile(path, bytes) }));
}

/** Bytes in no encoding a reader takes, in place of the file: UTF-32, an overlong form, a surrogate. */
export function foreignBytes(path: string): Mutation[] {
  const variants: Uint8Array[] = [
    new Uint8Array([0xff, 0xfe, 0, 0, ...Buffer.from("a: 1\n", "utf16le")]),
    new Uint8Array([...utf8("a: "), 0xc0, 0xaf, 0x0a]),
    new Uint8Array([...utf8("a: "), 0xed, 0xa0, 0x80, 0x0a]),
  ];
  return variants.map((bytes) => ({ family: "encodings", file: decodeFleetFile(path, bytes) }));
}

function laughs(levels: number, width: number): string {
  const lines = ['a0: &a0 ["lol"]'];
  for (let level = 1; level <= levels; level++) {
    lines.push(`a${level}: &a${level} [${Array.from({ length: width }, () => `*a${level - 1}`).join(", ")}]`);
  }
  return lines.join("\n");
}

/** Alias abuse: billion laughs, recursion, merge-key tricks, dangling aliases; some around `text`. */
export function aliasTexts(text: string): string[] {
  return [
    `${laughs(9, 9)}\n`,
    `${laughs(20, 2)}\n`,
    `${text}extra: &e {a: *e}\n`,
    "apiVersion: operator.knative.dev/v1beta1\nkind: KnativeServing\nmetadata: {name: a}\nspec: &s {config: {x: *s}}\n",
    "a: &a\n  b: *a\n",
    "a: *missing\n",
    "base: &b {apiVersion: operator.knative.dev/v1beta1, kind: KnativeServing}\n<<: *b\nmetadata: {name: merged}\n",
    "<<: [*a, *b]\n",
    "a: &a [*a]\n",
    `spec: &x ${"[".repeat(30)}*x${"]".repeat(30)}\n`,
  ];
}

/** Documents of odd shapes: empty, scalars, lists, foreign kinds, tags, directives, broken syntax. */
export const STRUCTURES = [
  "",
  "---\n",
  "--- |\n  text\n",
  "- a\n- b\n",
  "just a scalar\n",
  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
  "kind: KnativeServing\n",
  "apiVersion: operator.knative.dev/v1beta1\nkind: KnativeServing\nmetadata: {name: x, namespace: Bad_NS}\n",
  "{a: 1, a: 2}\n",
  "%YAML 1.2\n---\na: 1\n",
  "%TAG ! tag:evil,2000:\n---\n!foo a: 1\n",
  "a: !!binary AAAA\n",
  "a: !!python/object:os.system ls\n",
  '"unterminated\n',
  "a:\tb\n",
  "? complex\n: key\n",
];

/** The path as each tree walk reports what is not a regular file there. */
export function filesystemOddities(path: string): Mutation[] {
  const filter = createFileFilter(DEFAULT_FILE_SELECTION);
  return (["folder", "symlink", "submodule", "special"] as EntryKind[]).map((kind) => {
    const action = entryAction(filter, path, kind);
    return {
      family: "filesystem oddities",
      file: action.problem ? fileProblem(path, action.problem) : { path, text: "" },
    };
  });
}

/** A YAML syntax error put at the start of a random line. */
export function syntaxErrors(path: string, text: string, count: number, random: Chooser): Mutation[] {
  const breakers = ['"', "[", "{a", "- ", ": x", "\t", "&", "*", "!"];
  return Array.from({ length: count }, () => {
    const lines = text.split("\n");
    const at = random.int(lines.length);
    lines[at] = `${random.pick(breakers)}${lines[at]}`;
    return { family: "syntax errors", file: { path, text: lines.join("\n") } };
  });
}

/**
 * The mutations every kind of file gets, whatever it holds: byte flips, truncation, other encodings and
 * foreign bytes, what is no regular file, alias abuse and odd structures in its place.
 */
export function fileMutations(
  path: string,
  text: string,
  random: Chooser,
  counts: { flips: number; truncations: number; aliases: number },
): Mutation[] {
  const aliases = aliasTexts(text);
  return [
    ...byteFlips(path, text, counts.flips, random),
    ...truncations(path, text, counts.truncations, random),
    ...encodings(path, text),
    ...foreignBytes(path),
    ...filesystemOddities(path),
    ...Array.from({ length: counts.aliases }, () => ({
      family: "aliases",
      file: { path, text: random.pick(aliases) },
    })),
    ...STRUCTURES.map((structure) => ({ family: "structure", file: { path, text: structure } })),
  ];
}
