import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { mergePatch } from "../../../src/fleet/merge-patch.ts";
import { placementCrName } from "../../../src/placement/naming.ts";
import { model, placementFile } from "./support.ts";

const PATH = "clusters/placements/p.yaml";
const errors = (text: string) => model({ [PATH]: text }).diagnostics.map(formatDiagnostic);

describe("placement files are validated offline with file:line:field", () => {
  it("accepts a placement beside per-cluster files and keeps it out of the CR list until expanded", () => {
    const parsed = model({
      [PATH]: placementFile(
        "p",
        "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
      ),
    });
    expect(parsed.diagnostics).toEqual([]);
    expect(parsed.resources).toEqual([]);
    expect(parsed.placements.map((p) => [p.placement.metadata.namespace, p.placement.metadata.name])).toEqual(
      [["knative-fleet", "p"]],
    );
  });

  it("reports an unknown selector operator at the operator", () => {
    expect(
      errors(
        placementFile(
          "p",
          "  clusterSelectorTerms:\n  - labelSelector:\n      matchExpressions:\n      - { key: env, operator: Equals, values: [a] }",
        ),
      ),
    ).toEqual([
      `${PATH}:9:31 spec.clusterSelectorTerms[0].labelSelector.matchExpressions[0].operator: must be one of In, NotIn, Exists, DoesNotExist`,
    ]);
  });

  it("checks the value count each operator takes and the label syntax", () => {
    const text = placementFile(
      "p",
      `  clusterSelectorTerms:
  - labelSelector:
      matchExpressions:
      - { key: env, operator: In }
      - { key: "bad key!", operator: Exists, values: [x] }
      matchLabels: { env: "${"v".repeat(64)}" }
    propertySelector:
      matchExpressions:
      - { name: nodes, operator: Gt, values: [many] }`,
    );
    const found = errors(text).join("\n");
    expect(found).toContain("matchExpressions[0].values: operator In needs at least one value");
    expect(found).toContain('label key name "bad key!"');
    expect(found).toContain("matchExpressions[1].values: operator Exists takes no values");
    expect(found).toContain("a label value is at most 63 characters");
    expect(found).toContain("operator Gt needs exactly one value, a decimal number");
  });

  it("refuses an empty term, a placement that selects nothing, and a template naming a cluster", () => {
    expect(errors(placementFile("p", "  clusterSelectorTerms:\n  - {}"))).toEqual([
      `${PATH}:7:5 spec.clusterSelectorTerms[0]: a term needs a labelSelector or a propertySelector; labelSelector: {} selects every cluster`,
    ]);
    expect(errors(placementFile("p", "  overrides: []"))[0]).toContain(
      "a placement needs at least one of clusterSelectorTerms, clusterProfiles, placementDecisionRef",
    );
    const withRef = placementFile("p", "  clusterProfiles: [{ namespace: a, name: b }]").replace(
      '      version: "1.22"',
      '      version: "1.22"\n      clusterProfileRef: { namespace: a, name: b }',
    );
    expect(errors(withRef)).toEqual([
      `${PATH}:10:7 spec.template.spec.clusterProfileRef: a placement's template names no cluster: the placement selects them (clusterSelectorTerms, clusterProfiles, placementDecisionRef)`,
    ]);
  });

  it("validates the template with the CR schema (a typo, a YAML 1.1 boolean) and bounds huge selectors", () => {
    const typo = placementFile("p", "  clusterProfiles: [{ namespace: a, name: b }]").replace(
      "      config:",
      "      registy: {}\n      config:",
    );
    expect(errors(typo)).toEqual([
      `${PATH}:10:7 spec.template.spec.registy: unrecognized key; did you mean registry?`,
    ]);
    const yes = placementFile("p", "  clusterProfiles: [{ namespace: a, name: b }]").replace('"true"', "yes");
    expect(errors(yes)[0]).toContain('quote it ("yes")');
    const terms = Array.from({ length: 40 }, (_, i) => `  - labelSelector: { matchLabels: { k${i}: v } }`);
    expect(errors(placementFile("p", `  clusterSelectorTerms:\n${terms.join("\n")}`))[0]).toMatch(
      /spec\.clusterSelectorTerms: .*32/,
    );
    const values = Array.from({ length: 300 }, (_, i) => `v${i}`).join(", ");
    expect(
      errors(
        placementFile(
          "p",
          `  clusterSelectorTerms:\n  - labelSelector:\n      matchExpressions:\n      - { key: k, operator: In, values: [${values}] }`,
        ),
      )[0],
    ).toMatch(/values: .*256/);
  });

  it("checks every override merged into the template, at the patch field it broke", () => {
    const text = placementFile(
      "p",
      "  clusterProfiles: [{ namespace: a, name: b }]",
      `  overrides:
  - clusters: [{ namespace: a, name: b }]
    patch:
      version: 1.22
  - clusterSelector: { labelSelector: {} }
    patch:
      high-availability: { replicas: "two" }
`,
    );
    expect(errors(text)).toEqual([
      `${PATH}:16:16 spec.overrides[0].patch.version: expected string, got number: YAML 1.1 reads the unquoted 1.22 as a number; quote it ("1.22")`,
      `${PATH}:19:38 spec.overrides[1].patch.high-availability.replicas: expected number, got string`,
    ]);
    const both = placementFile(
      "p",
      "  clusterProfiles: [{ namespace: a, name: b }]",
      "  overrides:\n  - clusters: [{ namespace: a, name: b }]\n    clusterSelector: { labelSelector: {} }\n    patch: {}\n",
    );
    expect(errors(both)).toEqual([
      `${PATH}:14:5 spec.overrides[0]: an override applies to clusters (a list) or to a clusterSelector (one term), exactly one of them`,
    ]);
  });

  it("a placement kind with the wrong apiVersion, or a foreign kind in the placement group, is named", () => {
    const wrongVersion = placementFile("p", "  clusterProfiles: [{ namespace: a, name: b }]").replace(
      "fleet.knative.dev/v1alpha1",
      "fleet.knative.dev/v1",
    );
    expect(errors(wrongVersion)[0]).toContain("apiVersion");
    const foreign = placementFile("p", "  clusterProfiles: [{ namespace: a, name: b }]").replace(
      "KnativeServingPlacement",
      "KnativeServing",
    );
    expect(errors(foreign)).toEqual([
      `${PATH}:2:7 kind: "KnativeServing" is not a placement kind; fleet.knative.dev/v1alpha1 holds KnativeServingPlacement or KnativeEventingPlacement`,
    ]);
  });
});

describe("merge patch (RFC 7386)", () => {
  it("merges objects, deletes on null, replaces arrays and scalars, and never mutates its inputs", () => {
    const target = { a: { b: 1, c: [1, 2] }, d: "x" };
    const patch = { a: { b: null, c: [3] }, e: { f: null, g: 1 } };
    expect(mergePatch(target, patch)).toEqual({ a: { c: [3] }, d: "x", e: { g: 1 } });
    expect(target).toEqual({ a: { b: 1, c: [1, 2] }, d: "x" });
    // RFC 7386 appendix A cases.
    expect(mergePatch({ a: "b" }, { a: "c" })).toEqual({ a: "c" });
    expect(mergePatch({ a: [{ b: "c" }] }, { a: [1] })).toEqual({ a: [1] });
    expect(mergePatch(["a", "b"], ["c", "d"])).toEqual(["c", "d"]);
    expect(mergePatch({ a: "foo" }, "bar")).toEqual("bar");
    expect(mergePatch({ e: null }, { a: 1 })).toEqual({ e: null, a: 1 });
    expect(mergePatch({}, { a: { bb: { ccc: null } } })).toEqual({ a: { bb: {} } });
  });

  it("keeps a hostile __proto__ key a plain key", () => {
    const patch = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
    const merged = mergePatch({}, patch) as Record<string, unknown>;
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((merged as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.hasOwn(merged, "__proto__")).toBe(true);
  });
});

describe("CR names", () => {
  it("are <placement>-<cluster> when that is a DNS label of at most 63 characters", () => {
    expect(placementCrName("serving", { namespace: "ns", name: "eu-1" })).toBe("serving-eu-1");
  });

  it("are cut with a hash of the exact pair otherwise, and stay stable", () => {
    const long = placementCrName("serving", { namespace: "ns", name: "x".repeat(100) });
    expect(long).toHaveLength(63);
    expect(long).toBe(placementCrName("serving", { namespace: "ns", name: "x".repeat(100) }));
    expect(long).not.toBe(placementCrName("serving", { namespace: "other", name: "x".repeat(100) }));
    const dotted = placementCrName("serving", { namespace: "ns", name: "prod.eu.example" });
    expect(dotted).toMatch(/^serving-prod-eu-example-[0-9a-f]{8}$/);
    expect(placementCrName("p", { namespace: "ns", name: "UPPER_case" })).toMatch(
      /^p-upper-case-[0-9a-f]{8}$/,
    );
    expect(placementCrName("p", { namespace: "ns", name: "---" })).toMatch(/^p-[0-9a-f]{8}$/);
  });
});
