import {
  Composer,
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  type Pair,
  Parser,
  type ScalarTag,
  type Tags,
  type YAMLMap,
} from "yaml";
import {
  type Diagnostic,
  type FieldPath,
  formatFieldPath,
  lowercaseFirst,
  type SourcePosition,
} from "./diagnostic.ts";

/** One non-empty YAML document of a fleet file, with the AST kept so errors can name a line and column. */
export interface SourceDocument {
  /** 0-based position among all the file's documents (empty ones included), as an editor counts `---`. */
  index: number;
  /** Where the document's content starts. */
  position: SourcePosition;
  /** The plain value, as Kubernetes would decode it. */
  value: unknown;
  /** False when the YAML has errors: `value` is then only what the parser could recover, if anything. */
  wellFormed: boolean;
  ast: Document.Parsed;
  lineCounter: LineCounter;
}

interface ParsedYamlFile {
  documents: SourceDocument[];
  /** YAML syntax errors, duplicate keys included. */
  diagnostics: Diagnostic[];
}

/** Which node of a located field to point at: the key (`overide:`) or the value (`overide: "x"`). */
export type FieldAnchor = "key" | "value";

const TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp";

/**
 * The YAML 1.1 tags minus the ones Kubernetes' decoder (sigs.k8s.io/yaml, go-yaml v2) does not apply:
 * base-60 numbers (`10:30`) and timestamps stay strings there, so they must stay strings here.
 */
function kubernetesYaml11Tags(tags: Tags): Tags {
  return [
    ...tags.filter(
      (tag) =>
        typeof tag === "string" ||
        !(tag.format === "TIME" || tag.tag === TIMESTAMP_TAG || tag.tag === BINARY_TAG),
    ),
    binaryAsString,
  ];
}

const BINARY_TAG = "tag:yaml.org,2002:binary";

/** `!!binary`: go-yaml v2 decodes it into a string of the bytes (the JSON step makes invalid UTF-8 U+FFFD). */
const binaryAsString: ScalarTag = {
  tag: BINARY_TAG,
  default: false,
  identify: () => false,
  resolve: (source) => Buffer.from(source.replace(/\s/g, ""), "base64").toString("utf8"),
};

/** One document of a YAML stream: its problems, and the document itself unless it is empty. */
interface ParsedYamlDocument {
  document?: SourceDocument;
  diagnostics: Diagnostic[];
}

/**
 * Parses a multi-document YAML file the way Kubernetes reads manifests: YAML 1.1 scalars (`yes`/`on` are
 * booleans, `0755` is octal), merge keys, duplicate keys rejected. Empty documents are skipped.
 */
export function parseYamlFile(path: string, text: string): ParsedYamlFile {
  const documents: SourceDocument[] = [];
  const diagnostics: Diagnostic[] = [];
  for (const parsed of parseYamlDocuments(path, text)) {
    diagnostics.push(...parsed.diagnostics);
    if (parsed.document) documents.push(parsed.document);
  }
  return { documents, diagnostics };
}

/**
 * parseYamlFile one document at a time: a caller that keeps only each document's value holds one syntax tree
 * at most, where a release file's trees together are several times the text (hundreds of objects).
 */
export function* parseYamlDocuments(path: string, text: string): Generator<ParsedYamlDocument> {
  const lineCounter = new LineCounter();
  const composer = new Composer({
    version: "1.1",
    customTags: kubernetesYaml11Tags,
    // The parser's own check compares every key with every other (20,000 keys: a minute); ours is linear.
    uniqueKeys: false,
  });
  let index = 0;
  for (const ast of composer.compose(new Parser(lineCounter.addNewLine).parse(text))) {
    yield sourceDocument(path, text, ast, index++, lineCounter);
  }
}

function sourceDocument(
  path: string,
  text: string,
  ast: Document.Parsed,
  index: number,
  lineCounter: LineCounter,
): ParsedYamlDocument {
  const diagnostics: Diagnostic[] = [];
  for (const error of ast.errors) {
    // Indentation errors start at the line's leading spaces; the token after them is what is misplaced.
    const offset = skipSpaces(text, error.pos[0]);
    diagnostics.push({
      path,
      ...toPosition(lineCounter, offset),
      field: "",
      message: lowercaseFirst(error.message),
    });
  }
  diagnostics.push(...duplicateKeyDiagnostics(path, ast, lineCounter));
  const contents = ast.contents;
  if (contents === null || (isScalar(contents) && contents.value === null)) return { diagnostics };
  const position = toPosition(lineCounter, contents.range[0]);
  const { value, error } = decode(ast);
  // Reachable without syntax errors through alias abuse ("billion laughs", recursive aliases) or nesting.
  if (error !== undefined && ast.errors.length === 0) {
    diagnostics.push({ path, ...position, field: "", message: lowercaseFirst(error) });
  }
  const wellFormed = ast.errors.length === 0 && error === undefined;
  return { document: { index, position, value, wellFormed, ast, lineCounter }, diagnostics };
}

/**
 * The position of the field at `path`. When the whole path exists, the `anchor` node of its last entry;
 * when it does not (a required field is missing), the key of the deepest ancestor that does exist.
 */
export function locateField(
  document: Pick<SourceDocument, "ast" | "lineCounter">,
  path: FieldPath,
  anchor: FieldAnchor,
): SourcePosition {
  const { ast, lineCounter } = document;
  const { node, entryKey, found } = walk(ast, path);
  const offset = !found
    ? (startOf(entryKey) ?? startOf(ast.contents))
    : anchor === "key"
      ? (startOf(entryKey) ?? startOf(node))
      : (startOf(node) ?? startOf(entryKey));
  return toPosition(lineCounter, offset ?? 0);
}

/** The source text at `path` when it is a plain (unquoted) scalar: the kind YAML 1.1 may type-convert. */
export function plainScalarSourceAt(
  document: Pick<SourceDocument, "ast">,
  path: FieldPath,
): string | undefined {
  const { node, found } = walk(document.ast, path);
  return found && isScalar(node) && node.type === "PLAIN" ? node.source : undefined;
}

interface Walk {
  /** The node reached: the field's value when `found`, else the deepest existing ancestor's value. */
  node: unknown;
  /** The key of the last entry walked through (for a sequence item, the item itself). */
  entryKey: Node | undefined;
  found: boolean;
}

function walk(ast: Document.Parsed, path: FieldPath): Walk {
  let node = resolveAlias(ast, ast.contents);
  let entryKey: Node | undefined;
  for (const segment of path) {
    const entry = childEntry(ast, node, segment);
    if (!entry) return { node, entryKey, found: false };
    entryKey = entry.key;
    node = resolveAlias(ast, entry.value);
  }
  return { node, entryKey, found: true };
}

interface Entry {
  /** The map key, or the item itself for a sequence entry (an item has no key to point at). */
  key: Node | undefined;
  value: unknown;
}

function childEntry(ast: Document.Parsed, node: unknown, segment: PropertyKey): Entry | undefined {
  if (isMap(node)) {
    const pair = findPair(ast, node, String(segment));
    return pair && { key: asNode(pair.key), value: pair.value };
  }
  if (isSeq(node) && typeof segment === "number" && segment < node.items.length) {
    const item = node.items[segment];
    return { key: asNode(item), value: item };
  }
  return undefined;
}

/** The map's own pair for `key`, else one inherited through a `<<: *anchor` merge key. */
function findPair(ast: Document.Parsed, map: YAMLMap, key: string): Pair | undefined {
  const own = map.items.find((pair) => keyString(pair.key) === key);
  if (own) return own;
  for (const pair of map.items) {
    if (!isMergeKey(pair.key)) continue;
    const sources = isSeq(pair.value) ? pair.value.items : [pair.value];
    for (const source of sources) {
      const merged = resolveAlias(ast, source);
      const inherited = isMap(merged) ? findPair(ast, merged, key) : undefined;
      if (inherited) return inherited;
    }
  }
  return undefined;
}

/** A key a map repeats: Kubernetes' decoder refuses those, and silently keeping one copy hides a typo. */
function duplicateKeyDiagnostics(path: string, ast: Document.Parsed, lineCounter: LineCounter): Diagnostic[] {
  const diagnostics: Diagnostic[] = [];
  // An explicit stack, not recursion: the depth is the file's to choose.
  const stack: { node: unknown; at: PropertyKey[] }[] = [{ node: ast.contents, at: [] }];
  while (stack.length > 0) {
    const { node, at } = stack.pop()!;
    if (isMap(node)) {
      const first = new Map<string, Pair>();
      for (const pair of node.items) {
        if (isMergeKey(pair.key)) continue;
        const key = keyString(pair.key);
        const earlier = first.get(key);
        if (earlier === undefined) first.set(key, pair);
        else {
          diagnostics.push({
            path,
            ...toPosition(lineCounter, startOf(pair.key) ?? 0),
            field: formatFieldPath([...at, key]),
            message: `duplicate key (first at line ${toPosition(lineCounter, startOf(earlier.key) ?? 0).line})`,
          });
        }
        stack.push({ node: pair.value, at: [...at, key] });
      }
    } else if (isSeq(node)) {
      for (const [index, item] of node.items.entries()) stack.push({ node: item, at: [...at, index] });
    }
  }
  return diagnostics;
}

/** Deeper than any Knative CR nests; beyond it a document is an attack on the parser, not a config. */
const MAX_NESTING_DEPTH = 64;

/** The document's plain value; for a broken document, what the parser recovered, if anything. */
function decode(ast: Document.Parsed): { value: unknown; error?: string } {
  let value: unknown;
  try {
    value = ast.toJS();
  } catch (error) {
    const overflow = error instanceof RangeError;
    return {
      value: undefined,
      error: overflow ? `nested deeper than ${MAX_NESTING_DEPTH} levels` : (error as Error).message,
    };
  }
  const shape = shapeError(value);
  return shape === undefined ? { value } : { value: undefined, error: shape };
}

/**
 * toJS turns an alias to one of its own ancestors (`spec: &s {x: *s}`) into a cyclic value, which every
 * later stage would walk forever; and a value nested past MAX_NESTING_DEPTH would overflow their stacks.
 */
function shapeError(root: unknown): string | undefined {
  const ancestors = new Set<object>();
  const visit = (value: unknown, depth: number): string | undefined => {
    if (typeof value !== "object" || value === null) return undefined;
    if (ancestors.has(value)) return "an alias refers to a node that contains it (a recursive alias)";
    if (depth > MAX_NESTING_DEPTH) return `nested deeper than ${MAX_NESTING_DEPTH} levels`;
    ancestors.add(value);
    for (const child of Object.values(value)) {
      const error = visit(child, depth + 1);
      if (error !== undefined) return error;
    }
    ancestors.delete(value);
    return undefined;
  };
  return visit(root, 0);
}

function resolveAlias(ast: Document.Parsed, node: unknown): unknown {
  return isAlias(node) ? node.resolve(ast) : node;
}

/** The parser resolves a `<<` merge key to a symbol, so no string key can be mistaken for one. */
function isMergeKey(key: unknown): boolean {
  return isScalar(key) && typeof key.value === "symbol";
}

function keyString(key: unknown): string {
  return isScalar(key) ? String(key.value) : String(key);
}

function asNode(value: unknown): Node | undefined {
  return isScalar(value) || isMap(value) || isSeq(value) || isAlias(value) ? value : undefined;
}

function startOf(node: unknown): number | undefined {
  return asNode(node)?.range?.[0];
}

function skipSpaces(text: string, offset: number): number {
  let end = offset;
  while (text[end] === " ") end++;
  return end;
}

function toPosition(lineCounter: LineCounter, offset: number): SourcePosition {
  const { line, col } = lineCounter.linePos(offset);
  return { line, column: col };
}
