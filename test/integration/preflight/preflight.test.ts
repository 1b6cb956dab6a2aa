import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterAccess } from "../../../src/access/cluster-access.ts";
import { loadProviderConfig } from "../../../src/access/provider-config.ts";
import { createTargetResolver } from "../../../src/access/target.ts";
import type { KnativeResource } from "../../../src/api/knative.ts";
import { createPreflight, type Preflight } from "../../../src/preflight/index.ts";
import { COMPONENT_OF_KIND, createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { crObject } from "../../support/fleet-files.ts";
import { installGatewayApi, removeGatewayApi } from "../../support/gateway-api.ts";
import { adminClient } from "../../support/hub.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// The preflight against real kube-apiservers, through the cluster access the reconcile uses: one spoke gets
// the Gateway API's CRDs (minimal ones, under their real names), the other has none; a Serving with the
// gateway-api ingress passes on the first and fails on the second with GatewayAPIMissing, until the CRDs
// are installed there too and the cached survey is forgotten.

const sandbox = loadSandbox();
const [withCrds, without] = [sandbox.spokes.at(-2)!, sandbox.spokes.at(-1)!];
const hub = adminClient(sandbox.hub);
const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const serving = (spoke: string): KnativeResource =>
  crObject({
    name: "preflight",
    cluster: spoke,
    clusterNamespace: sandbox.clusterProfileNamespace,
    version: "1.22",
    spec: { ingress: { "gateway-api": { enabled: true } } },
  }) as KnativeResource;
const refOf = (spoke: string) => ({ namespace: sandbox.clusterProfileNamespace, name: spoke });

describe("preflight on real spokes: the Gateway API's CRDs", () => {
  let access: ClusterAccess;
  let preflight: Preflight;

  beforeAll(async () => {
    await removeGatewayApi(adminClient(without));
    await installGatewayApi(adminClient(withCrds));
    access = new ClusterAccess({
      hub,
      providers: await loadProviderConfig(sandbox.providerFile),
      namespaces: [sandbox.clusterProfileNamespace],
    });
    preflight = createPreflight({
      targets: createTargetResolver(hub, access),
      releases: (kind) => releases.availableVersions(COMPONENT_OF_KIND[kind]),
      ttlMs: 60_000,
    });
  }, 120_000);

  afterAll(async () => {
    await access?.close();
    await removeGatewayApi(adminClient(withCrds));
    await removeGatewayApi(adminClient(without));
  });

  it("passes where they are installed and fails with GatewayAPIMissing where they are not", async () => {
    expect(await preflight.check(refOf(withCrds.name), serving(withCrds.name))).toEqual({
      passed: true,
      findings: [],
    });
    expect(await preflight.check(refOf(without.name), serving(without.name))).toEqual({
      passed: false,
      findings: [
        {
          severity: "error",
          reason: "GatewayAPIMissing",
          message:
            "spec.ingress.gateway-api.enabled needs the Gateway API CRDs (standard channel) and an implementation " +
            "on the cluster; missing CRDs: gateways.gateway.networking.k8s.io, httproutes.gateway.networking.k8s.io, " +
            "referencegrants.gateway.networking.k8s.io",
        },
      ],
    });
  });

  it("keeps a cluster's survey for the TTL, and reads it again once forgotten", async () => {
    await installGatewayApi(adminClient(without));
    expect((await preflight.check(refOf(without.name), serving(without.name))).passed).toBe(false);
    preflight.forget(refOf(without.name));
    expect(await preflight.check(refOf(without.name), serving(without.name))).toEqual({
      passed: true,
      findings: [],
    });
  });

  it("the sandbox spokes' Kubernetes runs Knative 1.23; a Serving without ingress needs Istio", async () => {
    const istio = crObject({
      name: "preflight",
      cluster: withCrds.name,
      clusterNamespace: sandbox.clusterProfileNamespace,
      version: "latest",
    }) as KnativeResource;
    const result = await preflight.check(refOf(withCrds.name), istio);
    expect(result.findings.map((f) => f.reason)).toEqual(["IstioMissing"]);
  });
});
