import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { diffObjects } from "../../../src/plan/diff.ts";
import { MASKED, maskText } from "../../../src/plan/mask.ts";

const deployment = (containers: object[], extra: Partial<KubeObject> = {}): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "controller", namespace: "knative-serving" },
  spec: { template: { spec: { containers } } },
  ...extra,
});

const role = (rules: object[]): KubeObject => ({
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "ClusterRole",
  metadata: { name: "knative-serving-core" },
  rules,
});

describe("diffObjects", () => {
  it("matches named list elements by name: a container added in front changes nothing else", () => {
    const controller = { name: "controller", image: "ctrl:1", env: [{ name: "A", value: "1" }] };
    const before = deployment([controller]);
    const after = deployment([
      { name: "proxy", image: "proxy:1" },
      { ...controller, image: "ctrl:2" },
    ]);
    expect(diffObjects(before, after)).toEqual([
      { path: "spec.template.spec.containers[name=proxy].image", after: "proxy:1" },
      { path: "spec.template.spec.containers[name=proxy].name", after: "proxy" },
      { path: "spec.template.spec.containers[name=controller].image", before: "ctrl:1", after: "ctrl:2" },
    ]);
  });

  it("aligns unnamed elements on the unchanged ones: one rule inserted shows as one rule", () => {
    const read = { apiGroups: [""], resources: ["pods"], verbs: ["get"] };
    const write = { apiGroups: ["apps"], resources: ["deployments"], verbs: ["update"] };
    const inserted = { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list"] };
    expect(diffObjects(role([read, write]), role([read, inserted, write]))).toEqual([
      { path: "rules[1].apiGroups", after: ["discovery.k8s.io"] },
      { path: "rules[1].resources", after: ["endpointslices"] },
      { path: "rules[1].verbs", after: ["list"] },
    ]);
  });

  it("compares an edited unnamed element in place", () => {
    const read = { apiGroups: [""], resources: ["pods"], verbs: ["get"] };
    expect(diffObjects(role([read]), role([{ ...read, verbs: ["get", "list"] }]))).toEqual([
      { path: "rules[0].verbs", before: ["get"], after: ["get", "list"] },
    ]);
  });

  it("ignores what the API server writes and the desired-hash; quotes keys with dots", () => {
    const live = deployment([], {
      metadata: {
        name: "controller",
        namespace: "knative-serving",
        resourceVersion: "41",
        generation: 3,
        uid: "u-1",
        managedFields: [{ manager: "knative-fleet" }],
        annotations: { [DESIRED_HASH_ANNOTATION]: "old" },
        labels: { "app.kubernetes.io/version": "1.21.3" },
      },
      status: { replicas: 1 },
    });
    const applied = deployment([], {
      metadata: {
        name: "controller",
        namespace: "knative-serving",
        resourceVersion: "42",
        generation: 4,
        uid: "u-1",
        managedFields: [{ manager: "knative-fleet", time: "later" }],
        annotations: { [DESIRED_HASH_ANNOTATION]: "new" },
        labels: { "app.kubernetes.io/version": "1.22.1" },
      },
      status: { replicas: 2 },
    });
    expect(diffObjects(live, applied)).toEqual([
      { path: 'metadata.labels["app.kubernetes.io/version"]', before: "1.21.3", after: "1.22.1" },
    ]);
  });

  it("reports a field removed, and a scalar list changed as a whole", () => {
    const before = deployment([{ name: "c", args: ["-a"], resources: { limits: { cpu: "1" } } }]);
    const after = deployment([{ name: "c", args: ["-a", "-b"] }]);
    expect(diffObjects(before, after)).toEqual([
      { path: "spec.template.spec.containers[name=c].args", before: ["-a"], after: ["-a", "-b"] },
      { path: "spec.template.spec.containers[name=c].resources.limits.cpu", before: "1" },
    ]);
  });
});

describe("masking", () => {
  it("masks every value of a Secret's data but keeps its keys", () => {
    const secret = (data: Record<string, string>): KubeObject => ({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "webhook-certs", namespace: "knative-serving" },
      data,
    });
    expect(
      diffObjects(secret({ "tls.key": "b2xk" }), secret({ "tls.key": "bmV3", "ca.crt": "Y2E=" })),
    ).toEqual([
      { path: 'data["ca.crt"]', after: MASKED },
      { path: 'data["tls.key"]', before: MASKED, after: MASKED },
    ]);
  });

  it("masks credential-named fields and credential-looking values, not pointers to a Secret", () => {
    const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXZhbHVl";
    const before = deployment([{ name: "c", env: [{ name: "DB_PASSWORD", value: "hunter2" }] }]);
    const after = deployment([
      {
        name: "c",
        env: [
          { name: "DB_PASSWORD", value: "hunter3" },
          { name: "HEADER", value: `Bearer ${jwt}` },
        ],
        volumeMounts: [{ name: "certs", mountPath: "/certs" }],
      },
    ]);
    after.spec = {
      ...(after.spec as object),
      clientSecret: "s3cr3t",
      secretName: "webhook-certs",
      url: "https://bot:glpat-abcdefghijklmnopqrst@git.example/fleet.git",
    };
    const changes = diffObjects(before, after);
    const values = JSON.stringify(changes);
    for (const secret of ["hunter2", "hunter3", jwt, "s3cr3t", "glpat-abcdefghijklmnopqrst"]) {
      expect(values).not.toContain(secret);
    }
    expect(changes).toContainEqual({ path: "spec.secretName", after: "webhook-certs" });
    expect(changes).toContainEqual({
      path: "spec.template.spec.containers[name=c].env[name=DB_PASSWORD].value",
      before: MASKED,
      after: MASKED,
    });
  });

  it("maskText keeps a URL's host and drops its credentials", () => {
    expect(maskText("fetch https://oauth2:tok3n@gitlab.example/fleet.git failed")).toBe(
      "fetch https://(masked)@gitlab.example/fleet.git failed",
    );
    expect(maskText("key -----BEGIN RSA PRIVATE KEY----- abc")).toBe(MASKED);
    expect(maskText("no such branch main")).toBe("no such branch main");
  });
});
