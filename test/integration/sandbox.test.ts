import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadSandbox } from "../sandbox/index.ts";
import { type AdminEndpoint, apply, getJson, kubeRequest } from "../sandbox/kube-http.ts";
import { execCredential } from "../support/exec-credential.ts";
import { waitUntil } from "../support/wait.ts";

interface ProviderFile {
  providers: { name: string; execConfig: { command: string; env?: { name: string; value: string }[] } }[];
}
interface ClusterProfileStatus {
  status: {
    accessProviders: {
      name: string;
      cluster: {
        server: string;
        "certificate-authority-data": string;
        extensions: { name: string; extension: unknown }[];
      };
    }[];
  };
}

describe("the sandbox is real", () => {
  const sandbox = loadSandbox();
  const [spoke1, spoke2] = sandbox.spokes;
  const hub: AdminEndpoint = {
    server: sandbox.hub.server,
    caFile: sandbox.hub.caFile,
    certFile: sandbox.hub.caFile.replace(/ca\.crt$/, "admin.crt"),
    keyFile: sandbox.hub.caFile.replace(/ca\.crt$/, "admin.key"),
  };

  it("a secretreader credential deploys to spoke-1 (Available, then garbage-collected) and spoke-2 refuses it", async () => {
    // The ClusterProfile on the hub says how to reach the spoke; the provider file says which plugin.
    const profile = (await getJson(
      hub,
      `/apis/multicluster.x-k8s.io/v1alpha1/namespaces/${sandbox.clusterProfileNamespace}/clusterprofiles/${spoke1!.name}`,
    )) as ClusterProfileStatus;
    const access = profile.status.accessProviders.find((p) => p.name === "secretreader")!;
    const exec = access.cluster.extensions.find((e) => e.name === "client.authentication.k8s.io/exec")!;
    const providers = (JSON.parse(readFileSync(sandbox.providerFile, "utf8")) as ProviderFile).providers;
    const provider = providers.find((p) => p.name === "secretreader")!;
    const env = Object.fromEntries((provider.execConfig.env ?? []).map((e) => [e.name, e.value]));

    const token = await execCredential(provider.execConfig.command, env, {
      server: access.cluster.server,
      "certificate-authority-data": access.cluster["certificate-authority-data"],
      config: exec.extension,
    });
    expect(token.split(".")).toHaveLength(3); // a signed ServiceAccount JWT

    const spoke: AdminEndpoint = { server: access.cluster.server, caFile: spoke1!.caFile, token };
    const ns = `proof-${Date.now()}`;
    await apply(spoke, `/api/v1/namespaces/${ns}`, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns },
    });
    const path = `/apis/apps/v1/namespaces/${ns}/deployments/hello`;
    await apply(spoke, path, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "hello", namespace: ns },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: "hello" } },
        template: {
          metadata: { labels: { app: "hello" } },
          spec: { containers: [{ name: "hello", image: "registry.example/hello:1" }] },
        },
      },
    });
    const status = await waitUntil("Deployment Available", async () => {
      const d = (await getJson(spoke, path)) as {
        status?: { availableReplicas?: number; conditions?: { type: string; status: string }[] };
      };
      const available = d.status?.conditions?.some((c) => c.type === "Available" && c.status === "True");
      return available && d.status?.availableReplicas === 2 ? d.status : undefined;
    });
    expect(status.availableReplicas).toBe(2);

    // Garbage collection runs for real: deleting the Deployment takes its ReplicaSets and Pods with it.
    const del = await kubeRequest(spoke, "DELETE", path, { propagationPolicy: "Background" });
    expect(del.status).toBeLessThan(300);
    await waitUntil("pods garbage-collected", async () => {
      const pods = (await getJson(spoke, `/api/v1/namespaces/${ns}/pods`)) as { items: unknown[] };
      return pods.items.length === 0 ? true : undefined;
    });

    // The same token means nothing to another spoke: its own CA-signed issuer and keys.
    const other: AdminEndpoint = { server: spoke2!.server, caFile: spoke2!.caFile, token };
    const refused = await kubeRequest(other, "GET", "/api/v1/namespaces");
    expect(refused.status).toBe(401);
  });
});
