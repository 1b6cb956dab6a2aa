import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCrdEstablished, waitEstablished } from "../../../src/apply/established.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../../src/kube/object.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { adminClient } from "../../support/hub.ts";
import { waitUntil } from "../../support/wait.ts";

// The CRD Established wait of an apply pass on a real spoke apiserver: new CRDs are waited for with one list
// and at most one watch (selected by the set's labels, or by name for a single CRD), and a CRD the server
// cannot establish (its kind is taken in its group) fails the wait at the timeout, by name.

const sandbox = loadSandbox();
const GROUP = "established.test.knative-fleet.dev";
const LABELS = { "app.kubernetes.io/managed-by": "knative-fleet", "knative.dev/cr-name": "crd-established" };

const crd = (plural: string, kind: string): KubeObject => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: `${plural}.${GROUP}`, labels: LABELS },
  spec: {
    group: GROUP,
    scope: "Namespaced",
    names: { plural, singular: plural.slice(0, -1), kind, listKind: `${kind}List` },
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
});

describe("the CRD Established wait on a real spoke", () => {
  let spoke: KubeClient;
  const applied: KubeObject[] = [];
  const apply = async (...crds: KubeObject[]) => {
    for (const c of crds) {
      await spoke.apply(c);
      applied.push(c);
    }
  };
  const requests = () => ({
    reads: spoke.rest.requestCounts.get("GET") ?? 0,
    watches: spoke.rest.requestCounts.get("WATCH") ?? 0,
  });

  beforeAll(async () => {
    spoke = adminClient(sandbox.spokes[0]!);
    await spoke.list("apiextensions.k8s.io/v1", "CustomResourceDefinition", { labelSelector: "none=none" });
  });

  afterAll(async () => {
    for (const c of applied) await spoke.delete(c.apiVersion, c.kind, undefined, nameOf(c)).catch(() => {});
  });

  it("waits for several new CRDs with one list and at most one watch; they are all Established after", async () => {
    const crds = [crd("widgets", "Widget"), crd("gizmos", "Gizmo"), crd("sprockets", "Sprocket")];
    await apply(...crds);
    const before = requests();
    await waitEstablished(spoke, crds, { timeoutMs: 60_000, labels: LABELS });
    const after = requests();
    expect(after.reads - before.reads).toBe(1);
    expect(after.watches - before.watches).toBeLessThanOrEqual(1);
    for (const c of crds)
      expect(isCrdEstablished(await spoke.get(c.apiVersion, c.kind, undefined, nameOf(c)))).toBe(true);
  });

  it("waits for one CRD, selected by name", async () => {
    const one = crd("flanges", "Flange");
    await apply(one);
    const before = requests();
    await waitEstablished(spoke, [one], { timeoutMs: 60_000, labels: LABELS });
    expect(requests().reads - before.reads).toBe(1);
    expect(isCrdEstablished(await spoke.get(one.apiVersion, one.kind, undefined, nameOf(one)))).toBe(true);
  });

  it("fails at the timeout naming the CRD the server cannot establish (its kind is taken)", async () => {
    const taken = crd("doohickeys", "Widget"); // kind Widget is the widgets CRD's: never accepted
    await apply(taken);
    await waitUntil(
      "the kind conflict reported",
      async () => {
        const live = await spoke.get(taken.apiVersion, taken.kind, undefined, nameOf(taken));
        const conditions = (live?.status as { conditions?: { type: string; status: string }[] })?.conditions;
        return conditions?.some((c) => c.type === "NamesAccepted" && c.status === "False") ? true : undefined;
      },
      30_000,
    );
    await expect(
      waitEstablished(spoke, [crd("widgets", "Widget"), taken], { timeoutMs: 2_000, labels: LABELS }),
    ).rejects.toThrow(
      `CustomResourceDefinition.apiextensions.k8s.io doohickeys.${GROUP} did not become Established within 2s`,
    );
  });
});
