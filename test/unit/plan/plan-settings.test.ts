import { writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crText } from "../../support/fleet-files.ts";
import { fleetRepo, planJson, resourceOf } from "./support.ts";

// `plan --config`: the service's settings decide what a pull request may make the CI runner fetch.

let server: Server;
let base = "";
const fetched: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    fetched.push(req.url ?? "");
    res.end("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: knative-serving\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("plan and manifest locations", { timeout: 60_000 }, () => {
  it("refuses a location no config allows, without fetching it; --config can allow it", async () => {
    const repo = await fleetRepo();
    const SERVING = "clusters/spoke-1/knative-serving.yaml";
    await repo.commit("main", { [SERVING]: crText({ name: "spoke-1-serving", cluster: "spoke-1" }) });
    await repo.commit("change", {
      [SERVING]: crText({
        name: "spoke-1-serving",
        cluster: "spoke-1",
        spec: { additionalManifests: [{ URL: `${base}/extra.yaml` }] },
      }),
    });
    const refs = ["--repo", repo.dir, "--base", "main", "--head", "change"];

    const refused = await planJson(...refs);
    expect(refused.code).toBe(1);
    expect(resourceOf(refused.plan, "spoke-1-serving").findings).toContainEqual(
      expect.objectContaining({
        severity: "error",
        message: expect.stringContaining(
          "matches no prefix in manifestLocations.allowedPrefixes (none is set)",
        ),
      }),
    );
    expect(fetched).toEqual([]);

    const config = join(repo.dir, "..", `${repo.dir.split("/").pop()}-config.yaml`);
    await writeFile(
      config,
      [
        "repository: {url: https://git.example/fleet.git, pathGlob: 'clusters/**/*.yaml'}",
        "defaultNamespace: knative-fleet",
        `manifestLocations: {allowedPrefixes: ['${base}/'], allowHttp: true, allowPrivateNetworks: true}`,
        "",
      ].join("\n"),
    );
    const allowed = await planJson(...refs, "--config", config);
    expect(
      resourceOf(allowed.plan, "spoke-1-serving").findings.filter((f) => f.severity === "error"),
    ).toEqual([]);
    expect(fetched).toEqual(["/extra.yaml"]);
  });
});
