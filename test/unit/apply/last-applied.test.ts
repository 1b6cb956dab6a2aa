import { describe, expect, it } from "vitest";
import { LAST_APPLIED_ANNOTATION } from "../../../src/api/labels.ts";
import { isUpToDate, withDesiredHash } from "../../../src/apply/compare.ts";
import { withLastApplied } from "../../../src/apply/last-applied.ts";
import type { KubeObject } from "../../../src/kube/object.ts";

const crd = (conversion: object): KubeObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "requestreplies.eventing.knative.dev", annotations: { keep: "me" } },
  spec: { conversion },
});

describe("withLastApplied", () => {
  it("records exactly what is applied, so the upstream operator's three-way merge drops what a release dropped", () => {
    const stamped = withLastApplied(
      withDesiredHash(crd({ strategy: "Webhook", webhook: { clientConfig: {} } })),
    );
    const recorded = JSON.parse(stamped.metadata.annotations?.[LAST_APPLIED_ANNOTATION] ?? "null");
    expect(recorded.spec.conversion).toEqual({ strategy: "Webhook", webhook: { clientConfig: {} } });
    expect(recorded.metadata.annotations).toEqual({
      keep: "me",
      "fleet.knative.dev/desired-hash": expect.any(String),
    });
  });

  it("replaces a stale record (a previous writer's) instead of nesting it, and is stable", () => {
    const stale = crd({ strategy: "None" });
    stale.metadata.annotations = { ...stale.metadata.annotations, [LAST_APPLIED_ANNOTATION]: '{"old":true}' };
    const once = withLastApplied(stale);
    expect(once.metadata.annotations?.[LAST_APPLIED_ANNOTATION]).not.toContain("old");
    expect(withLastApplied(once)).toEqual(once);
  });

  it("a converged object carrying the record it was applied with stays up to date (no write)", () => {
    const desired = withLastApplied(withDesiredHash(crd({ strategy: "None" })));
    expect(isUpToDate(desired, structuredClone(desired))).toBe(true);
    const rewrittenByUpstream = structuredClone(desired);
    rewrittenByUpstream.metadata.annotations![LAST_APPLIED_ANNOTATION] = "{}";
    expect(isUpToDate(desired, rewrittenByUpstream)).toBe(false);
  });
});
