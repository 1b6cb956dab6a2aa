import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { expandPlacements } from "../../../src/placement/expand.ts";
import { cluster, inventory, model, PROFILES, placementFile } from "./support.ts";

// Overrides as the format documents them: RFC 7386 merge patches applied one after the other onto the
// template (so `null` deletes a template field), `overrides` a list, and validation of exactly the spec
// expansion makes for each combination of overrides.

const PATH = "clusters/placements/serving.yaml";
const FLEET = [cluster("eu-1", { env: "prod" }), cluster("eu-2", { env: "staging" })];
const ALL = "  clusterSelectorTerms:\n  - labelSelector: {}";

function expandText(text: string) {
  const parsed = model({ [PATH]: text });
  expect(parsed.diagnostics.map(formatDiagnostic)).toEqual([]);
  return expandPlacements(parsed.placements, inventory(FLEET));
}

const specOf = (result: ReturnType<typeof expandText>, name: string) =>
  result.resources.find((r) => r.resource.metadata.name === name)?.resource.spec;

describe("override patches", () => {
  it("a null deletes the template's field on the clusters it applies to (RFC 7386)", () => {
    const result = expandText(
      placementFile(
        "serving",
        ALL,
        `  overrides:
  - clusters: [{ namespace: ${PROFILES}, name: eu-1 }]
    patch:
      config:
        autoscaler: null
`,
      ),
    );
    expect(specOf(result, "serving-eu-1")).toEqual({
      version: "1.22",
      config: {},
      clusterProfileRef: { namespace: PROFILES, name: "eu-1" },
    });
    expect(specOf(result, "serving-eu-2")).toMatchObject({
      config: { autoscaler: { "enable-scale-to-zero": "true" } },
    });
    // What plan shows as the merged spec is the same.
    const eu1 = result.selections[0]!.clusters!.find((c) => c.name === "eu-1")!;
    expect(eu1.spec).toEqual({ version: "1.22", config: {} });
  });

  it("several overrides apply in order onto the template: a later null deletes what the template set", () => {
    const result = expandText(
      placementFile(
        "serving",
        ALL,
        `  overrides:
  - clusterSelector: { labelSelector: { matchLabels: { env: prod } } }
    patch:
      high-availability: { replicas: 3 }
  - clusters: [{ namespace: ${PROFILES}, name: eu-1 }]
    patch:
      version: null
      config:
        autoscaler: { enable-scale-to-zero: null, max-scale: "5" }
`,
      ),
    );
    expect(specOf(result, "serving-eu-1")).toEqual({
      config: { autoscaler: { "max-scale": "5" } },
      "high-availability": { replicas: 3 },
      clusterProfileRef: { namespace: PROFILES, name: "eu-1" },
    });
  });

  /**
   * Two overrides, each valid alone: the first (env=prod) deletes the template's security, the second
   * (`second`) then sets a securityGuard without its required `enabled`.
   */
  const deletesThenSets = (second: string) =>
    placementFile(
      "serving",
      ALL,
      `  overrides:
  - clusterSelector: { labelSelector: { matchLabels: { env: prod } } }
    patch: { security: null }
  - ${second}
    patch: { security: { securityGuard: {} } }
`,
    ).replace(
      '      version: "1.22"\n',
      '      version: "1.22"\n      security: { securityGuard: { enabled: true } }\n',
    );
  const FIELD = "spec.overrides[1].patch.security.securityGuard.enabled";

  it("the spec a combination makes is what is validated: two overrides valid alone that together break it", () => {
    const parsed = model({ [PATH]: deletesThenSets(`clusters: [{ namespace: ${PROFILES}, name: eu-1 }]`) });
    expect(parsed.diagnostics).toEqual([]);
    const result = expandPlacements(parsed.placements, inventory(FLEET));
    expect(result.diagnostics.map(formatDiagnostic)).toEqual([
      `${PATH}:19:26 ${FIELD}: on ${PROFILES}/eu-1, where overrides 0, 1 apply in this order: required field is missing`,
    ]);
    expect(result.resources).toEqual([]);
  });

  it("a combination that breaks the spec is one diagnostic for all the clusters it applies to", () => {
    const many = Array.from({ length: 50 }, (_, i) =>
      cluster(`c${String(i).padStart(2, "0")}`, { env: "prod" }),
    );
    const parsed = model({
      [PATH]: deletesThenSets(
        "clusterSelector: { labelSelector: { matchExpressions: [{ key: env, operator: Exists }] } }",
      ),
    });
    expect(parsed.diagnostics).toEqual([]);
    const result = expandPlacements(parsed.placements, inventory(many));
    expect(result.diagnostics.map(formatDiagnostic)).toEqual([
      `${PATH}:19:26 ${FIELD}: on ${PROFILES}/c00, ${PROFILES}/c01, ${PROFILES}/c02 and 47 more, where overrides 0, 1 apply in this order: required field is missing`,
    ]);
  });
});

describe("which clusters an override applies to", () => {
  const applied = (text: string) =>
    expandText(text).selections[0]!.clusters!.map((c) => [c.name, c.overrides]);

  it("a cluster list applies to each cluster it names, matched by namespace and name", () => {
    const text = placementFile(
      "serving",
      ALL,
      `  overrides:
  - clusters: [{ namespace: ${PROFILES}, name: eu-1 }, { namespace: ${PROFILES}, name: eu-2 }]
    patch: { version: "1.21" }
  - clusters: [{ namespace: other, name: eu-1 }]
    patch: { version: "1.20" }
`,
    );
    expect(applied(text)).toEqual([
      ["eu-1", [0]],
      ["eu-2", [0]],
    ]);
  });

  it("a selector in an override needs the ClusterProfiles: unknown, the placement is held, not expanded without it", () => {
    const text = placementFile(
      "serving",
      `  clusterProfiles: [{ namespace: ${PROFILES}, name: eu-1 }]`,
      `  overrides:
  - clusterSelector: { labelSelector: { matchLabels: { env: prod } } }
    patch: { version: "1.21" }
`,
    );
    const parsed = model({ [PATH]: text });
    expect(parsed.diagnostics).toEqual([]);
    const result = expandPlacements(parsed.placements, inventory(undefined));
    expect(result.selections[0]!.pending).toBe("the hub's ClusterProfiles are not known yet");
    expect(result.resources).toEqual([]);
    // Listed clusters and listed overrides need no inventory.
    const listed = expandPlacements(
      model({
        [PATH]: text.replace(
          "clusterSelector: { labelSelector: { matchLabels: { env: prod } } }",
          `clusters: [{ namespace: ${PROFILES}, name: eu-1 }]`,
        ),
      }).placements,
      inventory(undefined),
    );
    expect(listed.selections[0]!.pending).toBeUndefined();
    expect(listed.resources.map((r) => r.resource.spec.version)).toEqual(["1.21"]);
  });
});

describe("overrides must be a list", () => {
  for (const [shape, value] of [
    [
      "a map (the '-' forgotten)",
      "\n    clusters: [{ namespace: fleet-system, name: eu-1 }]\n    patch: { version: null }",
    ],
    ["a string", " everything"],
    ["a number", " 3"],
    ["a boolean", " true"],
    ["null", " null"],
  ] as const) {
    it(`refuses ${shape} at the field`, () => {
      const parsed = model({ [PATH]: placementFile("serving", ALL, `  overrides:${value}\n`) });
      if (shape === "null") {
        // YAML null is "not set", as for every other field.
        expect(parsed.diagnostics).toEqual([]);
        return;
      }
      expect(parsed.diagnostics.map(formatDiagnostic)).toEqual([
        expect.stringMatching(new RegExp(`^${PATH}:1[45]:\\d+ spec\\.overrides: expected array, got `)),
      ]);
      expect(parsed.placements).toEqual([]);
    });
  }
});

describe("__proto__ and other Object.prototype names are plain keys", () => {
  const selects = (text: string) => {
    const parsed = model({ [PATH]: text });
    return {
      errors: parsed.diagnostics.map(formatDiagnostic),
      selected: expandPlacements(parsed.placements, inventory(FLEET)).selections.map((s) =>
        s.clusters!.map((c) => c.name),
      ),
    };
  };

  it("in matchLabels: __proto__ is a label key, which the label syntax refuses (it never selects everything)", () => {
    const { errors, selected } = selects(
      placementFile("p", "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { __proto__: prod } }"),
    );
    expect(errors).toEqual([
      expect.stringContaining(
        `spec.clusterSelectorTerms[0].labelSelector.matchLabels.__proto__: label key name "__proto__" must be`,
      ),
    ]);
    expect(selected).toEqual([]);
  });

  it("in matchLabels, written as JSON", () => {
    const text = JSON.stringify({
      apiVersion: "fleet.knative.dev/v1alpha1",
      kind: "KnativeServingPlacement",
      metadata: { name: "p" },
      spec: {
        clusterSelectorTerms: [{ labelSelector: { matchLabels: {} } }],
        template: { spec: { version: "1.22" } },
      },
    }).replace('"matchLabels":{}', '"matchLabels":{"__proto__":"prod"}');
    expect(text).toContain('"__proto__":"prod"');
    expect(selects(text).errors).toEqual([expect.stringContaining('label key name "__proto__"')]);
  });

  it("constructor and toString are label keys like any other", () => {
    const clusters = [cluster("a", { constructor: "prod" }), cluster("b", { env: "prod" })];
    const parsed = model({
      [PATH]: placementFile(
        "p",
        "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { constructor: prod } }\n  - labelSelector: { matchExpressions: [{ key: toString, operator: Exists }] }",
      ),
    });
    expect(parsed.diagnostics).toEqual([]);
    expect(
      expandPlacements(parsed.placements, inventory(clusters)).selections[0]!.clusters!.map((c) => c.name),
    ).toEqual(["a"]);
  });

  it("in an override's selector", () => {
    const { errors } = selects(
      placementFile(
        "p",
        ALL,
        "  overrides:\n  - clusterSelector: { labelSelector: { matchLabels: { __proto__: x } } }\n    patch: {}\n",
      ),
    );
    expect(errors).toEqual([expect.stringContaining('label key name "__proto__"')]);
  });

  it("at the top of a patch: an unknown spec field, reported at the patch", () => {
    const { errors } = selects(
      placementFile(
        "p",
        ALL,
        "  overrides:\n  - clusterSelector: { labelSelector: {} }\n    patch: { __proto__: { version: x } }\n",
      ),
    );
    expect(errors).toEqual([`${PATH}:16:14 spec.overrides[0].patch.__proto__: unrecognized key`]);
  });

  it("inside a patch and the template: a ConfigMap key, kept as data; a null in a patch deletes it", () => {
    const text = placementFile(
      "p",
      ALL,
      `  overrides:
  - clusters: [{ namespace: ${PROFILES}, name: eu-1 }]
    patch: { config: { autoscaler: { __proto__: null, constructor: "2" } } }
  - clusters: [{ namespace: ${PROFILES}, name: eu-2 }]
    patch: { config: { network: { __proto__: "3" } } }
`,
    ).replace('enable-scale-to-zero: "true"', 'enable-scale-to-zero: "true"\n          __proto__: "1"');
    const result = expandText(text);
    const eu1 = specOf(result, "p-eu-1") as { config: Record<string, Record<string, string>> };
    const eu2 = specOf(result, "p-eu-2") as { config: Record<string, Record<string, string>> };
    expect(Object.entries(eu1.config.autoscaler!)).toEqual([
      ["enable-scale-to-zero", "true"],
      ["constructor", "2"],
    ]);
    expect(Object.entries(eu2.config.autoscaler!)).toEqual([
      ["enable-scale-to-zero", "true"],
      ["__proto__", "1"],
    ]);
    expect(Object.entries(eu2.config.network!)).toEqual([["__proto__", "3"]]);
    expect(Object.getPrototypeOf(eu2.config.network)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>)["3"]).toBeUndefined();
  });

  it("in a placement's labels and annotations: refused by the label and annotation key syntax", () => {
    const text = placementFile("p", ALL).replace(
      "  name: p\n",
      "  name: p\n  labels: { __proto__: x }\n  annotations: { __proto__: y }\n",
    );
    expect(selects(text).errors).toEqual([
      expect.stringContaining("metadata.labels.__proto__: "),
      expect.stringContaining("metadata.annotations.__proto__: "),
    ]);
  });
});
