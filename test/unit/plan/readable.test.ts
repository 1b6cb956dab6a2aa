import { describe, expect, it } from "vitest";
import { ALLOW_UNKNOWN_SETTINGS_ANNOTATION } from "../../../src/api/labels.ts";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText } from "../../support/fleet-files.ts";
import { planOfFiles, resourceOf } from "./support.ts";

// What a reviewer reads in a plan comment: what a new CR asks for (not only the names of the objects it
// installs), where two long strings differ, and specs in YAML as the fleet files are written.

const SLOW = { timeout: 60_000 };
const PATH = "clusters/spoke-1/knative-serving.yaml";
const KOURIER = { ingress: { kourier: { enabled: true } } };
const serving = (spec: Record<string, unknown>, annotations?: Record<string, string>) =>
  crText({
    name: "spoke-1-serving",
    cluster: "spoke-1",
    version: "1.22",
    spec: { ...KOURIER, ...spec },
    ...(annotations && { annotations }),
  });

const REVIEWED = {
  "high-availability": { replicas: 2 },
  workloads: [
    {
      name: "activator",
      replicas: 3,
      resources: [{ container: "activator", requests: { cpu: "500m" }, limits: { memory: "1Gi" } }],
      env: [{ container: "activator", envVars: [{ name: "API_TOKEN", value: "s3cr3t-value" }] }],
    },
  ],
  podDisruptionBudgets: [{ name: "activator-pdb", minAvailable: 2 }],
  config: { autoscaler: { "enable-scale-to-zero": "false" } },
};

describe("a plan a reviewer can read", SLOW, () => {
  it("a created CR shows what it sets: version, high-availability, workloads, PDBs, config; in YAML and JSON", async () => {
    const plan = await planOfFiles({}, { [PATH]: serving(REVIEWED) });
    const created = resourceOf(plan, "spoke-1-serving");
    expect(created.action).toBe("create");
    const masked = structuredClone(REVIEWED);
    masked.workloads[0]!.env[0]!.envVars[0]!.value = "(masked)";
    // Only the reviewed fields (not ingress, not clusterProfileRef).
    expect(created.spec).toEqual({ version: "1.22", ...masked });
    const text = renderMarkdown(plan);
    expect(text).toContain(
      [
        "**Spec** (what the CR sets of these fields; the rest are the release's defaults)",
        "",
        "```yaml",
        'version: "1.22"',
        "high-availability:",
        "  replicas: 2",
        "workloads:",
        "  - name: activator",
        "    replicas: 3",
        "    resources:",
        "      - container: activator",
        "        limits:",
        "          memory: 1Gi",
        "        requests:",
        "          cpu: 500m",
      ].join("\n"),
    );
    expect(text).toContain("podDisruptionBudgets:\n  - name: activator-pdb\n    minAvailable: 2\n");
    expect(text).toContain('config:\n  autoscaler:\n    enable-scale-to-zero: "false"\n```');
    expect(text).not.toContain("s3cr3t");
  });

  it("a created CR that sets none of them says it takes the release's defaults; an update shows no spec", async () => {
    const plan = await planOfFiles({}, { [PATH]: serving({}) });
    expect(resourceOf(plan, "spoke-1-serving").spec).toEqual({ version: "1.22" });
    const bare = crText({ name: "spoke-1-serving", cluster: "spoke-1", spec: KOURIER });
    const none = await planOfFiles({}, { [PATH]: bare.replace(/^ {2}version: .*\n/m, "") });
    expect(resourceOf(none, "spoke-1-serving").spec).toEqual({});
    expect(renderMarkdown(none)).toContain("**Spec**: sets none of version, high-availability, workloads,");
    const updated = await planOfFiles({ [PATH]: serving({}) }, { [PATH]: serving(REVIEWED) });
    expect(resourceOf(updated, "spoke-1-serving").spec).toBeUndefined();
  });

  it("two long strings: where they first differ, with context on both sides and the offset, bounded", async () => {
    const long = (middle: string) => `${"a".repeat(5000)}${middle}${"b".repeat(4000)}`;
    // A key no release documents, kept by the annotation: a long document, as `_example` entries are.
    const file = (middle: string) =>
      serving(
        { config: { autoscaler: { "x-document": long(middle) } } },
        { [ALLOW_UNKNOWN_SETTINGS_ANNOTATION]: "spec.config.autoscaler.x-document" },
      );
    const plan = await planOfFiles({ [PATH]: file("X") }, { [PATH]: file("YZ") });
    const changed = resourceOf(plan, "spoke-1-serving").objects.changed;
    const field = changed.flatMap((c) => c.fields).find((f) => f.path.includes("x-document"));
    expect(field?.path).toBe("data.x-document");
    expect(field?.before === long("X") && field.after === long("YZ")).toBe(true);
    const lines = renderMarkdown(plan).split("\n");
    const a30 = "a".repeat(30);
    const b30 = "b".repeat(30);
    expect(lines).toContain(`- data.x-document: "…${a30}[X]${b30}…" (at character 5,001 of 9,001)`);
    expect(lines).toContain(`+ data.x-document: "…${a30}[YZ]${b30}…" (at character 5,001 of 9,002)`);
    expect(lines.join("\n")).not.toContain("characters)");
  });
});
