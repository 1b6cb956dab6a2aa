import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { DEFAULT_NAMESPACE } from "../../../src/fleet/parse.ts";
import { readFleetDir } from "../../../src/fleet/read-dir.ts";
import { DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import { repoRoot } from "../../support/shared.ts";

const OPTIONS = { defaultNamespace: DEFAULT_NAMESPACE };

function cr(kind: string, name: string, cluster: string): string {
  return `apiVersion: operator.knative.dev/v1beta1
kind: ${kind}
metadata:
  name: ${name}
spec:
  clusterProfileRef:
    name: ${cluster}
    namespace: fleet-system
`;
}

const spoke1Serving = {
  path: "clusters/spoke-1/knative-serving.yaml",
  text: cr("KnativeServing", "spoke-1-serving", "spoke-1"),
};
const spoke2Eventing = {
  path: "clusters/spoke-2/knative-eventing.yaml",
  text: cr("KnativeEventing", "spoke-2-eventing", "spoke-2"),
};

describe("buildFleetModel", () => {
  it("lists every CR with its source file, document index and line", () => {
    const eventing = {
      path: "clusters/spoke-1/knative-eventing.yaml",
      text: `---\n# an empty document\n---\n${cr("KnativeEventing", "spoke-1-eventing", "spoke-1")}`,
    };
    const model = buildFleetModel([spoke1Serving, eventing], OPTIONS);
    expect(model.diagnostics).toEqual([]);
    expect(model.resources.map((r) => [r.resource.metadata.name, r.path, r.documentIndex, r.line])).toEqual([
      ["spoke-1-eventing", "clusters/spoke-1/knative-eventing.yaml", 1, 4],
      ["spoke-1-serving", "clusters/spoke-1/knative-serving.yaml", 0, 1],
    ]);
    expect(model.files.map((f) => [f.path, f.status])).toEqual([
      ["clusters/spoke-1/knative-eventing.yaml", "valid"],
      ["clusters/spoke-1/knative-serving.yaml", "valid"],
    ]);
  });

  it("reports a CR declared in two files on both, and uses neither copy", () => {
    const copy = { path: "clusters/spoke-9/serving.yaml", text: `# a copy\n${spoke1Serving.text}` };
    const model = buildFleetModel([spoke1Serving, copy, spoke2Eventing], OPTIONS);
    expect(model.diagnostics.map(formatDiagnostic)).toEqual([
      "clusters/spoke-1/knative-serving.yaml:4:9 metadata.name: KnativeServing knative-fleet/spoke-1-serving is also declared at clusters/spoke-9/serving.yaml:5:9; no copy is applied",
      "clusters/spoke-9/serving.yaml:5:9 metadata.name: KnativeServing knative-fleet/spoke-1-serving is also declared at clusters/spoke-1/knative-serving.yaml:4:9; no copy is applied",
    ]);
    expect(model.resources.map((r) => r.resource.metadata.name)).toEqual(["spoke-2-eventing"]);
    expect(model.files.map((f) => [f.path, f.status])).toEqual([
      ["clusters/spoke-1/knative-serving.yaml", "failed"],
      ["clusters/spoke-2/knative-eventing.yaml", "valid"],
      ["clusters/spoke-9/serving.yaml", "failed"],
    ]);
  });

  it("reports a CR declared twice in one file", () => {
    const twice = { ...spoke1Serving, text: `${spoke1Serving.text}---\n${spoke1Serving.text}` };
    const model = buildFleetModel([twice], OPTIONS);
    expect(model.diagnostics.map((d) => [d.line, d.field])).toEqual([
      [4, "metadata.name"],
      [13, "metadata.name"],
    ]);
    expect(model.resources).toEqual([]);
  });

  it("counts a copy in a file that is broken for another reason as a duplicate too", () => {
    const broken = { path: "clusters/old/serving.yaml", text: `${spoke1Serving.text}  registy: {}\n` };
    const model = buildFleetModel([spoke1Serving, broken], OPTIONS);
    expect(model.diagnostics.map((d) => `${d.path} ${d.field}`)).toEqual([
      "clusters/old/serving.yaml metadata.name",
      "clusters/old/serving.yaml spec.registy",
      "clusters/spoke-1/knative-serving.yaml metadata.name",
    ]);
    expect(model.resources).toEqual([]);
  });

  it("reports two CRs of one kind for one cluster on both", () => {
    const second = {
      path: "clusters/spoke-1/serving-2.yaml",
      text: cr("KnativeServing", "spoke-1-serving-2", "spoke-1"),
    };
    const model = buildFleetModel([spoke1Serving, second, spoke2Eventing], OPTIONS);
    expect(model.diagnostics.map(formatDiagnostic)).toEqual([
      "clusters/spoke-1/knative-serving.yaml:6:3 spec.clusterProfileRef: KnativeServing knative-fleet/spoke-1-serving installs on ClusterProfile fleet-system/spoke-1, as does KnativeServing knative-fleet/spoke-1-serving-2 (clusters/spoke-1/serving-2.yaml:6:3); a cluster runs one KnativeServing, so none of them is applied",
      "clusters/spoke-1/serving-2.yaml:6:3 spec.clusterProfileRef: KnativeServing knative-fleet/spoke-1-serving-2 installs on ClusterProfile fleet-system/spoke-1, as does KnativeServing knative-fleet/spoke-1-serving (clusters/spoke-1/knative-serving.yaml:6:3); a cluster runs one KnativeServing, so none of them is applied",
    ]);
    expect(model.resources.map((r) => r.resource.kind)).toEqual(["KnativeEventing"]);
  });

  it("keeps a bad file from affecting the good ones, and lists what the bad one declares", () => {
    const bad = {
      path: "clusters/spoke-3/knative-serving.yaml",
      text: `${cr("KnativeServing", "spoke-3-serving", "spoke-3")}  config:\n    network: [\n`,
    };
    const model = buildFleetModel([bad, spoke2Eventing, spoke1Serving], OPTIONS);
    expect(model.diagnostics.length).toBeGreaterThan(0);
    expect(model.diagnostics.every((d) => d.path === bad.path)).toBe(true);
    expect(model.resources.map((r) => r.resource.metadata.name)).toEqual([
      "spoke-1-serving",
      "spoke-2-eventing",
    ]);
    expect(model.files.find((f) => f.path === bad.path)).toEqual({
      path: bad.path,
      status: "failed",
      declares: [{ kind: "KnativeServing", namespace: "knative-fleet", name: "spoke-3-serving" }],
    });
  });

  it("orders diagnostics by file, line and column whatever the input order", () => {
    const files = [
      { path: "clusters/b.yaml", text: "kind: Secret\n---\nkind: ConfigMap\n" },
      { path: "clusters/a.yaml", text: "a: [\n" },
    ];
    const forward = buildFleetModel(files, OPTIONS).diagnostics;
    expect(buildFleetModel([...files].reverse(), OPTIONS).diagnostics).toEqual(forward);
    expect(forward.map((d) => `${d.path}:${d.line}`)).toEqual([
      "clusters/a.yaml:2",
      "clusters/b.yaml:1",
      "clusters/b.yaml:3",
    ]);
  });

  it("validates fleet-example clean", async () => {
    const files = await readFleetDir(join(repoRoot, "fleet-example"), DEFAULT_FILE_SELECTION);
    const model = buildFleetModel(files, OPTIONS);
    expect(model.diagnostics.map(formatDiagnostic)).toEqual([]);
    expect(
      model.resources.map(({ resource, path }) => [
        path,
        resource.kind,
        `${resource.metadata.namespace}/${resource.metadata.name}`,
        resource.spec.clusterProfileRef,
      ]),
    ).toEqual([
      [
        "clusters/spoke-1/knative-serving.yaml",
        "KnativeServing",
        "knative-fleet/spoke-1-serving",
        { name: "spoke-1", namespace: "fleet-system" },
      ],
      [
        "clusters/spoke-2/knative-eventing.yaml",
        "KnativeEventing",
        "knative-fleet/spoke-2-eventing",
        { name: "spoke-2", namespace: "fleet-system" },
      ],
    ]);
  });
});
