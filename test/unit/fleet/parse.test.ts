import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { DEFAULT_NAMESPACE, parseFleetFile } from "../../../src/fleet/parse.ts";

const PATH = "clusters/prod-eu/knative-serving.yaml";

function parse(text: string) {
  return parseFleetFile(PATH, text, { defaultNamespace: DEFAULT_NAMESPACE });
}

function errors(text: string): string[] {
  return parse(text).diagnostics.map(formatDiagnostic);
}

const SERVING = `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: prod-eu-serving
spec:
  version: "1.21"
  clusterProfileRef:
    name: prod-eu
    namespace: fleet-system
`;

describe("parseFleetFile", () => {
  it("accepts a KnativeServing and fills in the default namespace", () => {
    const { documents, diagnostics } = parse(SERVING);
    expect(diagnostics).toEqual([]);
    expect(documents).toHaveLength(1);
    expect(documents[0]!.resource).toMatchObject({
      kind: "KnativeServing",
      metadata: { name: "prod-eu-serving", namespace: "knative-fleet" },
      spec: { version: "1.21", clusterProfileRef: { name: "prod-eu", namespace: "fleet-system" } },
    });
  });

  it("names file, line, column and field of a misspelt key", () => {
    const text = `${SERVING}  registry:\n    default: registry.example.com/knative/\${NAME}:v1.21\n    overide:\n      activator: registry.example.com/activator:v1\n`;
    expect(errors(text)).toEqual([
      `${PATH}:12:5 spec.registry.overide: unrecognized key; did you mean override?`,
    ]);
  });

  it("names file, line, column and field of a wrong type", () => {
    const text = SERVING.replace('version: "1.21"', "version: 1.21");
    expect(errors(text)).toEqual([
      `${PATH}:6:12 spec.version: expected string, got number: YAML 1.1 reads the unquoted 1.21 as a number; quote it ("1.21")`,
    ]);
  });

  it("reads YAML 1.1 booleans in config values as booleans, as Kubernetes does", () => {
    const text = `${SERVING}  config:\n    autoscaler:\n      enable-scale-to-zero: yes\n      scale-to-zero-grace-period: 30s\n`;
    expect(errors(text)).toEqual([
      `${PATH}:12:29 spec.config.autoscaler.enable-scale-to-zero: expected string, got boolean: YAML 1.1 reads the unquoted yes as a boolean; quote it ("yes")`,
    ]);
  });

  it("rejects other kinds, naming what a fleet file accepts", () => {
    const text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: {}\n";
    expect(errors(text)).toEqual([
      `${PATH}:2:7 kind: "ConfigMap" (apiVersion v1) is not accepted; a fleet file holds KnativeServing or KnativeEventing (apiVersion operator.knative.dev/v1beta1)`,
    ]);
  });

  it("rejects a document that is not an object, or has no kind", () => {
    expect(errors("- a list\n")).toEqual([
      `${PATH}:1:1: a fleet document must be a Kubernetes object; a fleet file holds KnativeServing or KnativeEventing (apiVersion operator.knative.dev/v1beta1)`,
    ]);
    expect(errors("metadata:\n  name: x\n")).toEqual([
      `${PATH}:1:1 kind: required field is missing; a fleet file holds KnativeServing or KnativeEventing (apiVersion operator.knative.dev/v1beta1)`,
    ]);
  });

  it("rejects another apiVersion of a Knative kind", () => {
    const text = SERVING.replace("v1beta1", "v1alpha1");
    expect(errors(text)).toEqual([
      `${PATH}:1:13 apiVersion: KnativeServing must be apiVersion operator.knative.dev/v1beta1, got operator.knative.dev/v1alpha1: v1alpha1 is the operator's older API, which it no longer serves; change the apiVersion to operator.knative.dev/v1beta1 (spec.deployments is spec.workloads there)`,
    ]);
  });

  it("requires a DNS-1123 metadata.name", () => {
    expect(errors(SERVING.replace("name: prod-eu-serving", "name: Prod_EU"))).toEqual([
      `${PATH}:4:9 metadata.name: must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`,
    ]);
    expect(errors(SERVING.replace("  name: prod-eu-serving\n", "  labels: {}\n"))).toEqual([
      `${PATH}:3:1 metadata.name: required field is missing`,
    ]);
  });

  it("rejects unknown metadata fields and status, which the API would accept on objects it returns", () => {
    const text = SERVING.replace(
      "metadata:\n",
      "metadata:\n  annotation:\n    fleet.knative.dev/prune: disabled\n",
    ).concat("status:\n  version: 1.21.3\n");
    expect(errors(text)).toEqual([
      `${PATH}:4:3 metadata.annotation: unrecognized key; did you mean annotations?`,
      `${PATH}:12:1 status: unrecognized key`,
    ]);
  });

  it("accepts only 'disabled' for the prune annotation", () => {
    const annotate = (value: string) =>
      SERVING.replace("metadata:\n", `metadata:\n  annotations:\n    fleet.knative.dev/prune: ${value}\n`);
    expect(errors(annotate("disabled"))).toEqual([]);
    expect(errors(annotate("false"))).toEqual([
      `${PATH}:5:30 metadata.annotations["fleet.knative.dev/prune"]: expected string, got boolean: YAML 1.1 reads the unquoted false as a boolean; quote it ("false")`,
    ]);
    expect(errors(annotate("disable"))).toEqual([
      `${PATH}:5:30 metadata.annotations["fleet.knative.dev/prune"]: must be "disabled"; remove the annotation to allow pruning`,
    ]);
  });

  it("treats null fields as absent, as the API server does", () => {
    const text = `${SERVING.replace("  name: prod-eu-serving\n", "  name: prod-eu-serving\n  namespace:\n")}  registry:\n    # default: registry.example.com/knative\n`;
    const { documents, diagnostics } = parse(text);
    expect(diagnostics).toEqual([]);
    expect(documents[0]!.resource?.metadata.namespace).toBe("knative-fleet");
    expect(documents[0]!.resource?.spec).not.toHaveProperty("registry");
  });

  it("parses every document of a multi-document file and reports errors per document", () => {
    const eventing = SERVING.replace("KnativeServing", "KnativeEventing").replace(
      "prod-eu-serving",
      "prod-eu-eventing",
    );
    const text = `${SERVING}---\n${eventing.replace("namespace: fleet-system", "namespace: fleet-system\n    cluster: x")}`;
    const { documents, diagnostics } = parse(text);
    expect(documents.map((d) => [d.index, d.position.line, d.resource?.kind])).toEqual([
      [0, 1, "KnativeServing"],
      [1, 11, undefined],
    ]);
    expect(diagnostics.map(formatDiagnostic)).toEqual([
      `${PATH}:20:5 spec.clusterProfileRef.cluster: unrecognized key`,
    ]);
  });

  it("still reads what a document declares when the document is invalid", () => {
    const { documents } = parse(`${SERVING}  registy: {}\n`);
    expect(documents[0]!.resource).toBeUndefined();
    expect(documents[0]!.declaration).toEqual({
      identity: { kind: "KnativeServing", namespace: "knative-fleet", name: "prod-eu-serving" },
      namePosition: { line: 4, column: 9 },
      cluster: {
        label: "ClusterProfile fleet-system/prod-eu",
        position: { line: 7, column: 3 },
        field: "spec.clusterProfileRef",
      },
    });
  });

  it("reports a YAML syntax error with line and column and nothing from the broken document", () => {
    const text = `${SERVING}  config:\n    network: {ingress-class: kourier\n`;
    const diagnostics = parse(text).diagnostics;
    expect(diagnostics.length).toBeGreaterThan(0);
    expect(diagnostics.every((d) => d.field === "" && d.line >= 11)).toBe(true);
    expect(formatDiagnostic(diagnostics[0]!)).toMatch(
      /^clusters\/prod-eu\/knative-serving\.yaml:\d+:\d+: \S/,
    );
  });
});
