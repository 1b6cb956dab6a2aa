import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText } from "../../support/fleet-files.ts";
import { planOfFiles, resourceOf } from "./support.ts";

// The settings check in plan: a setting the release does not have is an error at its file:line:col (the
// CR is held back, as by any error in its file), a warning applies and is shown.

const SERVING = "clusters/spoke-1/knative-serving.yaml";
const EVENTING = "clusters/spoke-2/knative-eventing.yaml";
const serving = (spec: Record<string, unknown> = {}) =>
  crText({ name: "spoke-1-serving", cluster: "spoke-1", spec });
const eventing = (spec: Record<string, unknown> = {}) =>
  crText({ kind: "KnativeEventing", name: "spoke-2-eventing", cluster: "spoke-2", spec });

describe("plan runs the settings check", { timeout: 60_000 }, () => {
  it("autoscalr and activatr make the plan ❌ at file:line:col; the good file of the same change is planned", async () => {
    const base = { [SERVING]: serving(), [EVENTING]: eventing() };
    const head = {
      [SERVING]: serving({
        config: { autoscalr: { "enable-scale-to-zero": "false" } },
        workloads: [{ name: "activatr", replicas: 3 }],
      }),
      [EVENTING]: eventing({ workloads: [{ name: "eventing-controller", replicas: 2 }] }),
    };
    const lines = head[SERVING].split("\n");
    const lineOf = (text: string) => lines.findIndex((line) => line.includes(text)) + 1;
    const plan = await planOfFiles(base, head);
    expect(plan.diagnostics.map(formatDiagnostic)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^${SERVING}:${lineOf("autoscalr:")}:5 spec\\.config\\.autoscalr: no ConfigMap config-autoscalr .*did you mean autoscaler\\?`,
        ),
      ),
      expect.stringMatching(
        new RegExp(
          `^${SERVING}:${lineOf("activatr")}:\\d+ spec\\.workloads\\[0\\]\\.name: no Deployment, StatefulSet or Job activatr .*did you mean activator\\?`,
        ),
      ),
    ]);
    expect(plan.errors).toBe(2);
    // The file is held back: its CR keeps its last good state; the Eventing file applies.
    expect(resourceOf(plan, "spoke-1-serving").action).toBe("blocked");
    expect(resourceOf(plan, "spoke-2-eventing").action).toBe("update");
    const markdown = renderMarkdown(plan);
    expect(markdown).toContain("❌ **2 errors**");
    expect(markdown).toContain(`${SERVING}:${lineOf("autoscalr:")}:5 spec.config.autoscalr:`);
  });

  it("a placement's typo is at the placement file's field", async () => {
    const placement = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata: { name: serving, namespace: knative-fleet }
spec:
  clusterProfiles: [{ name: spoke-3, namespace: fleet-system }]
  template:
    spec:
      version: "1.21"
      config:
        network: { ingress-class: kourier.ingress.networking.knative.dev, domain-templat: x }
`;
    const plan = await planOfFiles({}, { "placements/serving.yaml": placement });
    expect(plan.diagnostics.map(formatDiagnostic)).toEqual([
      expect.stringMatching(
        /^placements\/serving\.yaml:10:75 spec\.template\.spec\.config\.network\.domain-templat: .*did you mean domain-template\?/,
      ),
      expect.stringMatching(
        /^placements\/serving\.yaml:10:35 spec\.template\.spec\.config\.network\.ingress-class: routes through kourier, which this KnativeServing does not install/,
      ),
    ]);
    expect(plan.errors).toBe(1);
    expect(plan.warnings).toBeGreaterThanOrEqual(1);
  });

  it("a warning applies: HA replicas whose PDB blocks every drain", async () => {
    const plan = await planOfFiles(
      { [SERVING]: serving() },
      { [SERVING]: serving({ "high-availability": { replicas: 2 } }) },
    );
    expect(plan.errors).toBe(0);
    expect(plan.diagnostics).toEqual([
      expect.objectContaining({ severity: "warning", field: "spec.high-availability.replicas" }),
      expect.objectContaining({ severity: "warning", field: "spec.high-availability.replicas" }),
    ]);
    expect(resourceOf(plan, "spoke-1-serving").action).toBe("update");
    expect(renderMarkdown(plan)).toContain("### Setting warnings in head (2)");
  });
});
