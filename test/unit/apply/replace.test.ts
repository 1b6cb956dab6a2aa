import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { applyOrReplace } from "../../../src/apply/replace.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { KubeApiError } from "../../../src/kube/rest.ts";

/**
 * Just enough of an API server for the replacement rule: objects by name, a uid per creation, and the
 * immutability check the real one makes on a Job's pod template and a Deployment's selector.
 */
function immutableServer(initial: KubeObject[]) {
  const objects = new Map(
    initial.map((o) => [o.metadata.name, { ...o, metadata: { ...o.metadata, uid: "u0" } }]),
  );
  const calls: string[] = [];
  let uids = 0;
  const spec = (o: KubeObject | undefined, field: string) =>
    (o?.spec as Record<string, unknown> | undefined)?.[field];
  const client = {
    async write(object: KubeObject) {
      calls.push(`apply ${object.metadata.name}`);
      const live = objects.get(object.metadata.name);
      const immutable = object.kind === "Job" ? "template" : "selector";
      if (live && !isDeepStrictEqual(spec(live, immutable), spec(object, immutable))) {
        throw new KubeApiError(
          "PATCH",
          `/${object.metadata.name}`,
          422,
          "Invalid",
          `${object.kind}.apps "${object.metadata.name}" is invalid: spec.${immutable}: Invalid value: field is immutable`,
        );
      }
      const stored = { ...object, metadata: { ...object.metadata, uid: live?.metadata.uid ?? `u${++uids}` } };
      objects.set(object.metadata.name, stored);
    },
    async delete(_apiVersion: string, _kind: string, _namespace: string | undefined, name: string) {
      calls.push(`delete ${name}`);
      return objects.delete(name);
    },
    async get(_apiVersion: string, _kind: string, _namespace: string | undefined, name: string) {
      return objects.get(name);
    },
  };
  return { client, objects, calls };
}

const job = (label: string): KubeObject => ({
  apiVersion: "batch/v1",
  kind: "Job",
  metadata: { name: "cleanup-serving-serving-1.22.1", namespace: "knative-serving" },
  spec: { template: { metadata: { labels: { [label]: "false" } }, spec: { containers: [{ name: "c" }] } } },
});

describe("applyOrReplace", () => {
  it("replaces a Job whose pod template changed: deleted, then created with the new template", async () => {
    const server = immutableServer([job("sidecar.istio.io/inject")]);
    const wanted = job("other");
    const { replaced } = await applyOrReplace(server.client, wanted);
    expect(replaced).toBe(true);
    expect(server.calls).toEqual([
      "apply cleanup-serving-serving-1.22.1",
      "delete cleanup-serving-serving-1.22.1",
      "apply cleanup-serving-serving-1.22.1",
    ]);
    const stored = server.objects.get(wanted.metadata.name) as KubeObject | undefined;
    expect(stored?.spec).toEqual(wanted.spec);
    expect(stored?.metadata.uid).not.toBe("u0");
  });

  it("applies in place when nothing immutable changes", async () => {
    const server = immutableServer([job("sidecar.istio.io/inject")]);
    const { replaced } = await applyOrReplace(server.client, job("sidecar.istio.io/inject"));
    expect(replaced).toBe(false);
    expect(server.calls).toEqual(["apply cleanup-serving-serving-1.22.1"]);
  });

  it("never deletes anything but a Job: another kind's immutable field is reported as it is", async () => {
    const deployment: KubeObject = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "controller", namespace: "knative-serving" },
      spec: { selector: { matchLabels: { app: "controller" } } },
    };
    const server = immutableServer([deployment]);
    const changed = { ...deployment, spec: { selector: { matchLabels: { app: "other" } } } };
    await expect(applyOrReplace(server.client, changed)).rejects.toThrow(/field is immutable/);
    expect(server.calls).toEqual(["apply controller"]);
    expect(server.objects.get("controller")?.metadata.uid).toBe("u0");
  });

  it("passes any other error of a Job through without deleting it", async () => {
    const server = immutableServer([]);
    server.client.write = async () => {
      throw new KubeApiError("PATCH", "/job", 422, "Invalid", "spec.backoffLimit: must be >= 0");
    };
    await expect(applyOrReplace(server.client, job("x"))).rejects.toThrow(/backoffLimit/);
    expect(server.calls).toEqual([]);
  });

  it("gives up with a clear error when the deleted Job does not go away", async () => {
    const server = immutableServer([job("a")]);
    server.client.delete = async () => true; // accepted, but the Job stays (a stuck finalizer, say)
    await expect(applyOrReplace(server.client, job("b"), 300)).rejects.toThrow(
      "Job.batch knative-serving/cleanup-serving-serving-1.22.1 was deleted to be replaced but is still there",
    );
  });
});
