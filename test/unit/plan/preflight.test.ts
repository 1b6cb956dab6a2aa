import { describe, expect, it } from "vitest";
import type { KnativeResource } from "../../../src/api/knative.ts";
import { spokePreflight } from "../../../src/plan/checks.ts";
import type { Preflight } from "../../../src/preflight/index.ts";
import { crObject } from "../../support/fleet-files.ts";

describe("spokePreflight: a live plan's preflight findings", () => {
  it("asks about the CR's own cluster and leads each message with its reason", async () => {
    const asked: unknown[] = [];
    const preflight: Preflight = {
      async check(cluster, desired) {
        asked.push([cluster, desired.metadata.name]);
        return {
          passed: false,
          findings: [
            {
              severity: "error",
              reason: "GatewayAPIMissing",
              message: "missing CRDs: httproutes.gateway.networking.k8s.io",
            },
            { severity: "warning", reason: "KnativeVersionEndOfSupport", message: "token=abc.def.ghi ended" },
          ],
        };
      },
      forget() {},
    };
    const cr = crObject({ name: "serving", cluster: "spoke-1" }) as KnativeResource;
    const findings = await spokePreflight(preflight, cr);
    expect(asked).toEqual([[{ namespace: "fleet-system", name: "spoke-1" }, "serving"]]);
    expect(findings).toEqual([
      {
        severity: "error",
        code: "preflight",
        message: "GatewayAPIMissing: missing CRDs: httproutes.gateway.networking.k8s.io",
      },
      {
        severity: "warning",
        code: "preflight",
        message: expect.stringMatching(/^KnativeVersionEndOfSupport: /),
      },
    ]);
  });
});
