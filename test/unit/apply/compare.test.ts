import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import {
  canonicalJson,
  containsDesired,
  desiredHash,
  isUpToDate,
  parseQuantity,
  withDesiredHash,
} from "../../../src/apply/compare.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { createKodataSource } from "../../../src/render/index.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

const deployment = (replicas: number, env: { name: string; value: string }[] = []): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "controller", namespace: "knative-serving", labels: { app: "controller" } },
  spec: {
    replicas,
    template: {
      spec: {
        containers: [
          {
            name: "controller",
            image: "ko://controller",
            env,
            resources: { requests: { cpu: "100m", memory: "1Gi" } },
          },
        ],
      },
    },
  },
});

/** What the apiserver returns after applying `desired`: defaults and status added. */
function asServerReturns(desired: KubeObject): KubeObject {
  const live = structuredClone(desired);
  live.metadata.uid = "0b7e";
  live.metadata.resourceVersion = "42";
  live.metadata.annotations = {
    ...(live.metadata.annotations ?? {}),
    "deployment.kubernetes.io/revision": "1",
  };
  const container = (live.spec as { template: { spec: { containers: Record<string, unknown>[] } } }).template
    .spec.containers[0]!;
  container.imagePullPolicy = "IfNotPresent";
  container.terminationMessagePath = "/dev/termination-log";
  container.resources = { requests: { cpu: "0.1", memory: "1024Mi" } };
  live.status = { availableReplicas: 1 };
  return live;
}

describe("desired vs live", () => {
  it("a live object with server defaults, status and equal quantities is up to date", () => {
    const desired = withDesiredHash(deployment(1));
    expect(isUpToDate(desired, asServerReturns(desired))).toBe(true);
  });

  it("a field edited by hand on the cluster is drift", () => {
    const desired = withDesiredHash(deployment(2));
    const live = asServerReturns(desired);
    (live.spec as { replicas: number }).replicas = 5;
    expect(isUpToDate(desired, live)).toBe(false);
  });

  it("a changed desired object (a removed env var) needs apply although live still contains it", () => {
    const before = withDesiredHash(deployment(1, [{ name: "A", value: "1" }]));
    const after = withDesiredHash(deployment(1));
    const live = asServerReturns(before);
    expect(containsDesired(after.spec, live.spec)).toBe(true);
    expect(isUpToDate(after, live)).toBe(false);
  });

  it("a missing object is never up to date", () => {
    expect(isUpToDate(withDesiredHash(deployment(1)), undefined)).toBe(false);
  });

  it("list elements match in order and tolerate entries other managers added", () => {
    expect(containsDesired({ l: [{ a: 1 }, { b: 2 }] }, { l: [{ a: 1 }, { x: 9 }, { b: 2, c: 3 }] })).toBe(
      true,
    );
    expect(containsDesired({ l: [{ a: 1 }, { b: 2 }] }, { l: [{ b: 2 }, { a: 1 }] })).toBe(false);
    expect(containsDesired({ l: [] }, {})).toBe(true);
    expect(containsDesired({ r: {} }, {})).toBe(true);
    expect(containsDesired({ r: { a: "x" } }, {})).toBe(false);
    // omitempty: an env var with value "" comes back without `value`.
    expect(containsDesired({ env: [{ name: "A", value: "" }] }, { env: [{ name: "A" }] })).toBe(true);
    expect(containsDesired({ readOnly: false, port: 0 }, {})).toBe(true);
    expect(containsDesired({ readOnly: true }, {})).toBe(false);
  });

  it("canonical JSON sorts keys at every depth, leaves out undefined members and keeps array order", () => {
    expect(canonicalJson({ b: [3, { d: 1, c: undefined, a: null }], a: "\u2028é" })).toBe(
      '{"a":"\u2028é","b":[3,{"a":null,"d":1}]}',
    );
    expect(canonicalJson([])).toBe("[]");
    expect(canonicalJson({})).toBe("{}");
    expect(canonicalJson("x")).toBe('"x"');
    // Integer-like keys come first, in numeric order, as every JavaScript object (and so JSON) holds them.
    expect(canonicalJson({ b: 1, "10": 2, a: 3, "9": 4 })).toBe('{"9":4,"10":2,"a":3,"b":1}');
    // Large objects too (sorted another way than small ones), and the input is left as it was.
    const keys = Array.from({ length: 200 }, (_, i) => `k${String(i).padStart(3, "0")}`);
    const shuffled = Object.fromEntries(
      keys.map((_, i) => keys[(i * 7) % 200]!).map((k) => [k, { z: k, y: [k] }]),
    );
    expect(canonicalJson(shuffled)).toBe(
      `{${keys.map((k) => `${JSON.stringify(k)}:{"y":[${JSON.stringify(k)}],"z":${JSON.stringify(k)}}`).join(",")}}`,
    );
    expect(Object.keys(shuffled).slice(0, 2)).toEqual(["k000", "k007"]);
  });

  it("the hash is sha256 of the canonical JSON, however long: live objects stamped by earlier versions stay up to date", () => {
    // A schema 30 levels deep with a 40,000-character description, deeper and longer than a CRD's.
    let schema: Record<string, unknown> = { type: "string", description: "x".repeat(40_000) };
    for (let depth = 0; depth < 30; depth++)
      schema = { type: "object", properties: { [`field${depth}`]: schema, other: { type: "integer" } } };
    const crd: KubeObject = {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "deep.example.dev", annotations: { [DESIRED_HASH_ANNOTATION]: "old" } },
      spec: { versions: [{ name: "v1", schema: { openAPIV3Schema: schema } }] },
    };
    const { [DESIRED_HASH_ANNOTATION]: _, ...annotations } = crd.metadata.annotations ?? {};
    const json = canonicalJson({ ...crd, metadata: { ...crd.metadata, annotations } });
    expect(json).toBe(JSON.stringify(JSON.parse(json)));
    expect(desiredHash(crd)).toBe(createHash("sha256").update(json).digest("hex").slice(0, 32));
  });

  it("every object of the real Serving and Eventing releases: canonical JSON is its sorted-key JSON, and the hash sha256 of it", async () => {
    const source = createKodataSource({ dir: knativeReleasesDir() });
    const objects = [
      ...(await source.componentManifests("knative-serving", "1.22.1")),
      ...(await source.componentManifests("knative-eventing", "1.22.2")),
    ];
    expect(objects.filter((o) => o.kind === "CustomResourceDefinition").length).toBeGreaterThan(20);
    const sortedKeys = (_key: string, value: unknown) =>
      value === null || typeof value !== "object" || Array.isArray(value)
        ? value
        : Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    for (const object of objects) {
      const json = canonicalJson(object);
      expect(json).toBe(JSON.stringify(object, sortedKeys));
      const { [DESIRED_HASH_ANNOTATION]: _, ...annotations } = object.metadata.annotations ?? {};
      const unstamped = canonicalJson({ ...object, metadata: { ...object.metadata, annotations } });
      expect(desiredHash(object)).toBe(createHash("sha256").update(unstamped).digest("hex").slice(0, 32));
    }
  });

  it("the hash ignores the hash annotation and key order", () => {
    const a = deployment(1);
    const b = {
      ...deployment(1),
      metadata: { namespace: "knative-serving", labels: { app: "controller" }, name: "controller" },
    };
    expect(desiredHash(a)).toBe(desiredHash(b as KubeObject));
    const stamped = withDesiredHash(a);
    expect(stamped.metadata.annotations?.[DESIRED_HASH_ANNOTATION]).toBe(desiredHash(stamped));
    expect(desiredHash(deployment(2))).not.toBe(desiredHash(a));
  });

  it("parses Kubernetes quantities", () => {
    expect(parseQuantity("100m")).toBeCloseTo(0.1);
    expect(parseQuantity("1Gi")).toBe(1024 ** 3);
    expect(parseQuantity("1e3")).toBe(1000);
    expect(parseQuantity("2k")).toBe(2000);
    expect(parseQuantity("ko://x")).toBeUndefined();
    expect(containsDesired("8080", 8080)).toBe(true);
    expect(containsDesired("1000m", "1")).toBe(true);
    expect(containsDesired("1Mi", "1M")).toBe(false);
  });
});
