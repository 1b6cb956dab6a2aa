import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { FleetDocumentSchema } from "../../../src/fleet/document-schema.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { decideApplies } from "../../../src/mirror/decide.ts";
import { expandPlacements } from "../../../src/placement/expand.ts";
import { sourceAt } from "../mirror/support.ts";
import { cluster, inventory } from "../placement/support.ts";

// One set of rules for every document kind: a per-cluster CR, a placement (and the CRs it expands into) and
// a rollout policy take names, metadata and cluster references from one schema, so each rule below gives
// the same message at the same field in all three.

const NS = "knative-fleet";
type Kind = "cr" | "placement" | "rollout";
const KINDS: Kind[] = ["cr", "placement", "rollout"];
const PATH = "clusters/doc.yaml";

interface Shape {
  metadata?: Record<string, unknown>;
  /** The ClusterProfile the document names (its CR, its placement list, its wave). */
  cluster?: Record<string, unknown>;
}

function documentOf(kind: Kind, shape: Shape = {}): string {
  const metadata = { name: "doc", ...shape.metadata };
  const ref = shape.cluster ?? { namespace: "fleet-system", name: "spoke-1" };
  switch (kind) {
    case "cr":
      return stringify({
        apiVersion: "operator.knative.dev/v1beta1",
        kind: "KnativeServing",
        metadata,
        spec: { clusterProfileRef: ref },
      });
    case "placement":
      return stringify({
        apiVersion: "fleet.knative.dev/v1alpha1",
        kind: "KnativeServingPlacement",
        metadata,
        spec: { clusterProfiles: [ref], template: { spec: {} } },
      });
    case "rollout":
      return stringify({
        apiVersion: "fleet.knative.dev/v1alpha1",
        kind: "KnativeRollout",
        metadata,
        spec: { waves: [{ name: "canary", clusterProfiles: [ref] }] },
      });
  }
}

const errorsOf = (kind: Kind, shape: Shape) =>
  buildFleetModel([{ path: PATH, text: documentOf(kind, shape) }], { defaultNamespace: NS }).diagnostics.map(
    (d) => `${d.field}: ${d.message}`,
  );

/** The field of the cluster reference in each kind. */
const REF_FIELD: Record<Kind, string> = {
  cr: "spec.clusterProfileRef",
  placement: "spec.clusterProfiles[0]",
  rollout: "spec.waves[0].clusterProfiles[0]",
};

describe("one set of rules for every document kind", () => {
  it("the documents as written are valid in every kind", () => {
    for (const kind of KINDS) expect(errorsOf(kind, {}), kind).toEqual([]);
  });

  it("fleet.knative.dev/prune must be exactly 'disabled'", () => {
    for (const kind of KINDS) {
      expect(
        errorsOf(kind, { metadata: { annotations: { "fleet.knative.dev/prune": "Disabled" } } }),
        kind,
      ).toEqual([
        'metadata.annotations["fleet.knative.dev/prune"]: must be "disabled"; remove the annotation to allow pruning',
      ]);
    }
  });

  it("fleet.knative.dev/drift is report or correct, and a misspelling names both", () => {
    for (const kind of KINDS) {
      for (const value of ["report", "correct"]) {
        expect(errorsOf(kind, { metadata: { annotations: { "fleet.knative.dev/drift": value } } })).toEqual(
          [],
        );
      }
      expect(
        errorsOf(kind, { metadata: { annotations: { "fleet.knative.dev/drift": "Report" } } }),
        kind,
      ).toEqual([
        'metadata.annotations["fleet.knative.dev/drift"]: must be "correct" or "report": "report" leaves changes made on the cluster in place and reports them, "correct" (the default) puts back what Git wants',
      ]);
    }
  });

  it("fleet.knative.dev/abandon-cleanup cannot come from a fleet file, whatever its value", () => {
    for (const kind of KINDS) {
      for (const value of ["true", "false", ""]) {
        expect(
          errorsOf(kind, { metadata: { annotations: { "fleet.knative.dev/abandon-cleanup": value } } }),
          kind,
        ).toEqual([
          'metadata.annotations["fleet.knative.dev/abandon-cleanup"]: cannot come from a fleet file (a push could make a removal leave the cluster as it is); a hub operator sets it on the hub CR',
        ]);
      }
    }
  });

  it("a ClusterProfile is named by a DNS-1123 subdomain in a namespace that is a DNS-1123 label", () => {
    for (const kind of KINDS) {
      expect(errorsOf(kind, { cluster: { namespace: "fleet-system", name: "../Etc" } }), kind).toEqual([
        `${REF_FIELD[kind]}.name: must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`,
      ]);
      expect(errorsOf(kind, { cluster: { namespace: "Fleet_System", name: "a" } }), kind).toEqual([
        `${REF_FIELD[kind]}.namespace: must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`,
      ]);
    }
  });

  it("names are DNS-1123 labels, labels and annotations have the keys and values the API server accepts", () => {
    for (const kind of KINDS) {
      expect(errorsOf(kind, { metadata: { name: "My Policy" } }), kind).toEqual([
        "metadata.name: must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit",
      ]);
      expect(errorsOf(kind, { metadata: { labels: { team: "platform team" } } }), kind).toEqual([
        "metadata.labels.team: a label value is empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
      ]);
      expect(errorsOf(kind, { metadata: { annotations: { "bad key!": "x" } } }), kind).toEqual([
        `metadata.annotations["bad key!"]: label key name "bad key!" must be 1-63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`,
      ]);
      expect(errorsOf(kind, { metadata: { annotations: { big: "x".repeat(256 * 1024) } } })[0], kind).toMatch(
        /^metadata\.annotations: the annotations take 262147 bytes; at most 253952 fit/,
      );
    }
  });

  it("a file the mirror would refuse at sync time is refused at the file, so it never blocks the fleet's prunes", () => {
    for (const kind of ["cr", "placement"] as const) {
      const model = buildFleetModel(
        [
          {
            path: PATH,
            text: documentOf(kind, {
              metadata: { annotations: { "fleet.knative.dev/abandon-cleanup": "true" } },
            }),
          },
          {
            path: "clusters/other.yaml",
            text: documentOf("cr", {
              metadata: { name: "other" },
              cluster: { namespace: "fleet-system", name: "spoke-2" },
            }),
          },
        ],
        { defaultNamespace: NS },
      );
      expect(model.files.map((f) => [f.path, f.status])).toEqual([
        [PATH, "failed"],
        ["clusters/other.yaml", "valid"],
      ]);
      const expanded = expandPlacements(model.placements, inventory([cluster("spoke-1")])).resources;
      const steps = decideApplies([...model.resources, ...expanded], sourceAt("1".repeat(40)), []);
      expect(steps.filter((step) => step.action === "refused")).toEqual([]);
    }
  });

  it("the CRs a placement expands into pass the per-cluster file's schema", () => {
    const model = buildFleetModel(
      [
        {
          path: PATH,
          text: documentOf("placement", {
            metadata: {
              labels: { team: "platform" },
              annotations: { "fleet.knative.dev/prune": "disabled", "example.com/note": "x" },
            },
          }),
        },
      ],
      { defaultNamespace: NS },
    );
    const expanded = expandPlacements(model.placements, inventory([cluster("spoke-1")])).resources;
    expect(expanded).toHaveLength(1);
    for (const { resource } of expanded) expect(FleetDocumentSchema.safeParse(resource).success).toBe(true);
  });
});
