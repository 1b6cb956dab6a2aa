import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { clientFromKubeConfig, loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crText } from "../../support/fleet-files.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { planOfFiles } from "./support.ts";

// A live plan whose spoke refuses the connection: that CR's part is offline, said in one ⚠️ line of the
// findings and once in its section; no stack frame, and the change itself is not counted as wrong.

const PATH = "clusters/spoke-1/knative-serving.yaml";

/** A loopback port that refuses connections: opened to get a free one, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("a live plan whose spoke refuses the connection", { timeout: 60_000 }, () => {
  it("plans that CR offline with one ⚠️ finding naming the cluster and the refusal", async () => {
    const port = await closedPort();
    const kubeconfig = writeTokenKubeconfig(
      { server: `https://127.0.0.1:${port}`, "insecure-skip-tls-verify": true },
      "t",
    );
    const spoke = clientFromKubeConfig(loadKubeConfig(kubeconfig));
    const head = crText({
      name: "spoke-1-serving",
      cluster: "spoke-1",
      spec: { ingress: { kourier: { enabled: true } } },
    });
    const plan = await planOfFiles(
      {},
      { [PATH]: head },
      {
        clusters: {
          hub: new FakeKube().client,
          targets: {
            resolve: async () => ({
              ok: true,
              client: spoke,
              cluster: "fleet-system/spoke-1",
              local: false,
              kubernetesVersion: async () => undefined,
            }),
          },
        },
      },
    );
    const [resource] = plan.clusters.flatMap((cluster) => cluster.resources);
    expect(resource).toMatchObject({ source: "offline", action: "create" });
    expect(resource!.findings).toEqual([
      { severity: "warning", code: "cluster-unreachable", message: `connect ECONNREFUSED 127.0.0.1:${port}` },
    ]);
    expect(plan.errors).toBe(0);
    const text = renderMarkdown(plan);
    expect(text).not.toMatch(/^\s+at |TCPConnectWrap/m);
    expect(text.split("\n").filter((line) => line.startsWith("- ⚠️"))).toEqual([
      `- ⚠️ fleet-system/spoke-1, KnativeServing knative-fleet/spoke-1-serving: \`cluster-unreachable\` connect ECONNREFUSED 127.0.0.1:${port}`,
    ]);
    expect(text.match(/ECONNREFUSED/g)).toHaveLength(2); // the finding, and the CR's offline line
    expect(text).toMatch(/\| create 1\.\d+\.\d+ \(offline: cluster unreachable\) \| \+\d+ ~0 -0 \|/);
  });
});
