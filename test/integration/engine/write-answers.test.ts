import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { deleteClusterScoped, runApplySet } from "../../../src/apply/engine.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf, refOf } from "../../../src/kube/object.ts";
import type { RestRequest, RestResponse } from "../../../src/kube/rest.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { adminClient } from "../../support/hub.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// What a spoke's API server answers to an apply pass's writes, on a real one: the engine never reads a
// written object back (only the inventory, which it compares next time), so it asks for no copy of it (a
// Table row without the object). The server would otherwise send the whole object to every write: a
// release's CRD, its last-applied annotation included, is 125 KB sent and as much answered, and receiving
// and parsing the answers was a large part of an install's CPU.

const sandbox = loadSandbox();
const spoke = sandbox.spokes.at(-1)!;
const GROUP = "answers.test.knative-fleet.dev";
const NAMESPACE = "write-answers-test";
const LABELS = { "app.kubernetes.io/managed-by": "knative-fleet", "knative.dev/cr-name": "write-answers" };

/** Serving's own Service CRD (its real size and schema) moved to a group of the test's. */
function bigCrd(): KubeObject {
  const file = join(knativeReleasesDir(), "knative-serving", "1.22.1", "1-serving-crds.yaml");
  const serving = parseAllDocuments(readFileSync(file, "utf8"))
    .map((d) => d.toJSON() as KubeObject)
    .find((o) => o?.metadata?.name === "services.serving.knative.dev")!;
  const spec = serving.spec as { group: string; names: Record<string, unknown> };
  return {
    ...serving,
    metadata: { name: `services.${GROUP}`, labels: LABELS },
    spec: { ...spec, group: GROUP, names: { ...spec.names, categories: undefined, shortNames: undefined } },
  };
}

const objects = (): KubeObject[] => [
  bigCrd(),
  {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "config-big", namespace: NAMESPACE },
    data: { _example: "# a Knative config ConfigMap's commented example\n".repeat(400) },
  },
  {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: "write-answers-test-role" },
    rules: [{ apiGroups: [GROUP], resources: ["services"], verbs: ["get", "list", "watch"] }],
  },
  {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "answers", namespace: NAMESPACE },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: "answers" } },
      template: {
        metadata: { labels: { app: "answers" } },
        spec: { containers: [{ name: "c", image: "registry.invalid/answers:1", args: ["--serve"] }] },
      },
    },
  },
  // A custom resource of the CRD above: written after it is Established, answered by the CRD handler.
  {
    apiVersion: `${GROUP}/v1`,
    kind: "Service",
    metadata: { name: "hello", namespace: NAMESPACE },
    spec: { template: { spec: { containers: [{ image: "registry.invalid/hello:1" }] } } },
  },
];

describe("the answers to an apply pass's writes on a real spoke", () => {
  let client: KubeClient;
  /** Every write the pass sent, with the kind of object the server answered. */
  const writes: { method: string; path: string; sent: number; answer: unknown }[] = [];

  beforeAll(async () => {
    client = adminClient(spoke);
    // An earlier run's namespace and CRD take a while to go; a write into a terminating namespace is refused.
    await waitUntil(
      "the last run's namespace and CRD gone",
      async () =>
        (!(await client.get("v1", "Namespace", undefined, NAMESPACE)) &&
          !(await client.get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            undefined,
            `services.${GROUP}`,
          ))) ||
        undefined,
      120_000,
    );
    const request = client.rest.request.bind(client.rest);
    client.rest.request = async <T>(req: RestRequest): Promise<RestResponse<T>> => {
      const res = await request<T>(req);
      if (req.method !== "GET")
        writes.push({
          method: req.method,
          path: req.path,
          sent: req.body === undefined ? 0 : JSON.stringify(req.body).length,
          answer: res.body,
        });
      return res;
    };
  });

  afterAll(async () => {
    const crd = bigCrd();
    await client.delete("v1", "Namespace", undefined, NAMESPACE).catch(() => {});
    await client.delete(crd.apiVersion, crd.kind, undefined, nameOf(crd)).catch(() => {});
    await client.delete("rbac.authorization.k8s.io/v1", "ClusterRole", undefined, "write-answers-test-role");
  });

  it("the objects written are answered without a copy of them; the inventory, which is read back, whole", async () => {
    const result = await runApplySet(
      {
        client,
        namespace: NAMESPACE,
        labels: LABELS,
        inventoryObject: (refs) => ({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "write-answers-inventory", namespace: NAMESPACE, labels: LABELS },
          data: { refs: JSON.stringify(refs) },
        }),
        concurrency: 4,
      },
      objects(),
      "apply",
    );
    expect(result.plan.prune).toEqual([]);
    const applies = writes.filter((w) => w.method === "PATCH");
    const ofObjects = applies.filter((w) => !w.path.endsWith("/write-answers-inventory"));
    expect(ofObjects.map((w) => w.path.split("/").at(-1)).sort()).toEqual(
      ["answers", "config-big", "hello", `services.${GROUP}`, "write-answers-test-role"].sort(),
    );
    for (const w of ofObjects) {
      const answer = w.answer as { kind: string; rows: { object: unknown }[] };
      expect(answer.kind, w.path).toBe("Table");
      expect(
        answer.rows.map((r) => r.object),
        w.path,
      ).toEqual([null]);
    }
    // The inventory is compared with the next pass's, so its answer is the whole ConfigMap.
    const inventory = applies.filter((w) => w.path.endsWith("/write-answers-inventory"));
    expect(inventory.length).toBeGreaterThan(0);
    for (const w of inventory) expect((w.answer as KubeObject).data).toBeDefined();

    const sent = ofObjects.reduce((n, w) => n + w.sent, 0);
    const received = ofObjects.reduce((n, w) => n + JSON.stringify(w.answer).length, 0);
    console.log(`writes of the pass: ${ofObjects.length}, ${sent} characters sent, ${received} answered`);
    // The CRD alone is 125 KB sent; an answer is a Table's column definitions and one row, about 1 KB.
    expect(received).toBeLessThan(2_000 * ofObjects.length);
    expect(received).toBeLessThan(sent / 20);
  });

  it("a delete is answered with a Status or a Table row without the object, even where the server would send the object", async () => {
    writes.length = 0;
    const crd = bigCrd();
    const role = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      name: "write-answers-test-role",
    };
    // A custom resource with a finalizer: the server answers its delete with the object, now deleting.
    const cr = objects().at(-1)!;
    await client.mergePatch(cr.apiVersion, cr.kind, NAMESPACE, "hello", {
      metadata: { finalizers: ["test/hold"] },
    });
    expect(await client.delete(cr.apiVersion, cr.kind, NAMESPACE, "hello")).toBe(true);
    await client.mergePatch(cr.apiVersion, cr.kind, NAMESPACE, "hello", { metadata: { finalizers: null } });
    expect(
      await deleteClusterScoped(client, [
        { ...refOf(crd), namespace: "" },
        { ...role, namespace: "" },
      ]),
    ).toHaveLength(2);
    const deletes = writes.filter((w) => w.method === "DELETE");
    expect(deletes).toHaveLength(3);
    for (const w of deletes) {
      const answer = w.answer as { kind: string; rows?: { object: unknown }[] };
      expect(["Status", "Table"], w.path).toContain(answer.kind);
      if (answer.kind === "Table")
        expect(
          answer.rows?.map((r) => r.object),
          w.path,
        ).toEqual([null]);
    }
    // The custom resource held by its finalizer and the CRD would have been answered whole.
    expect(deletes.filter((w) => (w.answer as KubeObject).kind === "Table").length).toBeGreaterThanOrEqual(2);
  });
});
