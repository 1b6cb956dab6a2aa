import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION, GATE_SECRET_LABEL } from "../../../src/api/labels.ts";
import { RolloutDocumentSchema } from "../../../src/fleet/rollout-schema.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { RolloutState } from "../../../src/rollout/state.ts";
import { crsToVerify, verify } from "../../../src/rollout/verification.ts";
import { readSecretKey } from "../../../src/verify/secret.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { cluster, crObject } from "../../support/fleet-files.ts";

// Which hub CRs the policy's verification gates check in a sync, and how their failures reach the gate.

const spec = (
  gates: unknown[] = [{ name: "errors", http: { url: "http://127.0.0.1:1/{{ .cluster.name }}" } }],
) =>
  RolloutDocumentSchema.parse({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeRollout",
    metadata: { name: "knative", namespace: "knative-fleet" },
    spec: {
      waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
      gates,
    },
  }).spec;
const CLUSTERS = [cluster("c1"), cluster("c2"), cluster("c3")];

function hubCr(name: string, hash: string, ready: boolean): KubeObject {
  const cr = crObject({ name: `${name}-serving`, cluster: name });
  return {
    ...cr,
    metadata: { ...cr.metadata, generation: 1, annotations: { [DESIRED_HASH_ANNOTATION]: hash } },
    status: {
      observedGeneration: 1,
      conditions: ["DeploymentsAvailable", "Ready"].map((type) => ({
        type,
        status: ready ? "True" : "False",
      })),
    },
  } as KubeObject;
}

const state = (phase: RolloutState["phase"]): RolloutState => ({
  schema: 2,
  phase,
  commit: "b",
  startedAt: "2026-11-28T10:00:00Z",
  waves: {},
  crs: Object.fromEntries(
    ["c1", "c2", "c3"].map((c) => [
      `KnativeServing knative-fleet/${c}-serving`,
      { baseline: { hash: "aa", commit: "a" } },
    ]),
  ),
});

describe("verification gates in the rollout", () => {
  it("checks the CRs Ready on content changed since their baseline, with their wave, while a rollout runs", () => {
    const live = [hubCr("c1", "bb", true), hubCr("c2", "aa", true), hubCr("c3", "bb", false)];
    expect(crsToVerify(spec(), CLUSTERS, state("Progressing"), live)).toEqual([
      { key: "KnativeServing knative-fleet/c1-serving", cluster: CLUSTERS[0], wave: "canary" },
    ]);
    expect(crsToVerify(spec(), CLUSTERS, state("Complete"), live)).toEqual([]);
    expect(crsToVerify(spec(), CLUSTERS, state("Halted"), live)).toEqual([]);
    // A gate for another wave checks nothing here.
    expect(
      crsToVerify(
        spec([{ name: "ring", waves: ["remaining"], http: { url: "http://127.0.0.1:1/" } }]),
        CLUSTERS,
        state("Progressing"),
        live,
      ),
    ).toEqual([]);
    const { gates: _gates, ...withoutGates } = spec();
    expect(crsToVerify(withoutGates, CLUSTERS, state("Progressing"), live)).toEqual([]);
    // A cluster the inventory does not hold is not checked (its CR is no member).
    expect(crsToVerify(spec(), CLUSTERS.slice(1), state("Progressing"), live)).toEqual([]);
  });

  it("a failing gate's details reach the gate by key; the cost is counted", async () => {
    const crs = crsToVerify(spec(), CLUSTERS, state("Progressing"), [
      hubCr("c1", "bb", true),
      hubCr("c2", "bb", true),
    ]);
    const { failing, cost } = await verify(crs, async (target, options) => [
      {
        gate: "errors",
        cluster: target.name,
        passed: target.name !== "c2",
        detail: `gate errors: ${target.name} in ${options.wave}`,
        requests: 2,
        durationMs: 1,
      },
      {
        gate: "probe",
        cluster: target.name,
        passed: target.name !== "c2",
        detail: "gate probe: 503",
        requests: 3,
        durationMs: 1,
      },
    ]);
    expect([...failing]).toEqual([
      ["KnativeServing knative-fleet/c2-serving", "gate errors: c2 in remaining; gate probe: 503"],
    ]);
    expect(cost).toMatchObject({ crs: 2, requests: 10 });
  });

  it("reads a gate's token only from a Secret a person labelled for it", async () => {
    const kube = new FakeKube();
    const secret = (name: string, labelled: boolean) =>
      kube.put({
        apiVersion: "v1",
        kind: "Secret",
        metadata: {
          name,
          namespace: "knative-fleet",
          ...(labelled && { labels: { [GATE_SECRET_LABEL]: "true" } }),
        },
        data: { token: Buffer.from("s3cret\n").toString("base64") },
      } as KubeObject);
    secret("prometheus-token", true);
    secret("knative-fleet-rollout-key", false);
    await expect(
      readSecretKey(kube.client, "knative-fleet", { name: "prometheus-token", key: "token" }),
    ).resolves.toBe("s3cret");
    await expect(
      readSecretKey(kube.client, "knative-fleet", { name: "knative-fleet-rollout-key", key: "token" }),
    ).rejects.toThrow(`is not labelled ${GATE_SECRET_LABEL}=true`);
    await expect(
      readSecretKey(kube.client, "knative-fleet", { name: "prometheus-token", key: "other" }),
    ).rejects.toThrow("has no key other");
    await expect(
      readSecretKey(kube.client, "knative-fleet", { name: "missing", key: "token" }),
    ).rejects.toThrow("not found");
  });
});

describe("which CRs the gates check", () => {
  const live = [hubCr("c1", "bb", true), hubCr("c2", "bb", true)];

  it("an allAtOnce rollout (an emergency change) runs no gate, whatever gates the policy has", () => {
    expect(crsToVerify(spec(), CLUSTERS, state("Progressing"), live)).toHaveLength(2);
    expect(crsToVerify({ ...spec(), allAtOnce: true }, CLUSTERS, state("Progressing"), live)).toEqual([]);
  });

  it("checks a CR the rollout creates (no baseline yet), and one the state has not seen", () => {
    const fresh: RolloutState = { ...state("Progressing"), crs: {} };
    expect(crsToVerify(spec(), CLUSTERS, fresh, live).map((v) => v.key)).toEqual([
      "KnativeServing knative-fleet/c1-serving",
      "KnativeServing knative-fleet/c2-serving",
    ]);
    const noBaseline: RolloutState = {
      ...state("Progressing"),
      crs: { "KnativeServing knative-fleet/c1-serving": { target: { hash: "bb", commit: "b" } } },
    };
    expect(crsToVerify(spec(), CLUSTERS, noBaseline, live).map((v) => v.key)).toContain(
      "KnativeServing knative-fleet/c1-serving",
    );
  });

  it("a gate checks only the waves it names; a CR is checked when any gate names its wave", () => {
    const ringOnly = { name: "ring", waves: ["remaining"], http: { url: "http://127.0.0.1:1/" } };
    const canaryOnly = { name: "canary-errors", waves: ["canary"], http: { url: "http://127.0.0.1:1/" } };
    const waves = (gates: unknown[]) =>
      crsToVerify(spec(gates), CLUSTERS, state("Progressing"), live).map((v) => [v.key, v.wave]);
    // c1 is the canary, c2 in the remaining wave.
    expect(waves([ringOnly])).toEqual([["KnativeServing knative-fleet/c2-serving", "remaining"]]);
    expect(waves([canaryOnly])).toEqual([["KnativeServing knative-fleet/c1-serving", "canary"]]);
    expect(waves([ringOnly, canaryOnly])).toEqual([
      ["KnativeServing knative-fleet/c1-serving", "canary"],
      ["KnativeServing knative-fleet/c2-serving", "remaining"],
    ]);
  });
});

describe("what the gates cost", () => {
  it("reports the time the gates took: at least their own wait, at most the call's", async () => {
    const crs = crsToVerify(spec(), CLUSTERS, state("Progressing"), [hubCr("c1", "bb", true)]);
    const before = performance.now();
    const { failing, cost } = await verify(crs, async (target) => {
      await new Promise((resolve) => setTimeout(resolve, 30));
      return [
        { gate: "errors", cluster: target.name, passed: true, detail: "", requests: 1, durationMs: 30 },
      ];
    });
    const took = performance.now() - before;
    expect(failing.size).toBe(0);
    expect(cost.crs).toBe(1);
    expect(cost.requests).toBe(1);
    // Timers may fire a millisecond early; the rounding adds at most half of one.
    expect(cost.durationMs).toBeGreaterThanOrEqual(28);
    expect(cost.durationMs).toBeLessThanOrEqual(Math.ceil(took) + 1);
  });

  it("costs nothing when no CR is checked", async () => {
    const evaluate = async () => {
      throw new Error("no gate runs");
    };
    const { failing, cost } = await verify([], evaluate);
    expect(failing.size).toBe(0);
    expect(cost.crs).toBe(0);
    expect(cost.requests).toBe(0);
    expect(cost.durationMs).toBeGreaterThanOrEqual(0);
    expect(cost.durationMs).toBeLessThan(1_000);
  });
});
