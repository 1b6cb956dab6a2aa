import { describe, expect, it } from "vitest";
import { objectKey } from "../../../src/kube/object.ts";
import { type Manifest, ManifestParseError, parseManifests } from "../../../src/render/index.ts";
import { updateWhere } from "../../../src/render/manifest.ts";

const TWO_OBJECTS = `
# leading comment document
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: config-network
  namespace: knative-serving
data:
  enabled: on
  ratio: "1.5"
---
---
apiVersion: batch/v1
kind: Job
metadata:
  generateName: cleanup-
`;

describe("parseManifests", () => {
  it("reads every object of a multi-document file and skips the empty documents", () => {
    const manifests = parseManifests(TWO_OBJECTS, "release.yaml");
    expect(manifests.map((manifest) => `${manifest.kind} ${objectKey(manifest)}`)).toEqual([
      "ConfigMap /ConfigMap/knative-serving/config-network",
      "Job batch/Job//cleanup-",
    ]);
  });

  it("reads scalars as Kubernetes does (YAML 1.1)", () => {
    const [configMap] = parseManifests(TWO_OBJECTS, "release.yaml");
    expect(configMap!.data).toEqual({ enabled: true, ratio: "1.5" });
  });

  it("returns deeply frozen objects, so a cached release cannot be changed by accident", () => {
    const [configMap] = parseManifests(TWO_OBJECTS, "release.yaml");
    expect(Object.isFrozen(configMap)).toBe(true);
    expect(() => {
      (configMap!.metadata as { name: string }).name = "other";
    }).toThrow(TypeError);
  });

  it("names the file and line of a document that is not a Kubernetes object", () => {
    const text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Secret\n";
    expect(() => parseManifests(text, "extra.yaml")).toThrow(
      new ManifestParseError(
        "extra.yaml:5:1: not a Kubernetes object (apiVersion, kind and metadata.name or metadata.generateName are required)",
      ),
    );
  });

  it("names the file and position of a YAML syntax error", () => {
    expect(() => parseManifests("apiVersion: v1\nkind: [ConfigMap\n", "broken.yaml")).toThrow(
      /^invalid YAML: broken\.yaml:\d+:\d+/,
    );
  });
});

describe("updateWhere", () => {
  it("edits copies of the selected objects and passes the others through untouched", () => {
    const input = parseManifests(TWO_OBJECTS, "release.yaml");
    const output = updateWhere(
      input,
      (manifest) => manifest.kind === "ConfigMap",
      (copy) => {
        copy.metadata.namespace = "elsewhere";
      },
    );
    expect(output[0]!.metadata.namespace).toBe("elsewhere");
    expect(input[0]!.metadata.namespace).toBe("knative-serving");
    expect(output[1]).toBe(input[1]);
    expect(Object.isFrozen(output[0])).toBe(true);
  });
});

describe("objectKey", () => {
  it("ignores the API version: the same object may be served by several", () => {
    const hpa = (apiVersion: string): Manifest => ({
      apiVersion,
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "activator", namespace: "knative-serving" },
    });
    expect(objectKey(hpa("autoscaling/v2"))).toBe(objectKey(hpa("autoscaling/v1")));
  });
});
