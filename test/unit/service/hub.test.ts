import { describe, expect, it } from "vitest";
import type { KubeClient } from "../../../src/kube/client.ts";
import { checkHubAnswers } from "../../../src/service/hub.ts";

// The start's check of the hub, against a fake REST client: no hub.

const kubeConfig = { getCurrentCluster: () => ({ name: "hub", server: "https://hub.example:6443" }) };

const hubAnswering = (answer: () => Promise<unknown>) => {
  const asked: unknown[] = [];
  const hub = {
    rest: {
      request: (request: unknown) => {
        asked.push(request);
        return answer();
      },
    },
  } as unknown as Pick<KubeClient, "rest">;
  return { hub, asked };
};

describe("checkHubAnswers", () => {
  it("asks the hub for GET /version", async () => {
    const { hub, asked } = hubAnswering(async () => ({ gitVersion: "v1.33.0" }));
    await checkHubAnswers(hub, kubeConfig as never);
    expect(asked).toEqual([{ method: "GET", path: "/version" }]);
  });

  it("an unreachable hub fails the start, naming its server, the transport error as the cause", async () => {
    const refused = new Error("connect ECONNREFUSED 10.0.0.1:6443");
    const { hub } = hubAnswering(() => Promise.reject(refused));
    const failure = await checkHubAnswers(hub, kubeConfig as never).catch((err: Error) => err);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toBe(
      "the hub API server https://hub.example:6443 did not answer GET /version: Error: connect ECONNREFUSED 10.0.0.1:6443",
    );
    expect((failure as Error).cause).toBe(refused);
  });
});
