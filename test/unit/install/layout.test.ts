import { describe, expect, it } from "vitest";
import type { KnativeResource } from "../../../src/api/knative.ts";
import { locateInstall } from "../../../src/install/layout.ts";
import type { KubeObject } from "../../../src/kube/object.ts";

const serving = (namespace: string, remote = true) =>
  ({
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeServing",
    metadata: { name: "serving", namespace },
    spec: remote ? { clusterProfileRef: { name: "spoke-1", namespace: "fleet-system" } } : {},
  }) as KnativeResource;

/** A spoke holding anchors in the given namespaces; records the reads. */
function spokeWithAnchors(...namespaces: string[]) {
  const reads: string[] = [];
  return {
    reads,
    async get(_apiVersion: string, _kind: string, namespace: string | undefined, name: string) {
      reads.push(`${namespace}/${name}`);
      return namespaces.includes(namespace ?? "")
        ? ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace } } as KubeObject)
        : undefined;
    },
  };
}

describe("locateInstall", () => {
  it("installs into the canonical namespace when the spoke has no install yet", async () => {
    const spoke = spokeWithAnchors();
    expect(await locateInstall(spoke, serving("team-a"))).toEqual({
      namespace: "knative-serving",
      adopted: false,
    });
  });

  it("adopts an install of the older upstream layout (the hub CR's namespace) where it is", async () => {
    const spoke = spokeWithAnchors("team-a");
    expect(await locateInstall(spoke, serving("team-a"))).toEqual({ namespace: "team-a", adopted: true });
    expect(spoke.reads).toEqual([
      "knative-serving/knativeserving-serving-root-owner",
      "team-a/knativeserving-serving-root-owner",
    ]);
  });

  it("keeps converging the canonical install when both layouts hold one, at one read", async () => {
    const spoke = spokeWithAnchors("knative-serving", "team-a");
    expect(await locateInstall(spoke, serving("team-a"))).toEqual({
      namespace: "knative-serving",
      adopted: false,
    });
    expect(spoke.reads).toHaveLength(1);
  });

  it("reads nothing for a hub install or a CR already in the canonical namespace", async () => {
    const spoke = spokeWithAnchors("team-a");
    expect(await locateInstall(spoke, serving("team-a", false))).toEqual({
      namespace: "team-a",
      adopted: false,
    });
    expect(await locateInstall(spoke, serving("knative-serving"))).toEqual({
      namespace: "knative-serving",
      adopted: false,
    });
    expect(spoke.reads).toEqual([]);
  });
});
