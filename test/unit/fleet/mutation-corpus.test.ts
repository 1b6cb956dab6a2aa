import { describe, expect, it } from "vitest";
import { parse as yamlParse } from "yaml";
import { PLACEMENT_LABEL, SOURCE_PATH_ANNOTATION } from "../../../src/api/labels.ts";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { FleetDocumentSchema } from "../../../src/fleet/document-schema.ts";
import { decodeFleetFile, type FleetFile } from "../../../src/fleet/file-text.ts";
import { formatIdentity, identityOf } from "../../../src/fleet/identity.ts";
import {
  buildFleetModel,
  type FleetModel,
  MAX_DIAGNOSTICS,
  MAX_DIAGNOSTICS_PER_FILE,
} from "../../../src/fleet/model.ts";
import { PlacementDocumentSchema } from "../../../src/fleet/placement-schema.ts";
import { RolloutDocumentSchema } from "../../../src/fleet/rollout-schema.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { type ApplyStep, decideApplies, decidePrune, type PruneReport } from "../../../src/mirror/decide.ts";
import { expandForSync } from "../../../src/placement/combine.ts";
import type { Inventory } from "../../../src/placement/inventory.ts";
import { matchesTerm } from "../../../src/placement/select.ts";
import { renderStatusSummary } from "../../../src/status/summary.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { seededRandom } from "../../support/seeded-random.ts";
import { mirrorInput, sourceAt } from "../mirror/support.ts";
import {
  aliasTexts,
  byteFlips,
  type Chooser,
  chooser,
  encodings,
  type FieldPath,
  fileMutations,
  filesystemOddities,
  foreignBytes,
  type Mutation,
  STRUCTURES,
  schemaPaths,
  setAt,
  syntaxErrors,
  truncations,
  utf8,
  WRONG_VALUES,
  wrongTypes,
} from "./mutations.ts";
import { gatedActions, hubAt, rolloutStage, twoCrs } from "./rollout-hub.ts";

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

const withFile = (path: string, file: FleetFile): FleetFile[] => [
  ...PATHS.filter((other) => other !== path).map((other) => ({ path: other, text: BASE[other]! })),
  file,
];

function generateCorpus(): Case[] {
  const random = chooser(seededRandom(SEED));
  const { pick } = random;
  const cases: Case[] = [];
  const add = (family: string, path: string, file: FleetFile) =>
    cases.push({ family, files: withFile(path, file) });
  const addAll = (mutations: readonly Mutation[]) => {
    for (const { family, file } of mutations) add(family, file.path, file);
  };

  // Byte flips and truncation of the raw bytes: the decoder and the parser see any byte anywhere.
  for (let i = 0; i < 300; i++) {
    const path = pick(PATHS);
    addAll(byteFlips(path, BASE[path]!, 1, random));
  }
  for (let i = 0; i < 150; i++) {
    const path = pick(PATHS);
    addAll(truncations(path, BASE[path]!, 1, random));
  }

  // A wrong type for every field of the schema, in the rich Serving file.
  const serving = "clusters/spoke-1/knative-serving.yaml";
  addAll(wrongTypes(serving, yamlParse(RICH_SERVING), schemaPaths(FleetDocumentSchema), random));

  // Aliases: billion laughs, recursion, merge-key tricks, dangling aliases.
  const aliases = aliasTexts(RICH_SERVING);
  for (let i = 0; i < 60; i++) {
    const path = pick(PATHS);
    add("aliases", path, { path, text: pick(aliases) });
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
  for (const path of PATHS) addAll([...encodings(path, BASE[path]!), ...foreignBytes(path)]);

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
  for (const path of PATHS) addAll(filesystemOddities(path));
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
    add("filesystem oddities", path, { path, text: pick(aliases) });
    cases.push({
      family: "filesystem oddities",
      files: withFile(PATHS[0]!, { path: PATHS[0]!, text: BASE[PATHS[0]!]! }).concat({
        path,
        text: BASE[PATHS[2]!]!,
      }),
    });
  }

  // Structure: conflicts, empty and odd documents.
  for (const text of STRUCTURES) {
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
  return decideApplies(model.resources, sourceAt("1".repeat(40)), []).flatMap((step) =>
    "object" in step ? [step.object] : [],
  );
}

describe("mutation corpus", () => {
  it("never crashes, names file:line for every rejected file, and never prunes a CR whose file still exists", async () => {
    const hub = baseHub();
    const corpus = generateCorpus();
    const tally = new Tally();
    for (const [index, testCase] of corpus.entries()) {
      await tally.run(index, testCase, () => {
        const input = mirrorInput(testCase.files, NS, "2".repeat(40));
        tally.checkModel(index, testCase, input.model);
        const prune = decidePrune(input, hub, { applyFailures: 0, confirmedToken: undefined });
        tally.checkPrune(index, testCase, input.model, hub, prune);
      });
    }
    console.log(`mutation corpus (seed ${SEED}): ${tally.summary()}`);
    expect(tally.failures.slice(0, 20)).toEqual([]);
    expect(corpus.length).toBeGreaterThanOrEqual(1000);
    expect(tally.rejectedFiles).toBeGreaterThan(800);
  }, 120_000);
});

// The same kinds of mutation applied to a placement file and to a rollout policy, with the invariants of
// both: a placement's CRs are its template with the overrides that match applied in order, and a rollout
// policy that fails (in any way) releases no change.

const PLACEMENT_PATH = "clusters/placements/serving.yaml";
const PLACEMENT = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata:
  name: serving
  labels: {team: platform}
  annotations:
    fleet.knative.dev/prune: disabled
spec:
  clusterSelectorTerms:
    - labelSelector:
        matchLabels: {env: prod}
      propertySelector:
        matchExpressions:
          - {name: location, operator: In, values: [eu-west, us-east]}
    - labelSelector:
        matchExpressions:
          - {key: env, operator: In, values: [staging]}
  clusterProfiles:
    - {namespace: fleet-system, name: spoke-6}
  template:
    spec:
      version: "1.21"
      config:
        network: {ingress-class: kourier.ingress.networking.knative.dev}
        autoscaler: {enable-scale-to-zero: "true", max-scale: "10"}
      ingress:
        kourier: {enabled: true}
      high-availability: {replicas: 2}
      security: {securityGuard: {enabled: false}}
      workloads:
        - name: controller
          replicas: 2
  overrides:
    - clusterSelector:
        labelSelector:
          matchLabels: {env: staging}
      patch:
        config:
          autoscaler: {enable-scale-to-zero: "false"}
    - clusters: [{namespace: fleet-system, name: spoke-1}]
      patch:
        config:
          autoscaler: null
        high-availability: null
    - clusterSelector:
        propertySelector:
          matchExpressions:
            - {name: location, operator: In, values: [eu-west]}
      patch:
        workloads: [{name: activator, replicas: 3}]
`;

/** Beside the placement: per-cluster files for clusters it does not select. */
const PLACEMENT_NEIGHBOURS: FleetFile[] = [
  {
    path: "clusters/spoke-4/knative-serving.yaml",
    text: BASE["clusters/spoke-3/knative-serving.yml"]!.replaceAll("spoke-3", "spoke-4"),
  },
  {
    path: "clusters/spoke-5/knative-eventing.yaml",
    text: BASE["clusters/spoke-2/knative-eventing.yaml"]!.replaceAll("spoke-2", "spoke-5"),
  },
];

const INVENTORY: Inventory = {
  clusters: [
    ["spoke-1", "prod", "eu-west"],
    ["spoke-2", "prod", "us-east"],
    ["spoke-3", "staging", "eu-north"],
    ["spoke-4", "dev", "eu-west"],
    ["spoke-5", "dev", "us-east"],
  ].map(([name, env, location]) => ({
    namespace: "fleet-system",
    name: name!,
    labels: { env: env! },
    properties: new Map([["location", location!]]),
  })),
  decisions: [],
};

function generatePlacementCorpus(): Case[] {
  const random = chooser(seededRandom(SEED + 1));
  const { pick } = random;
  const cases: Case[] = [];
  const addAll = (mutations: readonly Mutation[], extra: FleetFile[] = []) => {
    for (const { family, file } of mutations)
      cases.push({ family, files: [...PLACEMENT_NEIGHBOURS, file, ...extra] });
  };
  const document = yamlParse(PLACEMENT) as Record<string, unknown>;
  const edited = (family: string, edit: (copy: Record<string, unknown>) => void): Mutation => {
    const copy = structuredClone(document);
    edit(copy);
    return { family, file: { path: PLACEMENT_PATH, text: JSON.stringify(copy, null, 1) } };
  };

  addAll(fileMutations(PLACEMENT_PATH, PLACEMENT, random, { flips: 150, truncations: 80, aliases: 20 }));
  addAll(syntaxErrors(PLACEMENT_PATH, PLACEMENT, 20, random));

  // A wrong type for every field: the placement's own (each override's too), then the template's.
  const paths = schemaPaths(PlacementDocumentSchema);
  const own = paths.filter((path) => path[1] !== "template" || path.length < 4);
  const everyOverride = own.flatMap((path) =>
    path[1] === "overrides" && path[2] === 0 ? [1, 2].map((index) => path.with(2, index)) : [],
  );
  addAll(wrongTypes(PLACEMENT_PATH, document, own, random));
  addAll(wrongTypes(PLACEMENT_PATH, document, everyOverride, random, 1));
  const templatePaths = paths.filter((path) => path[1] === "template" && path.length >= 4);
  addAll(wrongTypes(PLACEMENT_PATH, document, templatePaths, random, 1));

  // Every field of the template deleted (null) by a patch, every other one mistyped, for one or more clusters.
  for (const [index, path] of templatePaths.entries()) {
    const field = path.slice(3);
    addAll([
      edited("patch fields", (copy) =>
        setAt(copy, ["spec", "overrides", pick([0, 1, 2]), "patch", ...field], null),
      ),
    ]);
    if (index % 2 === 0) {
      addAll([
        edited("patch fields", (copy) =>
          setAt(copy, ["spec", "overrides", pick([0, 1, 2]), "patch", ...field], pick(WRONG_VALUES)),
        ),
      ]);
    }
  }

  // `overrides` in every shape but a list.
  for (const shape of [
    { clusters: [{ namespace: "fleet-system", name: "spoke-1" }], patch: {} },
    "all",
    3,
    true,
    [],
  ]) {
    addAll([edited("override shapes", (copy) => setAt(copy, ["spec", "overrides"], shape))]);
  }

  // Keys JavaScript treats specially, in every map of the file: plain keys, never the prototype.
  const maps: FieldPath[] = [
    ["spec", "clusterSelectorTerms", 0, "labelSelector", "matchLabels"],
    ["spec", "overrides", 0, "clusterSelector", "labelSelector", "matchLabels"],
    ["spec", "overrides", 1, "patch"],
    ["spec", "overrides", 1, "patch", "config"],
    ["spec", "overrides", 0, "patch", "config", "autoscaler"],
    ["spec", "template", "spec", "config", "network"],
    ["metadata", "labels"],
    ["metadata", "annotations"],
  ];
  for (const map of maps) {
    for (const key of ["__proto__", "constructor", "toString"]) {
      // An object literal cannot carry a `__proto__` key into JSON.stringify: it is put in as text.
      const { file } = edited("plain keys", (copy) => setAt(copy, [...map, "kf-key"], "kf-value"));
      const value = map.at(-1) === "patch" ? { version: "1.20" } : "prod";
      const text = file.text.replace(
        '"kf-key": "kf-value"',
        `${JSON.stringify(key)}: ${JSON.stringify(value)}`,
      );
      addAll([{ family: "plain keys", file: { path: PLACEMENT_PATH, text } }]);
    }
  }

  // Hostile cluster and namespace names wherever the file names a ClusterProfile.
  const names = ["../Etc", "UPPER", "a b", "", "x".repeat(300), "ünï", "a/b", "-lead", "trail-", "a..b"];
  for (const name of names) {
    for (const site of [
      ["spec", "clusterProfiles", 0, "name"],
      ["spec", "clusterProfiles", 0, "namespace"],
      ["spec", "overrides", 1, "clusters", 0, "name"],
    ] as FieldPath[]) {
      addAll([edited("names", (copy) => setAt(copy, site, name))]);
    }
  }

  // Annotations the mirror treats specially.
  for (const [key, value] of [
    ["fleet.knative.dev/prune", "Disabled"],
    ["fleet.knative.dev/prune", "true"],
    ["fleet.knative.dev/prune", ""],
    ["fleet.knative.dev/prune", "disabled "],
    ["fleet.knative.dev/abandon-cleanup", "true"],
    ["fleet.knative.dev/abandon-cleanup", "false"],
    ["example.com/big", "x".repeat(300 * 1024)],
  ] as const) {
    addAll([edited("annotations", (copy) => setAt(copy, ["metadata", "annotations", key], value))]);
  }

  // Conflicts: copies of the placement under other names, a per-cluster file for a selected cluster.
  for (const copies of [2, 10, 100]) {
    const text = Array.from({ length: copies }, (_, i) =>
      PLACEMENT.replace("name: serving", `name: serving-${i}`),
    ).join("---\n");
    addAll([{ family: "conflicts", file: { path: PLACEMENT_PATH, text } }]);
  }
  addAll(
    [{ family: "conflicts", file: { path: PLACEMENT_PATH, text: PLACEMENT } }],
    [
      {
        path: "clusters/spoke-1/knative-serving.yaml",
        text: BASE["clusters/spoke-3/knative-serving.yml"]!.replaceAll("spoke-3", "spoke-1"),
      },
    ],
  );
  return cases;
}

const ROLLOUT_PATH = "clusters/rollout/knative-rollout.yaml";
/** A policy file whose name says nothing: only its content can tell it is one. */
const POLICY_PATH = "clusters/policy.yaml";
const ROLLOUT = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeRollout
metadata:
  name: knative
  labels: {team: platform}
spec:
  waves:
    - name: canary
      clusterProfiles: [{namespace: fleet-system, name: c1}]
      soak: 1m
    - name: rest
      clusterSelectorTerms:
        - labelSelector: {matchLabels: {env: prod}}
      maxUnavailable: 50%
  maxUnavailable: 1
  soak: 5m
  timeLimit: 30m
  onFailure: HaltAndRevert
  windows:
    - {days: [Mon, Tue], start: "08:00", end: "17:00", timeZone: Europe/Berlin}
  paused: false
  allAtOnce: false
`;

/** Every single edit of a kind: each letter dropped, doubled, swapped with the next or replaced, and cases. */
function kindTypos(kind: string, random: Chooser): string[] {
  const typos = new Set<string>();
  for (let i = 0; i < kind.length; i++) {
    typos.add(kind.slice(0, i) + kind.slice(i + 1));
    typos.add(kind.slice(0, i + 1) + kind.slice(i));
    if (i + 1 < kind.length) typos.add(kind.slice(0, i) + kind[i + 1] + kind[i] + kind.slice(i + 2));
    typos.add(kind.slice(0, i) + random.pick([..."abcdefghijklmnopqrstuvwxyz"]) + kind.slice(i + 1));
  }
  for (const cased of [kind.toLowerCase(), kind.toUpperCase(), kind[0]!.toLowerCase() + kind.slice(1)])
    typos.add(cased);
  typos.delete(kind);
  return [...typos];
}

function generateRolloutCorpus(): Case[] {
  const random = chooser(seededRandom(SEED + 2));
  const cases: Case[] = [];
  const addAll = (mutations: readonly Mutation[]) => {
    for (const { family, file } of mutations) cases.push({ family, files: [...twoCrs("1.22"), file] });
  };
  // Where the name says `rollout` (as in fleet-example), every mutation; where it does not, those that
  // leave something of the policy's content to recognise it by.
  addAll(fileMutations(ROLLOUT_PATH, ROLLOUT, random, { flips: 120, truncations: 80, aliases: 20 }));
  addAll(encodings(POLICY_PATH, ROLLOUT));

  const document = yamlParse(ROLLOUT) as Record<string, unknown>;
  addAll(wrongTypes(POLICY_PATH, document, schemaPaths(RolloutDocumentSchema), random));
  addAll(syntaxErrors(POLICY_PATH, ROLLOUT, 30, random));
  for (const typo of kindTypos("KnativeRollout", random)) {
    addAll([
      {
        family: "kind typos",
        file: { path: POLICY_PATH, text: ROLLOUT.replace("kind: KnativeRollout", `kind: ${typo}`) },
      },
    ]);
  }
  for (const apiVersion of [
    "fleet.knative.dev/v1alpha",
    "fleet.knative.dev/v1",
    "fleet.kantive.dev/v1alpha1",
    "fleet.knative.de/v1alpha1",
    "fleet-knative.dev/v1alpha1",
    "flet.knative.dev/v1alpha1",
    "Fleet.Knative.Dev/v1alpha1",
    "v1",
    '""',
    "operator.knative.dev/v1beta1",
  ]) {
    addAll([
      {
        family: "apiVersion typos",
        file: {
          path: POLICY_PATH,
          text: ROLLOUT.replace("apiVersion: fleet.knative.dev/v1alpha1", `apiVersion: ${apiVersion}`),
        },
      },
    ]);
  }
  return cases;
}

/** RFC 7386, written apart from src/fleet/merge-patch.ts: the oracle of a placement's merged specs. */
function oracleMerge(target: unknown, patch: unknown): unknown {
  const isMap = (value: unknown): value is Record<string, unknown> =>
    typeof value === "object" && value !== null && !Array.isArray(value);
  if (!isMap(patch)) return patch;
  const result: Record<string, unknown> = isMap(target) ? structuredClone(target) : {};
  for (const key of Object.keys(patch)) {
    if (patch[key] === null) Reflect.deleteProperty(result, key);
    else {
      const merged = oracleMerge(Object.hasOwn(result, key) ? result[key] : undefined, patch[key]);
      Object.defineProperty(result, key, {
        value: merged,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return result;
}

/** JSON with sorted keys, `__proto__` included as the plain key it is. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, node: unknown) =>
    typeof node === "object" && node !== null && !Array.isArray(node)
      ? Object.fromEntries(Object.entries(node).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : node,
  );

/** The clusters' CRs, as the service expands and mirrors them from the good fleet. */
function placementHub(): KubeObject[] {
  const model = buildFleetModel([...PLACEMENT_NEIGHBOURS, { path: PLACEMENT_PATH, text: PLACEMENT }], {
    defaultNamespace: NS,
  });
  const sync = expandForSync(model, INVENTORY, {});
  expect(sync.model.diagnostics).toEqual([]);
  expect(sync.model.resources.map((r) => r.resource.metadata.name).sort()).toEqual([
    "serving-spoke-1",
    "serving-spoke-2",
    "serving-spoke-3",
    "serving-spoke-6",
    "spoke-4-serving",
    "spoke-5-eventing",
  ]);
  return decideApplies(sync.model.resources, sourceAt("1".repeat(40)), []).flatMap((step) =>
    "object" in step ? [step.object] : [],
  );
}

/** Counts of the invariants every corpus checks, and the failures to show. */
class Tally {
  readonly counts = new Map<string, number>();
  readonly failures: string[] = [];
  crashes = 0;
  hangs = 0;
  rejectedFiles = 0;
  withoutLocation = 0;
  unbounded = 0;
  prunesOfExistingFiles = 0;
  slowestMs = 0;

  fail(index: number, testCase: Case, what: string): void {
    this.failures.push(`case ${index} (${testCase.family}): ${what}`);
  }

  /** file:line for every rejected file, and output within the bounds. */
  checkModel(index: number, testCase: Case, model: FleetModel): void {
    for (const file of model.files.filter((f) => f.status === "failed")) {
      this.rejectedFiles++;
      if (!model.diagnostics.some((d) => d.path === file.path && d.line >= 1 && d.column >= 1)) {
        // A file whose errors were all left out by MAX_DIAGNOSTICS is counted, not shown.
        if (model.omittedDiagnostics > 0) continue;
        this.withoutLocation++;
        this.fail(index, testCase, `${JSON.stringify(file.path)} rejected without file:line`);
      }
    }
    const perFile = Map.groupBy(model.diagnostics, (d) => d.path);
    const text = model.diagnostics.map(formatDiagnostic).join("\n");
    if (
      model.diagnostics.length > MAX_DIAGNOSTICS ||
      [...perFile.values()].some((list) => list.length > MAX_DIAGNOSTICS_PER_FILE) ||
      text.length > 256 * 1024
    ) {
      this.unbounded++;
      this.fail(index, testCase, `${model.diagnostics.length} diagnostics, ${text.length} bytes`);
    }
  }

  /** No CR pruned whose file still exists: a valid file that now declares another name renamed its CR. */
  checkPrune(
    index: number,
    testCase: Case,
    model: FleetModel,
    hub: readonly KubeObject[],
    prune: PruneReport,
  ): void {
    if (prune.state !== "pruned") return;
    const byPath = new Map(model.files.map((file) => [file.path, file]));
    for (const candidate of prune.candidates) {
      const object = hub.find((o) => formatIdentity(identityOf(o)) === formatIdentity(candidate));
      const file = byPath.get(object?.metadata.annotations?.[SOURCE_PATH_ANNOTATION] ?? "");
      if (
        file &&
        (file.status === "failed" ||
          file.declares.some((d) => formatIdentity(d) === formatIdentity(candidate)))
      ) {
        this.prunesOfExistingFiles++;
        this.fail(index, testCase, `pruned ${formatIdentity(candidate)}`);
      }
    }
  }

  /** Runs one case, counting a throw as a crash and a case over HANG_MS as a hang. */
  async run(index: number, testCase: Case, body: () => Promise<void> | void): Promise<void> {
    this.counts.set(testCase.family, (this.counts.get(testCase.family) ?? 0) + 1);
    const started = performance.now();
    try {
      await body();
    } catch (error) {
      this.crashes++;
      this.fail(index, testCase, String(error).slice(0, 200));
    }
    const ms = performance.now() - started;
    this.slowestMs = Math.max(this.slowestMs, ms);
    if (ms > HANG_MS) {
      this.hangs++;
      this.fail(index, testCase, `took ${Math.round(ms)} ms`);
    }
  }

  summary(): string {
    const families = [...this.counts].map(([family, count]) => `${family} ${count}`).join(", ");
    return (
      `${[...this.counts.values()].reduce((a, b) => a + b, 0)} cases (${families}); ${this.crashes} crashes, ` +
      `${this.hangs} hangs (slowest case ${Math.round(this.slowestMs)} ms), ${this.rejectedFiles} rejected files, ` +
      `${this.withoutLocation} without file:line, ${this.unbounded} with unbounded output, ` +
      `${this.prunesOfExistingFiles} prunes of a CR whose file still exists`
    );
  }
}

/** Far beyond any case's cost (the slowest takes a fraction of a second): a case this slow is stuck. */
const HANG_MS = 10_000;

describe("mutation corpus of placements and rollout policies", () => {
  it("placements: no crash, bounded output, no prune of a CR whose file exists, CRs = template + overrides in order", async () => {
    const hub = placementHub();
    const corpus = generatePlacementCorpus();
    const tally = new Tally();
    let crsChecked = 0;
    let crsDiffering = 0;
    let unboundedStatus = 0;
    for (const [index, testCase] of corpus.entries()) {
      await tally.run(index, testCase, () => {
        const model = buildFleetModel(testCase.files, { defaultNamespace: NS });
        const sync = expandForSync(model, INVENTORY, {});
        tally.checkModel(index, testCase, sync.model);
        const departures = sync.departures({
          live: hub,
          repository: TEST_REPOSITORY,
          now: 1_000_000,
          gracePeriodMs: 300_000,
          previous: new Map(),
        });
        const input = { ...mirrorInput(testCase.files, NS, "2".repeat(40)), model: sync.model };
        const prune = decidePrune(input, hub, {
          applyFailures: 0,
          confirmedToken: undefined,
          held: departures.held,
        });
        tally.checkPrune(index, testCase, sync.model, hub, prune);

        for (const declared of model.placements) {
          if (sync.model.files.find((f) => f.path === declared.path)?.status !== "valid") continue;
          const { template, overrides = [] } = declared.placement.spec;
          const made = sync.model.resources.filter(
            (r) =>
              r.path === declared.path &&
              r.resource.metadata.labels?.[PLACEMENT_LABEL] === declared.placement.metadata.name,
          );
          for (const { resource } of made) {
            crsChecked++;
            const ref = resource.spec.clusterProfileRef!;
            const cluster = INVENTORY.clusters!.find(
              (c) => c.namespace === ref.namespace && c.name === ref.name,
            );
            const expected = overrides
              .filter((override) =>
                override.clusters
                  ? override.clusters.some((c) => c.namespace === ref.namespace && c.name === ref.name)
                  : cluster !== undefined && matchesTerm(override.clusterSelector!, cluster),
              )
              .reduce<unknown>((spec, override) => oracleMerge(spec, override.patch), template.spec);
            const schemaValid = FleetDocumentSchema.safeParse(resource).success;
            if (
              canonical({ ...(expected as object), clusterProfileRef: ref }) !== canonical(resource.spec) ||
              !schemaValid
            ) {
              crsDiffering++;
              tally.fail(
                index,
                testCase,
                `${resource.metadata.name} differs from its overrides applied in order`,
              );
            }
          }
        }

        const steps = decideApplies(sync.model.resources, sourceAt("2".repeat(40)), hub);
        const status = renderStatusSummary({
          resources: hub,
          sync: {
            source: sourceAt("2".repeat(40)),
            resources: steps.map((step) => {
              const { object: _object, ...outcome } = step as ApplyStep & { object?: KubeObject };
              return outcome;
            }),
            prune,
            diagnostics: sync.model.diagnostics,
            failedFiles: sync.model.files.filter((f) => f.status === "failed"),
            placements: { selections: sync.selections, departures: departures.departures },
          },
        });
        const size = status.reduce((sum, file) => sum + file.content.length, 0);
        if (size > 1024 * 1024) {
          unboundedStatus++;
          tally.fail(index, testCase, `status files of ${size} bytes`);
        }
      });
    }
    console.log(
      `placement corpus (seed ${SEED + 1}): ${tally.summary()}, ${unboundedStatus} unbounded status files, ` +
        `${crsChecked} CRs checked against their overrides, ${crsDiffering} differing`,
    );
    expect(tally.failures.slice(0, 20)).toEqual([]);
    expect(corpus.length).toBeGreaterThanOrEqual(700);
    expect(crsChecked).toBeGreaterThan(250);
  }, 180_000);

  it("rollout policies: a policy that fails in any way releases no change", async () => {
    const stage = rolloutStage();
    const hub = hubAt("1.21");
    const corpus = generateRolloutCorpus();
    const tally = new Tally();
    let brokenPolicies = 0;
    let released = 0;
    for (const [index, testCase] of corpus.entries()) {
      await tally.run(index, testCase, async () => {
        const model = buildFleetModel(testCase.files, { defaultNamespace: NS });
        tally.checkModel(index, testCase, model);
        const policyFile = testCase.files.at(-1)!.path;
        if (model.files.find((f) => f.path === policyFile)?.status !== "failed") return;
        brokenPolicies++;
        const gated = await gatedActions(stage, model, hub);
        const through = gated.filter((action) => action !== "waiting");
        if (
          through.length > 0 ||
          model.rollout.policy !== undefined ||
          !model.rollout.failedPaths.includes(policyFile)
        ) {
          released++;
          tally.fail(index, testCase, `the broken policy let ${through.length} changes through`);
        }
      });
    }
    stage.stop();
    console.log(
      `rollout corpus (seed ${SEED + 2}): ${tally.summary()}, ${brokenPolicies} broken policies, ${released} that released changes`,
    );
    expect(tally.failures.slice(0, 20)).toEqual([]);
    expect(corpus.length).toBeGreaterThanOrEqual(400);
    expect(brokenPolicies).toBeGreaterThan(300);
  }, 180_000);
});

// Only a file that is recognisably a rollout policy may hold the whole fleet: a broken placement or
// per-cluster file holds what it declares, and the valid policy beside it stays in effect for the rest.

/** The kind of a placement and of a per-cluster CR lost, emptied, mistyped or with one byte replaced. */
function kindMutations(random: Chooser): Case[] {
  const cases: Case[] = [];
  for (const [path, text, kind, neighbours] of [
    [PLACEMENT_PATH, PLACEMENT, "KnativeServingPlacement", PLACEMENT_NEIGHBOURS],
    [PATHS[0]!, RICH_SERVING, "KnativeServing", PATHS.slice(1).map((p) => ({ path: p, text: BASE[p]! }))],
  ] as const) {
    const replaced = (to: string) => text.replace(`kind: ${kind}\n`, to);
    const variants = [
      "",
      "kind:\n",
      'kind: ""\n',
      "kind: 42\n",
      "kind: [KnativeRollout]\n",
      "kind: {a: 1}\n",
      `kind: ${kind.toLowerCase()}x\n`,
      `kind: Knative${kind.slice(7).split("").reverse().join("")}\n`,
    ].map(replaced);
    for (let i = 0; i < kind.length; i++) {
      const byte = random.int(256);
      variants.push(
        replaced(`kind: "${kind.slice(0, i)}\\x${byte.toString(16).padStart(2, "0")}${kind.slice(i + 1)}"\n`),
      );
      const bytes = utf8(text);
      bytes[text.indexOf(`kind: ${kind}`) + 6 + i] = byte;
      cases.push({ family: "kind bytes", files: [...neighbours, decodeFleetFile(path, bytes)] });
    }
    for (const variant of variants)
      cases.push({ family: "kinds", files: [...neighbours, { path, text: variant }] });
  }
  return cases;
}

describe("a broken placement or per-cluster file beside a valid rollout policy", () => {
  it("leaves the policy in effect: no mutation of them is taken for a broken policy", () => {
    const policy: FleetFile = { path: ROLLOUT_PATH, text: ROLLOUT };
    const corpus = [
      ...generateCorpus(),
      ...generatePlacementCorpus(),
      ...kindMutations(chooser(seededRandom(SEED + 3))),
    ];
    const heldBy: string[] = [];
    let failedFiles = 0;
    for (const [index, testCase] of corpus.entries()) {
      const model = buildFleetModel([...testCase.files, policy], { defaultNamespace: NS });
      failedFiles += model.files.filter((file) => file.status === "failed").length;
      if (model.rollout.policy === undefined || model.rollout.failedPaths.length > 0)
        heldBy.push(`case ${index} (${testCase.family}): ${model.rollout.failedPaths.join(", ")}`);
    }
    console.log(
      `${corpus.length} mutations of placements and per-cluster files, ${failedFiles} failed files: ${heldBy.length} held the fleet`,
    );
    expect(heldBy).toEqual([]);
    expect(corpus.length).toBeGreaterThan(1700);
    expect(failedFiles).toBeGreaterThan(1200);
  }, 120_000);
});
