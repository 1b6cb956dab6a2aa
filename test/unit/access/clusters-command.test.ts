import { PassThrough } from "node:stream";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import type { ClusterReport } from "../../../src/access/cluster-survey.ts";
import { clustersCommand, renderClusterTable } from "../../../src/commands/clusters.ts";
import { UsageError } from "../../../src/commands/command.ts";
import { testdataPath } from "./support.ts";

const reachable: ClusterReport = {
  namespace: "fleet-system",
  name: "spoke-1",
  healthy: "True",
  provider: "secretreader",
  server: "https://127.0.0.1:6443",
  kubernetesVersion: "v1.35.4",
  roundTripMs: 1.234,
  reachable: true,
  reason: undefined,
  message: undefined,
};
const unreachable: ClusterReport = {
  namespace: "fleet-system",
  name: "spoke-22",
  healthy: "False",
  provider: undefined,
  server: undefined,
  kubernetesVersion: undefined,
  roundTripMs: undefined,
  reachable: false,
  reason: "ClusterProfileNotReady",
  message: "ClusterProfile fleet-system/spoke-22 is not healthy",
};

describe("renderClusterTable", () => {
  it("aligns the columns and puts the reason last", () => {
    expect(renderClusterTable([reachable, unreachable])).toBe(
      [
        "NAMESPACE     NAME      HEALTHY  PROVIDER      SERVER                  VERSION  RTT    STATUS",
        "fleet-system  spoke-1   True     secretreader  https://127.0.0.1:6443  v1.35.4  1.2ms  Reachable",
        "fleet-system  spoke-22  False    -             -                       -        -      ClusterProfileNotReady: ClusterProfile fleet-system/spoke-22 is not healthy",
        "",
      ].join("\n"),
    );
  });

  it("says when there is nothing to show", () => {
    expect(renderClusterTable([])).toBe("No ClusterProfiles found.\n");
  });
});

describe("knative-fleet clusters flags", () => {
  it("rejects an unknown output format as a usage error", async () => {
    await expect(clusters("--output", "yaml")).rejects.toThrow(
      new UsageError('--output must be table or json, not "yaml"'),
    );
  });

  async function clusters(...args: string[]): Promise<{ code: number; stderr: string }> {
    const stderr = new PassThrough();
    const err: string[] = [];
    stderr.on("data", (c) => err.push(String(c)));
    const parsed = parseArgs({
      args,
      options: clustersCommand.options,
      allowPositionals: false,
      strict: true,
    });
    const code = await clustersCommand.run(parsed, { stdout: new PassThrough(), stderr });
    return { code, stderr: err.join("") };
  }
  const notJson = testdataPath("ca.crt");

  it("names a provider file that is not JSON", async () => {
    const { code, stderr } = await clusters("--clusterprofile-provider-file", notJson);
    expect(code).toBe(2);
    expect(stderr).toContain(`knative-fleet clusters: ${notJson}: not valid JSON`);
  });

  it("names a hub kubeconfig it cannot load", async () => {
    const { code, stderr } = await clusters("--kubeconfig", "/nonexistent/hub.kubeconfig");
    expect(code).toBe(2);
    expect(stderr).toContain(
      "knative-fleet clusters: cannot load the hub kubeconfig /nonexistent/hub.kubeconfig: ENOENT",
    );
  });
});
