import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { ApplyStep } from "../../../src/mirror/decide.ts";
import type { SyncRollout } from "../../../src/sync/sync.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { syncInto } from "../../support/sync.ts";
import { crFile } from "../mirror/support.ts";

const NS = "fleet";

/** A gate that lets everything through and adds a revert of `name` to `spec` (as halt-and-revert does). */
function revertingTo(name: string, object: (planned: KubeObject) => KubeObject): SyncRollout {
  return {
    open: async () => undefined,
    gate: async (_opened, steps) => ({
      steps: steps.map(
        (step): ApplyStep =>
          step.name === name && step.action === "create"
            ? { ...step, action: "update", reason: "reverted", object: object(step.object) }
            : step,
      ),
      revertEvents: [],
    }),
    orderPrunes: (_opened, candidates) => [...candidates],
    finish: async () => undefined,
  };
}

describe("sync: what the rollout gate writes is admitted too", () => {
  it("a revert carrying abandon-cleanup or a metadata-service URL is refused, not written", async () => {
    const files = [crFile("alpha", { namespace: NS }), crFile("beta", { namespace: NS })];
    const withAnnotation = (o: KubeObject): KubeObject => ({
      ...o,
      metadata: {
        ...o.metadata,
        annotations: { ...o.metadata.annotations, "fleet.knative.dev/abandon-cleanup": "true" },
      },
    });
    const withUrl = (o: KubeObject): KubeObject => ({
      ...o,
      spec: { ...(o.spec as object), additionalManifests: [{ URL: "http://169.254.169.254/latest/" }] },
    });
    for (const [name, forged, field] of [
      ["alpha", withAnnotation, "metadata.annotations.fleet.knative.dev/abandon-cleanup"],
      ["beta", withUrl, "spec.additionalManifests[0].URL"],
    ] as const) {
      const hub = new FakeKube().serveKindsOf(
        KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
      );
      const result = await syncInto(hub.client, {
        files,
        namespace: NS,
        commit: "1".repeat(40),
        rollout: revertingTo(name, forged),
      });
      const outcome = result.resources.find((r) => r.name === name)!;
      expect(outcome).toMatchObject({
        action: "refused",
        error: expect.stringContaining(`clusters/${name}.yaml: ${field}:`),
      });
      expect(
        hub.find("KnativeServing", name)?.metadata.annotations?.["fleet.knative.dev/abandon-cleanup"],
      ).toBeUndefined();
      expect(
        (hub.find("KnativeServing", name)?.spec as { additionalManifests?: unknown } | undefined)
          ?.additionalManifests,
      ).toBeUndefined();
    }
  });
});
