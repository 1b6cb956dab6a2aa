import { describe, expect, it } from "vitest";
import type { TargetResolution, TargetResolver } from "../../../src/access/target.ts";
import type { KnativeResource } from "../../../src/api/knative.ts";
import { KubeClient } from "../../../src/kube/client.ts";
import { KubeApiError, RestClient, type RestRequest, type RestResponse } from "../../../src/kube/rest.ts";
import { createPreflight, SpokeSurveys, surveySpoke } from "../../../src/preflight/index.ts";
import { crObject } from "../../support/fleet-files.ts";

/** A spoke that answers /version and the CRD list, and records what it was asked. */
class FakeSpoke extends RestClient {
  readonly asked: RestRequest[] = [];
  crds: string[] = [];
  gitVersion: string | undefined = "v1.35.4";
  refuseCrds: number | undefined;
  down = false;

  constructor() {
    super({ server: "https://spoke.test", connect: () => Promise.reject(new Error("no network")) });
  }

  override async request<T>(req: RestRequest): Promise<RestResponse<T>> {
    this.asked.push(req);
    if (this.down) throw new TypeError("fetch failed");
    if (req.path === "/version") return { status: 200, body: { gitVersion: this.gitVersion } as T };
    if (this.refuseCrds !== undefined) {
      throw new KubeApiError(
        "GET",
        req.path,
        this.refuseCrds,
        "Forbidden",
        "customresourcedefinitions is forbidden",
      );
    }
    const items = this.crds.map((name) => ({ metadata: { name } }));
    return { status: 200, body: { kind: "PartialObjectMetadataList", items } as T };
  }
}

const spoke = () => {
  const rest = new FakeSpoke();
  return { rest, client: new KubeClient(rest) };
};

describe("surveySpoke", () => {
  it("reads /version and the CRD names in one metadata-only list from the watch cache", async () => {
    const { rest, client } = spoke();
    rest.crds = ["httproutes.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io"];
    const facts = await surveySpoke(client);
    expect(facts).toEqual({
      kubernetesVersion: "v1.35.4",
      crds: new Set(["httproutes.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io"]),
    });
    expect(rest.asked.find((r) => r.path !== "/version")).toEqual({
      method: "GET",
      path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
      query: { resourceVersion: "0" },
      accept: "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    });
  });

  it("a refused list is unknown CRDs, with the permission to grant; a cluster that is down throws", async () => {
    const { rest, client } = spoke();
    rest.refuseCrds = 403;
    expect(await surveySpoke(client)).toEqual({
      kubernetesVersion: "v1.35.4",
      crds: undefined,
      crdsError:
        "the cluster's credential may not list customresourcedefinitions (apiextensions.k8s.io): grant list on them",
    });
    rest.down = true;
    await expect(surveySpoke(client)).rejects.toThrow("fetch failed");
  });

  it("takes the version from the caller when it keeps one", async () => {
    const { rest, client } = spoke();
    const facts = await surveySpoke(client, { kubernetesVersion: async () => "v1.31.0+k3s1" });
    expect(facts.kubernetesVersion).toBe("v1.31.0+k3s1");
    expect(rest.asked.map((r) => r.path)).not.toContain("/version");
  });
});

describe("SpokeSurveys: one survey per cluster per TTL", () => {
  const crdLists = (rest: FakeSpoke) => rest.asked.filter((r) => r.path !== "/version").length;

  it("shares one survey between concurrent checks and keeps it for the TTL", async () => {
    let now = 0;
    const surveys = new SpokeSurveys({ ttlMs: 1_000, now: () => now });
    const { rest, client } = spoke();
    await Promise.all([surveys.facts("ns/a", client), surveys.facts("ns/a", client)]);
    now = 999;
    await surveys.facts("ns/a", client);
    expect(crdLists(rest)).toBe(1);
    now = 1_000;
    rest.crds = ["certificates.cert-manager.io"];
    expect((await surveys.facts("ns/a", client)).crds).toEqual(new Set(["certificates.cert-manager.io"]));
    expect(crdLists(rest)).toBe(2);
  });

  it("keys by cluster, reads again for a new client or after forget, and keeps no failure", async () => {
    const surveys = new SpokeSurveys({ ttlMs: 60_000 });
    const first = spoke();
    const second = spoke();
    await surveys.facts("ns/a", first.client);
    await surveys.facts("ns/b", second.client);
    expect([crdLists(first.rest), crdLists(second.rest)]).toEqual([1, 1]);
    const replaced = spoke();
    await surveys.facts("ns/a", replaced.client);
    expect(crdLists(replaced.rest)).toBe(1);
    surveys.forget("ns/b");
    await surveys.facts("ns/b", second.client);
    expect(crdLists(second.rest)).toBe(2);

    second.rest.down = true;
    await expect(surveys.facts("ns/c", second.client)).rejects.toThrow("fetch failed");
    second.rest.down = false;
    await surveys.facts("ns/c", second.client);
    expect(crdLists(second.rest)).toBe(4);
  });
});

describe("createPreflight over the target resolver", () => {
  const desired = crObject({
    name: "serving",
    cluster: "spoke-1",
    version: "latest",
    spec: { ingress: { "gateway-api": { enabled: true } } },
  }) as KnativeResource;
  const resolver = (resolution: TargetResolution): TargetResolver => ({ resolve: async () => resolution });

  it("checks the resolved cluster's facts, with latest resolved against the releases", async () => {
    const { rest, client } = spoke();
    rest.crds = ["gateways.gateway.networking.k8s.io"];
    let versionReads = 0;
    const preflight = createPreflight({
      targets: resolver({
        ok: true,
        client,
        cluster: "fleet-system/spoke-1",
        local: false,
        kubernetesVersion: async ({ fresh = false } = {}) => {
          versionReads += fresh ? 1 : 0;
          return "v1.33.5-gke.1080000";
        },
      }),
      releases: async (kind) => (kind === "KnativeServing" ? ["1.22.1", "1.21.3"] : []),
      now: () => new Date("2026-06-01T00:00:00Z"),
    });
    const result = await preflight.check({ namespace: "fleet-system", name: "spoke-1" }, desired);
    expect(result.passed).toBe(false);
    expect(result.findings.map((f) => f.reason)).toEqual([
      "KubernetesVersionUnsupported",
      "GatewayAPIMissing",
    ]);
    expect(result.findings[0]!.message).toContain("Knative 1.22.1");
    await preflight.check({ namespace: "fleet-system", name: "spoke-1" }, desired);
    expect(versionReads).toBe(1);
    preflight.forget({ namespace: "fleet-system", name: "spoke-1" });
    await preflight.check({ namespace: "fleet-system", name: "spoke-1" }, desired);
    expect(versionReads).toBe(2);
  });

  it("an unreachable cluster fails with the access reason; a failed read with PreflightFailed", async () => {
    const unreachable = createPreflight({
      targets: resolver({ ok: false, reason: "ClusterProfileNotFound", message: "no such ClusterProfile" }),
    });
    expect(await unreachable.check({ namespace: "fleet-system", name: "gone" }, desired)).toEqual({
      passed: false,
      findings: [{ severity: "error", reason: "ClusterProfileNotFound", message: "no such ClusterProfile" }],
    });
    const { rest, client } = spoke();
    rest.down = true;
    const down = createPreflight({
      targets: resolver({
        ok: true,
        client,
        cluster: "fleet-system/spoke-1",
        local: false,
        kubernetesVersion: async () => "v1.35.4",
      }),
    });
    expect(await down.check({ namespace: "fleet-system", name: "spoke-1" }, desired)).toEqual({
      passed: false,
      findings: [
        { severity: "error", reason: "PreflightFailed", message: "fleet-system/spoke-1: fetch failed" },
      ],
    });
  });
});
