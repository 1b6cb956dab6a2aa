import { describe, expect, it } from "vitest";
import type { ClusterReport } from "../../../src/access/cluster-survey.ts";
import { renderClusterTable } from "../../../src/commands/clusters.ts";
import { runCli } from "../../support/cli.ts";
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
        "NAMESPACE     NAME      HEALTHY  PROVIDER      VERSION  RTT    STATUS",
        "fleet-system  spoke-1   True     secretreader  v1.35.4  1.2ms  Reachable",
        "fleet-system  spoke-22  False    -             -        -      ClusterProfileNotReady: ClusterProfile fleet-system/spoke-22 is not healthy",
        "",
      ].join("\n"),
    );
  });

  it("adds each spoke's server in -o wide", () => {
    expect(renderClusterTable([reachable], true)).toBe(
      [
        "NAMESPACE     NAME     HEALTHY  PROVIDER      SERVER                  VERSION  RTT    STATUS",
        "fleet-system  spoke-1  True     secretreader  https://127.0.0.1:6443  v1.35.4  1.2ms  Reachable",
        "",
      ].join("\n"),
    );
  });

  it("says when there is nothing to show", () => {
    expect(renderClusterTable([])).toBe("No ClusterProfiles found.\n");
  });
});

describe("knative-fleet clusters flags", () => {
  const clusters = (...args: string[]) => runCli("clusters", ...args);
  const notJson = testdataPath("ca.crt");

  it("rejects an unknown output format as a usage error", async () => {
    const { code, stderr } = await clusters("-o", "xml");
    expect(code).toBe(2);
    expect(stderr).toContain('-o/--output is the output format, table, wide, json, yaml, not "xml"');
  });

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
