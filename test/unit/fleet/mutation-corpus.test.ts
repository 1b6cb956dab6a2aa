import { describe, expect, it } from "vitest";
import { parse as yamlParse } from "yaml";
import { z } from "zod";
import { SOURCE_PATH_ANNOTATION } from "../../../src/api/labels.ts";
import { FleetDocumentSchema } from "../../../src/fleet/document-schema.ts";
import { decodeFleetFile, type FleetFile, fileProblem } from "../../../src/fleet/file-text.ts";
import { formatIdentity } from "../../../src/fleet/parse.ts";
import {
  createFileFilter,
  DEFAULT_FILE_SELECTION,
  type EntryKind,
  entryAction,
} from "../../../src/fleet/select.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { identityOf, planApplies, planPrune } from "../../../src/mirror/plan.ts";
import { seededRandom } from "../../support/seeded-random.ts";
import { mirrorInput, sourceAt } from "../mirror/support.ts";

// A seeded corpus of hostile and broken fleet repositories, generated at test time: one file of a good
// fleet is mutated per case, and the invariants users rely on are checked for every case. The same seed
// gives the same corpus on every run; the counts are printed for the record.

const NS = "fleet";
const SEED = 20_261_123;

const RICH_SERVING = `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: spoke-1-serving
  labels: {team: platform}
  annotations:
    fleet.knative.dev/prune: disabled
spec:
  version: "1.21"
  clusterProfileRef:
    name: spoke-1
    namespace: fleet-system
  config:
    network:
      ingress-class: kourier.ingress.networking.knative.dev
    autoscaler:
      enable-scale-to-zero: "true"
  ingress:
    kourier:
      enabled: true
  high-availability:
    replicas: 2
  registry:
    default: registry.example/knative
    imagePullSecrets:
      - name: pull
  workloads:
    - name: controller
      replicas: 2
      resources:
        - container: controller
          requests: {cpu: 100m}
  namespace:
    labels: {tier: system}
`;

const BASE: Record<string, string> = {
  "clusters/spoke-1/knative-serving.yaml": RICH_SERVING,
  "clusters/spoke-2/knative-eventing.yaml": `apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata:
  name: spoke-2-eventing
spec:
  version: "1.21"
  clusterProfileRef: {name: spoke-2, namespace: fleet-system}
  source:
    ceph: {enabled: false}
    github: {enabled: true}
    gitlab: {enabled: false}
    kafka: {enabled: false}
    rabbitmq: {enabled: false}
    redis: {enabled: false}
`,
  "clusters/spoke-3/knative-serving.yml": `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: spoke-3-serving
spec:
  clusterProfileRef: {name: spoke-3, namespace: fleet-system}
`,
  "clusters/spoke-4/all.yaml": `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata: {name: spoke-4-serving}
spec: {clusterProfileRef: {name: spoke-4, namespace: fleet-system}}
---
apiVersion: operator.knative.dev/v1beta1
kind: KnativeEventing
metadata: {name: spoke-4-eventing}
spec: {clusterProfileRef: {name: spoke-4, namespace: fleet-system}}
`,
};
const PATHS = Object.keys(BASE);

/** One case: the fleet with one path replaced by `file` (or removed, or added beside the others). */
interface Case {
  family: string;
  files: FleetFile[];
}

const utf8 = (text: string) => new TextEncoder().encode(text);
const withFile = (path: string, file: FleetFile): FleetFile[] => [
  ...PATHS.filter((other) => other !== path).map((other) => ({ path: other, text: BASE[other]! })),
  file,
];

/** Every field path the fleet schema knows, from its JSON schema: objects by key, arrays by index 0. */
function schemaPaths(): (string | number)[][] {
  const json = z.toJSONSchema(FleetDocumentSchema, { unrepresentable: "any" }) as JsonSchema;
  const paths: (string | number)[][] = [];
  const walk = (schema: JsonSchema, path: (string | number)[], depth: number) => {
    if (depth > 8) return;
    for (const branch of [...(schema.oneOf ?? []), ...(schema.anyOf ?? []), ...(schema.allOf ?? [])]) {
      walk(branch, path, depth + 1);
    }
    for (const [key, child] of Object.entries(schema.properties ?? {})) {
      paths.push([...path, key]);
      walk(child, [...path, key], depth + 1);
    }
    if (schema.items && !Array.isArray(schema.items)) walk(schema.items, [...path, 0], depth + 1);
    if (typeof schema.additionalProperties === "object")
      walk(schema.additionalProperties, [...path, "x"], depth + 1);
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

function setAt(document: Record<string, unknown>, path: readonly (string | number)[], value: unknown): void {
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

function generateCorpus(): Case[] {
  const next = seededRandom(SEED);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const cases: Case[] = [];
  const add = (family: string, path: string, file: FleetFile) =>
    cases.push({ family, files: withFile(path, file) });

  // Byte flips and truncation of the raw bytes: the decoder and the parser see any byte anywhere.
  for (let i = 0; i < 300; i++) {
    const path = pick(PATHS);
    const bytes = utf8(BASE[path]!);
    for (let flips = 1 + Math.floor(next() * 4); flips > 0; flips--) {
      bytes[Math.floor(next() * bytes.length)] = Math.floor(next() * 256);
    }
    add("byte flips", path, decodeFleetFile(path, bytes));
  }
  for (let i = 0; i < 150; i++) {
    const path = pick(PATHS);
    const bytes = utf8(BASE[path]!);
    add("truncation", path, decodeFleetFile(path, bytes.subarray(0, Math.floor(next() * bytes.length))));
  }

  // A wrong type for every field of the schema, in the rich Serving file.
  const serving = "clusters/spoke-1/knative-serving.yaml";
  const wrongValues: unknown[] = ["text", 42, true, null, [1, "two"], { bogus: { nested: 1 } }];
  for (const path of schemaPaths()) {
    for (const value of [pick(wrongValues), pick(wrongValues)]) {
      const document = structuredClone(yamlParse(RICH_SERVING)) as Record<string, unknown>;
      setAt(document, path, value);
      add("wrong types", serving, { path: serving, text: JSON.stringify(document, null, 1) });
    }
  }

  // Aliases: billion laughs, recursion, merge-key tricks, dangling aliases.
  const laughs = (levels: number, width: number) => {
    const lines = ['a0: &a0 ["lol"]'];
    for (let level = 1; level <= levels; level++) {
      lines.push(
        `a${level}: &a${level} [${Array.from({ length: width }, () => `*a${level - 1}`).join(", ")}]`,
      );
    }
    return lines.join("\n");
  };
  const aliasTexts = [
    `${laughs(9, 9)}\n`,
    `${laughs(20, 2)}\n`,
    `${RICH_SERVING}extra: &e {a: *e}\n`,
    "apiVersion: operator.knative.dev/v1beta1\nkind: KnativeServing\nmetadata: {name: a}\nspec: &s {config: {x: *s}}\n",
    "a: &a\n  b: *a\n",
    "a: *missing\n",
    "base: &b {apiVersion: operator.knative.dev/v1beta1, kind: KnativeServing}\n<<: *b\nmetadata: {name: merged}\n",
    "<<: [*a, *b]\n",
    "a: &a [*a]\n",
    `spec: &x ${"[".repeat(30)}*x${"]".repeat(30)}\n`,
  ];
  for (let i = 0; i < 60; i++) {
    const path = pick(PATHS);
    add("aliases", path, { path, text: pick(aliasTexts) });
  }

  // Deep nesting, flow and block.
  for (const depth of [65, 100, 1_000, 10_000, 100_000]) {
    add("deep nesting", serving, { path: serving, text: `spec: ${"[".repeat(depth)}${"]".repeat(depth)}\n` });
    add("deep nesting", serving, {
      path: serving,
      text: `spec: ${"{a: ".repeat(depth)}1${"}".repeat(depth)}\n`,
    });
  }
  for (const depth of [65, 200, 1_000]) {
    const block = Array.from({ length: depth }, (_, i) => `${" ".repeat(i)}k${i}:`).join("\n");
    add("deep nesting", serving, { path: serving, text: `${block} 1\n` });
  }

  // Big files: over the size limit, and large but under it.
  for (const size of [2 * 1024 * 1024, 1024 * 1024 + 1]) {
    add("big files", serving, decodeFleetFile(serving, utf8(`# ${"x".repeat(size)}\n`)));
  }
  const manyKeys = Array.from({ length: 20_000 }, (_, i) => `    k${i}: "v"`).join("\n");
  add("big files", serving, {
    path: serving,
    text: `${RICH_SERVING.replace("  config:\n", `  config:\n    huge:\n${manyKeys}\n`)}`,
  });
  add("big files", serving, { path: serving, text: `${"---\n".repeat(50_000)}` });
  add("big files", serving, { path: serving, text: `${RICH_SERVING}---\n`.repeat(200) });

  // Encodings.
  const encodings: [string, Uint8Array][] = [
    ["utf-16le bom", new Uint8Array([0xff, 0xfe, ...Buffer.from(RICH_SERVING, "utf16le")])],
    ["utf-16be bom", new Uint8Array([0xfe, 0xff, ...Buffer.from(RICH_SERVING, "utf16le").swap16()])],
    ["utf-16le bare", new Uint8Array(Buffer.from(RICH_SERVING, "utf16le"))],
    ["utf-32 bom", new Uint8Array([0xff, 0xfe, 0, 0, ...Buffer.from("a: 1\n", "utf16le")])],
    ["utf-8 bom", new Uint8Array([0xef, 0xbb, 0xbf, ...utf8(RICH_SERVING)])],
    ["latin-1", new Uint8Array(Buffer.from(RICH_SERVING.replace("platform", "plätform"), "latin1"))],
    ["cr only", utf8(RICH_SERVING.replaceAll("\n", "\r"))],
    ["crlf", utf8(RICH_SERVING.replaceAll("\n", "\r\n"))],
    ["mixed cr", utf8(RICH_SERVING.replace("\n", "\r"))],
    ["nul", utf8(RICH_SERVING.replace("platform", "plat\0form"))],
    ["overlong", new Uint8Array([...utf8("a: "), 0xc0, 0xaf, 0x0a])],
    ["surrogate", new Uint8Array([...utf8("a: "), 0xed, 0xa0, 0x80, 0x0a])],
  ];
  for (const [, bytes] of encodings) {
    for (const path of PATHS) add("encodings", path, decodeFleetFile(path, bytes));
  }

  // YAML 1.1 scalars where strings are expected.
  const yaml11 = [
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "Y",
    "NO",
    "0755",
    "0x1F",
    "1_000",
    ".inf",
    "-.Inf",
    ".nan",
    "~",
    "null",
    "2024-01-01",
    "10:30",
    "1e3",
    "0b101",
    "+12",
    "true",
  ];
  for (const scalar of yaml11) {
    for (const [from, to] of [
      ['version: "1.21"', `version: ${scalar}`],
      ["name: spoke-1\n", `name: ${scalar}\n`],
      ['enable-scale-to-zero: "true"', `enable-scale-to-zero: ${scalar}`],
      ["team: platform", `team: ${scalar}`],
      ["replicas: 2\n  registry", `replicas: ${scalar}\n  registry`],
    ] as const) {
      add("YAML 1.1 scalars", serving, { path: serving, text: RICH_SERVING.replace(from, to) });
    }
  }

  // Filesystem oddities, as both tree walks report them, and odd names.
  const filter = createFileFilter(DEFAULT_FILE_SELECTION);
  for (const kind of ["folder", "symlink", "submodule", "special"] as EntryKind[]) {
    for (const path of PATHS) {
      const action = entryAction(filter, path, kind);
      add(
        "filesystem oddities",
        path,
        action.problem ? fileProblem(path, action.problem) : { path, text: "" },
      );
    }
  }
  for (const name of [
    "a\nb",
    "a\rb",
    "\u001b[2J",
    "\u202eevil",
    "a b",
    "ünïcödé",
    "x".repeat(300),
    "a\tb",
    "\u2028",
  ]) {
    const path = `clusters/${name}.yaml`;
    add("filesystem oddities", path, { path, text: pick(aliasTexts) });
    cases.push({
      family: "filesystem oddities",
      files: withFile(PATHS[0]!, { path: PATHS[0]!, text: BASE[PATHS[0]!]! }).concat({
        path,
        text: BASE[PATHS[2]!]!,
      }),
    });
  }

  // Structure: conflicts, empty and odd documents.
  const structures = [
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
  for (const text of structures) {
    for (const path of PATHS) add("structure", path, { path, text });
  }
  for (const path of PATHS) {
    cases.push({
      family: "conflicts",
      files: [
        ...withFile(path, { path, text: BASE[path]! }),
        { path: `clusters/copy-of-${path.split("/")[1]}.yaml`, text: BASE[path]! },
      ],
    });
  }
  return cases;
}

/** The hub after syncing the good fleet: every CR, with the path its file had. */
function baseHub(): KubeObject[] {
  const files = PATHS.map((path) => ({ path, text: BASE[path]! }));
  const { model } = mirrorInput(files, NS, "1".repeat(40));
  expect(model.diagnostics).toEqual([]);
  return planApplies(model.resources, sourceAt("1".repeat(40)), []).flatMap((step) =>
    "object" in step ? [step.object] : [],
  );
}

describe("mutation corpus", () => {
  it("never crashes, names file:line for every rejected file, and never prunes a CR whose file still exists", () => {
    const hub = baseHub();
    const corpus = generateCorpus();
    const counts = new Map<string, number>();
    let crashes = 0;
    let rejectedFiles = 0;
    let withoutLocation = 0;
    let prunesOfExistingFiles = 0;
    const failures: string[] = [];
    const started = performance.now();
    for (const [index, testCase] of corpus.entries()) {
      counts.set(testCase.family, (counts.get(testCase.family) ?? 0) + 1);

      try {
        const input = mirrorInput(testCase.files, NS, "2".repeat(40));
        const { model } = input;
        for (const file of model.files.filter((f) => f.status === "failed")) {
          rejectedFiles++;
          const located = model.diagnostics.some((d) => d.path === file.path && d.line >= 1 && d.column >= 1);
          if (!located) {
            withoutLocation++;
            failures.push(
              `case ${index} (${testCase.family}): ${JSON.stringify(file.path)} rejected without file:line`,
            );
          }
        }
        const prune = planPrune(input, hub, { applyFailures: 0, confirmedToken: undefined });
        if (prune.state === "pruned") {
          const byPath = new Map(model.files.map((file) => [file.path, file]));
          for (const candidate of prune.candidates) {
            const object = hub.find((o) => formatIdentity(identityOf(o)) === formatIdentity(candidate));
            const file = byPath.get(object?.metadata.annotations?.[SOURCE_PATH_ANNOTATION] ?? "");
            // A valid file that now declares another name renamed its CR; anything else is a wrong prune.
            if (
              file &&
              (file.status === "failed" ||
                file.declares.some((d) => formatIdentity(d) === formatIdentity(candidate)))
            ) {
              prunesOfExistingFiles++;
              failures.push(`case ${index} (${testCase.family}): pruned ${formatIdentity(candidate)}`);
            }
          }
        }
      } catch (error) {
        crashes++;
        failures.push(`case ${index} (${testCase.family}): ${String(error).slice(0, 200)}`);
      }
    }
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const families = [...counts].map(([family, count]) => `${family} ${count}`).join(", ");
    console.log(
      `mutation corpus (seed ${SEED}): ${corpus.length} cases (${families}) in ${seconds} s; ` +
        `${crashes} crashes, ${rejectedFiles} rejected files, ${withoutLocation} without file:line, ` +
        `${prunesOfExistingFiles} prunes of a CR whose file still exists`,
    );
    expect(failures.slice(0, 20)).toEqual([]);
    expect(corpus.length).toBeGreaterThanOrEqual(1000);
    expect(rejectedFiles).toBeGreaterThan(800);
  }, 120_000);
});
