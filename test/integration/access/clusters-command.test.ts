import { readFileSync, writeFileSync } from "node:fs";
import { PassThrough } from "node:stream";
import { parseArgs } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import type { ClusterReport } from "../../../src/access/cluster-survey.ts";
import { clustersCommand } from "../../../src/commands/clusters.ts";
import { writeServiceConfig } from "../../support/fleet-service.ts";
import { deleteProfile, hubKubeConfig, profileStatus, putProfile, sandbox } from "./support.ts";

// A namespace of its own, so the exit code does not depend on ClusterProfiles other tests leave in fleet-system.
const NAMESPACE = "access-test-clusters";
const [spoke1] = sandbox.spokes as [(typeof sandbox.spokes)[0]];

/** `knative-fleet clusters --kubeconfig <hub> ...args`, parsed and run as the CLI does. */
async function clusters(...args: string[]): Promise<{ code: number; stdout: string }> {
  const stdout = new PassThrough();
  const out: string[] = [];
  stdout.on("data", (c) => out.push(String(c)));
  const parsed = parseArgs({
    args: ["--kubeconfig", sandbox.hub.adminKubeconfig, ...args],
    options: clustersCommand.options,
    allowPositionals: false,
    strict: true,
  });
  const code = await clustersCommand.run(parsed, { stdout, stderr: new PassThrough() });
  return { code, stdout: out.join("") };
}
const withProviders = ["--clusterprofile-provider-file", sandbox.providerFile];
/**
 * The service's config file allowing this namespace's ClusterProfiles, as the reconcile would run with it.
 * With two ClusterProfile namespaces each needs its credentials namespace: this one's is where the sandbox
 * keeps the spokes' Secrets.
 */
function serviceConfigAllowing(namespace: string): string {
  const path = writeServiceConfig({ repositoryUrl: "https://git.example/fleet.git" });
  const config = parse(readFileSync(path, "utf8")) as object;
  writeFileSync(
    path,
    stringify({
      ...config,
      allowedClusterProfileNamespaces: ["fleet-system", namespace],
      access: { credentialNamespaces: { [namespace]: sandbox.clusterProfileNamespace } },
    }),
  );
  return path;
}

beforeAll(async () => {
  const core = hubKubeConfig().makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NAMESPACE } } }).catch((e: { code?: number }) => {
    if (e.code !== 409) throw e;
  });
  await putProfile(spoke1.name, profileStatus(spoke1), NAMESPACE);
});

afterAll(async () => {
  await deleteProfile(spoke1.name, NAMESPACE);
  await deleteProfile("unhealthy", NAMESPACE);
  await hubKubeConfig().makeApiClient(CoreV1Api).deleteNamespace({ name: NAMESPACE });
});

describe("knative-fleet clusters", () => {
  it("shows every sandbox spoke reachable, with provider, server, live version and round trip", async () => {
    const { code, stdout } = await clusters(
      ...withProviders,
      "-n",
      sandbox.clusterProfileNamespace,
      "--output",
      "json",
    );
    const reports = (JSON.parse(stdout) as { items: ClusterReport[] }).items;
    for (const spoke of sandbox.spokes) {
      expect(reports.find((r) => r.name === spoke.name)).toMatchObject({
        namespace: sandbox.clusterProfileNamespace,
        healthy: "True",
        provider: "secretreader",
        server: spoke.server,
        kubernetesVersion: expect.stringMatching(/^v\d+\.\d+\.\d+/),
        roundTripMs: expect.any(Number),
        reachable: true,
      });
    }
    expect(code).toBe(reports.every((r) => r.reachable) ? 0 : 1);
  });

  it("reports a ClusterProfile outside the service's namespaces as the reconcile would: not allowed", async () => {
    const { code, stdout } = await clusters(...withProviders, "-n", NAMESPACE, "--output", "json");
    expect(code).toBe(1);
    expect((JSON.parse(stdout) as { items: ClusterReport[] }).items).toEqual([
      expect.objectContaining({
        name: spoke1.name,
        reachable: false,
        reason: "ClusterProfileNotAllowed",
        message: `ClusterProfile ${NAMESPACE}/${spoke1.name} is in namespace ${NAMESPACE}, but knative-fleet only reads ClusterProfiles in fleet-system (allowedClusterProfileNamespaces)`,
      }),
    ]);
  });

  it("prints a table, and exits 1 with the reason when a cluster cannot be reached", async () => {
    const config = ["--config", serviceConfigAllowing(NAMESPACE)];
    const narrow = await clusters(...withProviders, ...config, "-n", NAMESPACE);
    expect(narrow.stdout).toMatch(/^NAMESPACE\s+NAME\s+HEALTHY\s+PROVIDER\s+VERSION\s+RTT\s+STATUS\n/);
    const allReachable = await clusters(...withProviders, ...config, "-n", NAMESPACE, "-o", "wide");
    expect(allReachable.code).toBe(0);
    expect(allReachable.stdout).toMatch(
      /^NAMESPACE\s+NAME\s+HEALTHY\s+PROVIDER\s+SERVER\s+VERSION\s+RTT\s+STATUS\n/,
    );
    expect(allReachable.stdout).toMatch(
      new RegExp(
        `${spoke1.name}\\s+True\\s+secretreader\\s+${spoke1.server}\\s+v\\d\\S+\\s+[\\d.]+ms\\s+Reachable`,
      ),
    );

    await putProfile(
      "unhealthy",
      profileStatus(spoke1, { healthy: "False", message: "down for maintenance" }),
      NAMESPACE,
    );
    const oneDown = await clusters(...withProviders, ...config, "-n", NAMESPACE);
    expect(oneDown.code).toBe(1);
    expect(oneDown.stdout).toContain(
      "ClusterProfileNotReady: ClusterProfile access-test-clusters/unhealthy is not healthy",
    );
  });

  it("reports every cluster MulticlusterDisabled without a provider file", async () => {
    const { code, stdout } = await clusters("-n", NAMESPACE, "--output", "json");
    expect(code).toBe(1);
    const reasons = (JSON.parse(stdout) as { items: ClusterReport[] }).items.map((r) => r.reason);
    expect(reasons).toContain("MulticlusterDisabled");
    expect(new Set(reasons)).toEqual(new Set(["MulticlusterDisabled"]));
  });
});
