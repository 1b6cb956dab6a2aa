import { describe, expect, it } from "vitest";
import { SOURCE_CLUSTER_ANNOTATION } from "../../../src/api/labels.ts";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { withPlacements } from "../../../src/placement/combine.ts";
import { expandPlacements } from "../../../src/placement/expand.ts";
import { inventoryClusterOf, inventoryDecisionOf } from "../../../src/placement/inventory.ts";
import { cluster, inventory, model, PROFILES, placementFile, servingFile } from "./support.ts";

const FLEET = [
  cluster("eu-1", { env: "prod", tier: "gold" }, { location: "eu-west", nodes: "12" }),
  cluster("eu-2", { env: "staging" }, { location: "eu-north", nodes: "3" }),
  cluster("us-1", { env: "prod" }, { location: "us-east", nodes: "40" }),
  cluster("odd", { env: "prod" }, { location: "", nodes: "12 nodes" }),
];

const PATH = "clusters/placements/serving.yaml";

function expand(text: string, clusters = FLEET, options = {}) {
  const parsed = model({ [PATH]: text });
  expect(parsed.diagnostics.map(formatDiagnostic)).toEqual([]);
  return expandPlacements(parsed.placements, inventory(clusters), options);
}

/** A PlacementDecision as the hub holds it, read as selection sees it. */
const decision = (name: string, key: string | undefined, clusters: object[], namespace = PROFILES) =>
  inventoryDecisionOf({
    apiVersion: "multicluster.x-k8s.io/v1alpha1",
    kind: "PlacementDecision",
    metadata: {
      name,
      namespace,
      ...(key ? { labels: { "multicluster.x-k8s.io/decision-key": key } } : {}),
    },
    decisions: clusters,
  } as never)!;
const chose = (name: string, namespace?: string) => ({ clusterProfileRef: { name, namespace } });

const selectedNames = (text: string, clusters = FLEET) =>
  expand(text, clusters).selections[0]!.clusters!.map((c) => c.name);

describe("selection", () => {
  it("ORs the terms and ANDs a term's label and property selectors", () => {
    const text = placementFile(
      "serving",
      `  clusterSelectorTerms:
  - labelSelector:
      matchLabels: { env: prod }
    propertySelector:
      matchExpressions:
      - { name: location, operator: In, values: [eu-west, eu-north] }
  - labelSelector:
      matchExpressions:
      - { key: env, operator: In, values: [staging] }`,
    );
    expect(selectedNames(text)).toEqual(["eu-1", "eu-2"]);
  });

  it("follows apimachinery: NotIn holds for an absent label, DoesNotExist/Exists read the key only", () => {
    const sel = (expr: string) =>
      selectedNames(
        placementFile(
          "p",
          `  clusterSelectorTerms:\n  - labelSelector:\n      matchExpressions:\n      - ${expr}`,
        ),
      );
    expect(sel("{ key: tier, operator: NotIn, values: [gold] }")).toEqual(["eu-2", "odd", "us-1"]);
    expect(sel("{ key: tier, operator: Exists }")).toEqual(["eu-1"]);
    expect(sel("{ key: tier, operator: DoesNotExist }")).toEqual(["eu-2", "odd", "us-1"]);
  });

  it("compares properties as strings, Gt/Lt as decimals; an odd value never satisfies Gt/Lt", () => {
    const sel = (expr: string) =>
      selectedNames(
        placementFile(
          "p",
          `  clusterSelectorTerms:\n  - propertySelector:\n      matchExpressions:\n      - ${expr}`,
        ),
      );
    expect(sel("{ name: nodes, operator: Gt, values: ['10'] }")).toEqual(["eu-1", "us-1"]);
    expect(sel("{ name: nodes, operator: Lt, values: ['10.5'] }")).toEqual(["eu-2"]);
    // An empty property value exists and is "" (In [""] is not expressible: values must be non-empty).
    expect(sel("{ name: location, operator: Exists }")).toEqual(["eu-1", "eu-2", "odd", "us-1"]);
    expect(sel("{ name: location, operator: NotIn, values: [eu-west] }")).toEqual(["eu-2", "odd", "us-1"]);
    expect(sel("{ name: missing, operator: DoesNotExist }")).toHaveLength(4);
  });

  it("labelSelector: {} selects every cluster; the explicit list adds clusters not yet in the inventory", () => {
    expect(selectedNames(placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: {}"))).toHaveLength(
      4,
    );
    const listed = expand(
      placementFile("p", `  clusterProfiles:\n  - { namespace: ${PROFILES}, name: future-1 }`),
    );
    expect(listed.selections[0]!.clusters!.map((c) => [c.name, c.via])).toEqual([["future-1", ["list"]]]);
  });

  it("only selects ClusterProfiles in the allowed namespaces; a listed one elsewhere is an error at its line", () => {
    const other = cluster("eu-9", { env: "prod" }, {}, "elsewhere");
    const result = expand(
      placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }"),
      [...FLEET, other],
      { allowedNamespaces: [PROFILES] },
    );
    expect(result.selections[0]!.clusters!.map((c) => c.name)).toEqual(["eu-1", "odd", "us-1"]);
    const listed = expand(
      placementFile("p", "  clusterProfiles:\n  - { namespace: elsewhere, name: eu-9 }"),
      FLEET,
      { allowedNamespaces: [PROFILES] },
    );
    expect(listed.diagnostics.map(formatDiagnostic)).toEqual([
      `${PATH}:7:7 spec.clusterProfiles[0].namespace: ClusterProfiles in namespace elsewhere may not be targeted (allowedClusterProfileNamespaces)`,
    ]);
    expect(listed.resources).toEqual([]);
  });

  it("reads every slice of a PlacementDecision by its decision-key; refs without a namespace are the slice's", () => {
    const decisions = [
      decision("d-1", "serving", [{ clusterProfileRef: { name: "eu-1" } }, { bogus: true }]),
      decision("d-2", "serving", [{ clusterProfileRef: { name: "us-1", namespace: PROFILES } }]),
      decision("other", "other", [{ clusterProfileRef: { name: "eu-2" } }]),
    ];
    const byKey = model({
      [PATH]: placementFile("p", `  placementDecisionRef: { namespace: ${PROFILES}, decisionKey: serving }`),
    });
    const byName = model({
      [PATH]: placementFile("p", `  placementDecisionRef: { namespace: ${PROFILES}, name: d-2 }`),
    });
    for (const parsed of [byKey, byName]) {
      const result = expandPlacements(parsed.placements, inventory(FLEET, decisions));
      expect(result.selections[0]!.clusters!.map((c) => [c.name, c.via])).toEqual([
        ["eu-1", ["decision"]],
        ["us-1", ["decision"]],
      ]);
    }
  });

  it("holds a placement whose inputs the hub could not tell, instead of expanding it from nothing", () => {
    const parsed = model({
      [PATH]: placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: {}"),
    });
    const result = expandPlacements(parsed.placements, {
      clusters: undefined,
      decisions: [],
      unknownReason: "watch down",
    });
    expect(result.resources).toEqual([]);
    expect(result.diagnostics).toEqual([]);
    expect(result.selections[0]!.pending).toBe("the hub's ClusterProfiles are not known yet: watch down");
  });

  it("reads hostile ClusterProfile objects without failing: non-string labels and properties are ignored", () => {
    const profile = inventoryClusterOf({
      apiVersion: "multicluster.x-k8s.io/v1alpha1",
      kind: "ClusterProfile",
      metadata: { name: "x", namespace: PROFILES, labels: { a: 1, b: "ok" } as never },
      status: {
        properties: [
          { name: "n", value: 5 },
          null,
          { name: "n", value: "first" },
          { name: "n", value: "second" },
        ],
      },
    } as never);
    expect(profile?.labels).toEqual({ b: "ok" });
    expect([...profile!.properties]).toEqual([["n", "first"]]);
  });
});

describe("a placement's PlacementDecision", () => {
  // One hub's decisions: another namespace holds a PlacementDecision of the same name and decision-key.
  const DECISIONS = [
    decision("d-2", "serving", [chose("eu-2", PROFILES)], "elsewhere"),
    decision("d-1", "first", [chose("eu-1")]),
    decision("d-2", "serving", [chose("us-1")]),
    decision("solo", undefined, [chose("odd")]),
  ];
  const decided = (ref: string, decisions = DECISIONS, options = {}) => {
    const parsed = model({ [PATH]: placementFile("p", `  placementDecisionRef: { ${ref} }`) });
    expect(parsed.diagnostics.map(formatDiagnostic)).toEqual([]);
    return expandPlacements(parsed.placements, inventory(FLEET, decisions), options);
  };
  const names = (result: ReturnType<typeof decided>) => result.selections[0]!.clusters!.map((c) => c.name);

  it("is read only in its own namespace, by its own name or decision-key", () => {
    expect(names(decided(`namespace: ${PROFILES}, name: d-2`))).toEqual(["us-1"]);
    expect(names(decided(`namespace: ${PROFILES}, name: d-1`))).toEqual(["eu-1"]);
    expect(names(decided(`namespace: ${PROFILES}, decisionKey: serving`))).toEqual(["us-1"]);
    expect(names(decided(`namespace: ${PROFILES}, name: d-9`))).toEqual([]);
  });

  it("named without a decision-key label is read alone", () => {
    expect(names(decided(`namespace: ${PROFILES}, name: solo`))).toEqual(["odd"]);
  });

  it("in a namespace outside allowedClusterProfileNamespaces is refused at the field, and nothing is made", () => {
    const result = decided("namespace: elsewhere, name: d-2", DECISIONS, { allowedNamespaces: [PROFILES] });
    expect(result.diagnostics.map(formatDiagnostic)).toEqual([
      `${PATH}:6:27 spec.placementDecisionRef.namespace: PlacementDecisions in namespace elsewhere are not read (allowedClusterProfileNamespaces)`,
    ]);
    expect(result.resources).toEqual([]);
    expect(result.selections[0]!.clusters).toBeUndefined();
  });

  it("may choose clusters outside the allowed namespaces: those are skipped, with the reason, the rest made", () => {
    const decisions = [decision("d", undefined, [chose("eu-1"), chose("eu-9", "elsewhere")])];
    const result = decided(`namespace: ${PROFILES}, name: d`, decisions, { allowedNamespaces: [PROFILES] });
    expect(result.diagnostics).toEqual([]);
    expect(names(result)).toEqual(["eu-1"]);
    expect(result.selections[0]!.skipped).toEqual([
      {
        cluster: "elsewhere/eu-9",
        reason: "chosen by the PlacementDecision, but namespace elsewhere may not be targeted",
      },
    ]);
    expect(result.resources.map((r) => r.resource.metadata.name)).toEqual(["p-eu-1"]);
  });

  it("not known yet holds the placement at its last state, saying why", () => {
    const parsed = model({
      [PATH]: placementFile("p", `  placementDecisionRef: { namespace: ${PROFILES}, name: d-1 }`),
    });
    for (const [unknownReason, pending] of [
      ["watch down", "the hub's PlacementDecisions are not known yet: watch down"],
      [undefined, "the hub's PlacementDecisions are not known yet"],
    ] as const) {
      const result = expandPlacements(parsed.placements, {
        clusters: FLEET,
        decisions: undefined,
        ...(unknownReason && { unknownReason }),
      });
      expect(result.selections[0]!.pending).toBe(pending);
      expect(result.selections[0]!.clusters).toBeUndefined();
      expect(result.resources).toEqual([]);
    }
  });

  it("adds its clusters to the selector's and the list's; each cluster says every way it was chosen, sorted", () => {
    const parsed = model({
      [PATH]: placementFile(
        "p",
        `  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { tier: gold } }
  clusterProfiles: [{ namespace: ${PROFILES}, name: eu-1 }, { namespace: ${PROFILES}, name: eu-2 }]
  placementDecisionRef: { namespace: ${PROFILES}, name: d-1 }`,
      ),
    });
    const result = expandPlacements(parsed.placements, inventory(FLEET, DECISIONS));
    expect(result.selections[0]!.clusters!.map((c) => [c.name, c.via])).toEqual([
      ["eu-1", ["decision", "list", "selector"]],
      ["eu-2", ["list"]],
    ]);
  });
});

describe("expansion into ordinary CRs", () => {
  it("makes one upstream-shaped CR per cluster, with its source cluster and overrides merged in order", () => {
    const text = placementFile(
      "serving",
      "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
      `  overrides:
  - clusterSelector:
      propertySelector:
        matchExpressions: [{ name: location, operator: In, values: [eu-west] }]
    patch:
      config:
        autoscaler: { enable-scale-to-zero: "false", max-scale: "10" }
  - clusters: [{ namespace: ${PROFILES}, name: eu-1 }]
    patch:
      version: "1.21"
      config:
        autoscaler: { max-scale: null }
`,
    );
    const result = expand(text);
    const byName = new Map(result.resources.map((r) => [r.resource.metadata.name, r.resource]));
    expect([...byName.keys()]).toEqual(["serving-eu-1", "serving-odd", "serving-us-1"]);
    const eu1 = byName.get("serving-eu-1")!;
    expect(eu1).toEqual({
      apiVersion: "operator.knative.dev/v1beta1",
      kind: "KnativeServing",
      metadata: {
        name: "serving-eu-1",
        namespace: "knative-fleet",
        labels: {
          "fleet.knative.dev/placement": "serving",
          "fleet.knative.dev/placement-kind": "knativeservingplacement",
        },
        annotations: { [SOURCE_CLUSTER_ANNOTATION]: `${PROFILES}/eu-1` },
      },
      spec: {
        version: "1.21",
        config: { autoscaler: { "enable-scale-to-zero": "false" } },
        clusterProfileRef: { namespace: PROFILES, name: "eu-1" },
      },
    });
    expect(byName.get("serving-us-1")!.spec).toEqual({
      version: "1.22",
      config: { autoscaler: { "enable-scale-to-zero": "true" } },
      clusterProfileRef: { namespace: PROFILES, name: "us-1" },
    });
    expect(result.selections[0]!.clusters!.find((c) => c.name === "eu-1")!.overrides).toEqual([0, 1]);
  });

  it("is deterministic: the same input gives the same CRs whatever the inventory order", () => {
    const text = placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: {}");
    expect(expand(text, [...FLEET].reverse())).toEqual(expand(text, FLEET));
  });

  it("names that would overflow 63 characters or are not DNS labels get a cut name and a hash", () => {
    const long = cluster(`c${"x".repeat(120)}.example.com`, { env: "prod" });
    const dotted = cluster("a.b", { env: "prod" });
    const dashed = cluster("a-b", { env: "prod" });
    const result = expand(
      placementFile(
        `p${"y".repeat(50)}`,
        "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
      ),
      [long, dotted, dashed],
    );
    const names = result.resources.map((r) => r.resource.metadata.name);
    expect(new Set(names).size).toBe(3);
    for (const name of names) {
      expect(name.length).toBeLessThanOrEqual(63);
      expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
  });

  it("refuses two same-named ClusterProfiles of two namespaces: their CRs would share a name", () => {
    const result = expand(placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: {}"), [
      cluster("eu-1"),
      cluster("eu-1", {}, {}, "other"),
    ]);
    expect(result.diagnostics.map(formatDiagnostic)).toEqual([
      `${PATH}:4:3 metadata.name: selects ${PROFILES}/eu-1 and other/eu-1, whose CRs would both be named p-eu-1; narrow the selection to one of them`,
    ]);
    expect(result.resources).toEqual([]);
  });
});

describe("conflicts", () => {
  const prodPlacement = (name: string) =>
    placementFile(name, "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }");

  it("two placements giving one cluster two KnativeServings fail both files at their line; none is applied", () => {
    const parsed = model({ "a.yaml": prodPlacement("a"), "b.yaml": prodPlacement("b") });
    const combined = withPlacements(parsed, expandPlacements(parsed.placements, inventory(FLEET)));
    expect(combined.resources).toEqual([]);
    expect(combined.files.map((f) => [f.path, f.status])).toEqual([
      ["a.yaml", "failed"],
      ["b.yaml", "failed"],
    ]);
    expect(combined.diagnostics.map(formatDiagnostic)).toContain(
      "a.yaml:1:1 spec.clusterProfileRef: placement a (a.yaml:1) installs KnativeServing on ClusterProfile fleet-system/eu-1, as does placement b (b.yaml:1); a cluster runs one KnativeServing, so none of them is applied (exclude the cluster from the placement, for example with a NotIn expression)",
    );
    // The failed files still declare their CRs, so the mirror keeps them at their last state.
    expect(combined.files[0]!.declares.map((d) => d.name)).toEqual(["a-eu-1", "a-odd", "a-us-1"]);
  });

  it("a placement and a per-cluster file for one cluster conflict; other files still apply", () => {
    const parsed = model({
      "p.yaml": prodPlacement("p"),
      "clusters/us-1/serving.yaml": servingFile("us-1-serving", "us-1"),
      "clusters/eu-2/serving.yaml": servingFile("eu-2-serving", "eu-2"),
    });
    const combined = withPlacements(parsed, expandPlacements(parsed.placements, inventory(FLEET)));
    expect(combined.resources.map((r) => r.resource.metadata.name)).toEqual(["eu-2-serving"]);
    expect(combined.diagnostics.map((d) => `${d.path}:${d.line}`).sort()).toEqual([
      "clusters/us-1/serving.yaml:1",
      "p.yaml:1",
    ]);
  });

  it("a Serving and an Eventing placement on one cluster do not conflict", () => {
    const parsed = model({
      "s.yaml": prodPlacement("s"),
      "e.yaml": placementFile(
        "e",
        "  clusterProfiles: [{ namespace: fleet-system, name: eu-1 }]",
        "",
        "KnativeEventingPlacement",
      ),
    });
    const combined = withPlacements(parsed, expandPlacements(parsed.placements, inventory(FLEET)));
    expect(combined.diagnostics).toEqual([]);
    expect(combined.resources).toHaveLength(4);
  });
});

describe("the worked example in fleet-example/placements", () => {
  it("is valid and selects the European production and the staging clusters, each override on its own", async () => {
    const { readFile } = await import("node:fs/promises");
    const { join } = await import("node:path");
    const { repoRoot } = await import("../../support/shared.ts");
    const path = "fleet-example/placements/knative-serving.yaml";
    const parsed = model({ [path]: await readFile(join(repoRoot, path), "utf8") });
    expect(parsed.diagnostics.map(formatDiagnostic)).toEqual([]);
    const result = expandPlacements(
      parsed.placements,
      inventory([
        cluster("spoke-1", { env: "prod" }, { location: "eu-west" }),
        cluster("spoke-2", { env: "prod" }, { location: "us-east" }),
        cluster("spoke-3", { env: "staging" }),
        cluster("spoke-4", { env: "dev" }, { location: "eu-west" }),
      ]),
    );
    const specs = Object.fromEntries(
      result.resources.map((r) => [r.resource.metadata.name, r.resource.spec.config]),
    );
    expect(Object.keys(specs)).toEqual(["serving-spoke-1", "serving-spoke-3"]);
    expect(specs["serving-spoke-1"]).toMatchObject({
      autoscaler: { "enable-scale-to-zero": "true" },
      domain: { "spoke-1.example.com": "" },
    });
    expect(specs["serving-spoke-3"]).toMatchObject({ autoscaler: { "enable-scale-to-zero": "false" } });
    expect(specs["serving-spoke-3"]).not.toHaveProperty("domain");
  });
});

describe("an Eventing placement that names one event source", () => {
  it("gives each cluster's CR upstream's complete form, the sources it left out disabled", () => {
    const text = placementFile(
      "eventing",
      "  clusterProfiles: [{ namespace: fleet-system, name: eu-1 }]",
      "      source:\n        kafka: { enabled: true }\n",
      "KnativeEventingPlacement",
    );
    const [cr] = expand(text).resources;
    expect((cr!.resource.spec as { source?: unknown }).source).toEqual({
      ceph: { enabled: false },
      github: { enabled: false },
      gitlab: { enabled: false },
      kafka: { enabled: true },
      rabbitmq: { enabled: false },
      redis: { enabled: false },
    });
  });
});
