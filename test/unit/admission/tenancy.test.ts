import { describe, expect, it } from "vitest";
import { crAdmission, TenancySchema } from "../../../src/admission/tenancy.ts";
import type { KubeObject } from "../../../src/kube/object.ts";

const cr = (namespace: string, mirrored: boolean): KubeObject => ({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: {
    name: "serving",
    namespace,
    ...(mirrored
      ? {
          labels: { "app.kubernetes.io/managed-by": "knative-fleet" },
          annotations: { "fleet.knative.dev/source-repository": "https://git.example/fleet.git" },
        }
      : {}),
  },
});

describe("crAdmission", () => {
  const safe = crAdmission(TenancySchema.parse({}), "knative-fleet");

  it("by default reconciles only mirrored CRs in the fleet's own namespace", () => {
    expect(safe(cr("knative-fleet", true))).toEqual({ admitted: true });
    expect(safe(cr("team-b", true))).toEqual({
      admitted: false,
      why: "its namespace team-b is not one whose CRs knative-fleet reconciles (tenancy.crNamespaces: knative-fleet)",
    });
    expect(safe(cr("knative-fleet", false))).toEqual({
      admitted: false,
      why: "it was not created from the fleet repository (tenancy.reconcileHandMadeCRs is off)",
    });
  });

  it("opens up as the operator says", () => {
    const open = crAdmission(TenancySchema.parse({ crNamespaces: ["*"], reconcileHandMadeCRs: true }), "x");
    expect(open(cr("team-b", false))).toEqual({ admitted: true });
    const listed = crAdmission(TenancySchema.parse({ crNamespaces: ["a", "b"] }), "x");
    expect([listed(cr("b", true)).admitted, listed(cr("x", true)).admitted]).toEqual([true, false]);
    expect(listed(cr("x", true))).toMatchObject({
      why: expect.stringContaining("(tenancy.crNamespaces: a, b)"),
    });
  });

  it("a hand-made CR is not taken for a mirrored one by half of the marks: the label and the repository both", () => {
    const mirrored = cr("knative-fleet", true);
    const labelOnly = { ...mirrored, metadata: { ...mirrored.metadata, annotations: {} } };
    const annotationOnly = { ...mirrored, metadata: { ...mirrored.metadata, labels: {} } };
    expect(safe(labelOnly).admitted).toBe(false);
    expect(safe(annotationOnly).admitted).toBe(false);
  });
});
