import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isDeploymentAvailable } from "../../../src/install/health.ts";
import { isReadyEndpoint } from "../../../src/install/webhooks.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { type AdminEndpoint, apply, getJson, kubeRequest } from "../../sandbox/kube-http.ts";
import { down, readSandbox, type Sandbox, up } from "../../sandbox/sandbox.ts";
import { execCredential } from "../../support/exec-credential.ts";
import { waitUntil } from "../../support/wait.ts";

// The big-fleet run (scripts/bench-fleet.ts) stands on the sandbox's bare spokes: an API server and kwok's
// stages, no controller-manager, scheduler or nodes. This proves what an install's readiness needs of them,
// judged by knative-fleet's own verdicts: the secretreader credential works (a TokenRequest token, with no
// controller to fill a token Secret), a Deployment becomes Available at each generation, and a Service
// with a selector gets a ready endpoint (the webhook gate), one without none. Its own sandbox, one spoke.

describe("the sandbox's bare spokes", () => {
  let sandbox: Sandbox;
  let spoke: AdminEndpoint;
  beforeAll(async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "bare-spokes-"));
    sandbox = await up({ stateDir, spokes: 1, spokeKind: "bare", log: () => {} });
    const [spoke1] = sandbox.spokes;
    const provider = (
      JSON.parse(readFileSync(sandbox.providerFile, "utf8")) as {
        providers: {
          name: string;
          execConfig: { command: string; env: { name: string; value: string }[] };
        }[];
      }
    ).providers.find((p) => p.name === "secretreader")!;
    const token = await execCredential(
      provider.execConfig.command,
      Object.fromEntries(provider.execConfig.env.map((e) => [e.name, e.value])),
      {
        server: spoke1!.server,
        "certificate-authority-data": spoke1!.caData,
        config: { clusterName: spoke1!.name },
      },
    );
    spoke = { server: spoke1!.server, caFile: spoke1!.caFile, token };
  }, 180_000);
  afterAll(async () => {
    if (sandbox) await down(sandbox.stateDir);
  });

  it("runs the API server and kwok only, and says so in its state", () => {
    expect(readSandbox(sandbox.stateDir)?.spokeKind).toBe("bare");
    const pids = readFileSync(join(sandbox.stateDir, "pids", "spoke-1-kwok.json"), "utf8");
    expect(JSON.parse(pids).pid).toBeGreaterThan(0);
    expect(() =>
      readFileSync(join(sandbox.stateDir, "pids", "spoke-1-kube-controller-manager.json")),
    ).toThrow();
  });

  it("brings a Deployment to Available at each generation, through the fleet's credential", async () => {
    const ns = `bare-${Date.now()}`;
    await apply(spoke, `/api/v1/namespaces/${ns}`, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns },
    });
    const path = `/apis/apps/v1/namespaces/${ns}/deployments/webhook`;
    const deployment = (image: string) => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "webhook", namespace: ns },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: "webhook" } },
        template: {
          metadata: { labels: { app: "webhook" } },
          spec: { containers: [{ name: "webhook", image }] },
        },
      },
    });
    const availableAt = (generation: number) =>
      waitUntil(`Deployment Available at generation ${generation}`, async () => {
        const d = (await getJson(spoke, path)) as KubeObject;
        return d.metadata.generation === generation && isDeploymentAvailable(d) ? d : undefined;
      });
    await apply(spoke, path, deployment("registry.example/webhook:1"));
    expect((await availableAt(1)).status).toMatchObject({
      replicas: 2,
      updatedReplicas: 2,
      availableReplicas: 2,
    });
    // An upgrade changes the pod template: a new generation, Available again only once observed.
    await apply(spoke, path, deployment("registry.example/webhook:2"));
    expect((await availableAt(2)).status).toMatchObject({ observedGeneration: 2 });

    const service = (name: string, selector?: object) =>
      apply(spoke, `/api/v1/namespaces/${ns}/services/${name}`, {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name, namespace: ns },
        spec: selector
          ? { selector, ports: [{ name: "https-webhook", port: 443, targetPort: 8443 }] }
          : { type: "ExternalName", externalName: "example.invalid" },
      });
    // In this order, so that kwok has seen the Service without a selector once the other's slice is there.
    await service("outside");
    await service("webhook", { app: "webhook" });
    const slicesOf = async (name: string) =>
      (
        (await getJson(
          spoke,
          `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices?labelSelector=kubernetes.io/service-name=${name}`,
        )) as { items: { endpoints?: unknown[]; ports?: { port: number }[] }[] }
      ).items;
    const slices = await waitUntil("the webhook Service's EndpointSlice", async () => {
      const found = await slicesOf("webhook");
      return found.length > 0 ? found : undefined;
    });
    expect(slices).toHaveLength(1);
    expect(slices[0]!.endpoints!.filter(isReadyEndpoint)).toHaveLength(1);
    expect(slices[0]!.ports).toEqual([expect.objectContaining({ port: 8443 })]);
    expect(await slicesOf("outside")).toEqual([]);

    const denied = await kubeRequest({ ...spoke, token: "not-a-token" }, "GET", "/api/v1/namespaces");
    expect(denied.status).toBe(401);
  });
});
