import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fleetRepo, runPlan } from "../plan/support.ts";
import { placementFile } from "./support.ts";

const SNAPSHOT = `apiVersion: v1
kind: List
items:
- { apiVersion: multicluster.x-k8s.io/v1alpha1, kind: ClusterProfile, metadata: { name: eu-1, namespace: fleet-system, labels: { env: prod } }, spec: { clusterManager: { name: m } } }
- { apiVersion: multicluster.x-k8s.io/v1alpha1, kind: ClusterProfile, metadata: { name: us-1, namespace: fleet-system, labels: { env: staging } }, spec: { clusterManager: { name: m } } }
`;
const PATH = "clusters/placements/serving.yaml";
const selecting = (env: string) =>
  placementFile("serving", `  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: ${env} } }`);

// The snapshot files sit in the work tree, untracked: plan reads the commits, so they change nothing.
describe("knative-fleet plan with placements", () => {
  it("offline with --cluster-profiles: who joins and leaves, and each cluster's merged spec", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", { [PATH]: selecting("prod") });
    await repo.commit("change", { [PATH]: selecting("staging") });
    const snapshot = join(repo.dir, "inventory.yaml");
    await writeFile(snapshot, SNAPSHOT);
    const { code, stdout } = await runPlan(
      "--repo",
      repo.dir,
      "--base",
      "main",
      "--head",
      "change",
      "--cluster-profiles",
      snapshot,
    );
    expect(code).toBe(0);
    expect(stdout).toContain("### Placements");
    expect(stdout).toContain("Selection read from the ClusterProfile snapshot");
    expect(stdout).toContain("- selects now: `fleet-system/eu-1`");
    expect(stdout).toContain("- selects after the merge: `fleet-system/us-1`");
    expect(stdout).toContain("- leaves: `fleet-system/eu-1` (pruned after the departure grace period)");
    expect(stdout).toContain('enable-scale-to-zero: "true"');
    // The clusters' CRs are in the plan like any other: the one that joins installs, the one that
    // leaves is a deletion once the grace period ends.
    expect(stdout).toContain(
      "| fleet-system/eu-1 | KnativeServing knative-fleet/serving-eu-1 | ⚠️ **delete**: uninstalls KnativeServing after the departure grace period |",
    );
    expect(stdout).toMatch(
      /\| fleet-system\/us-1 \| KnativeServing knative-fleet\/serving-us-1 \| create 1\.22\.1 \| \+\d+ ~0 -0 \|/,
    );
    expect(stdout).toContain("⚠️ 1 warning");
  });

  it("offline without an inventory says that selection needs the hub", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", { [PATH]: selecting("prod") });
    const { code, stdout } = await runPlan("--repo", repo.dir, "--base", "main", "--head", "main");
    expect(code).toBe(0);
    expect(stdout).toContain("Selection unknown (see the findings).");
    expect(
      stdout.split("selection needs the hub: run plan with --kubeconfig, or give --cluster-profiles FILE"),
    ).toHaveLength(2);
  });

  it("a snapshot that is not ClusterProfiles is a usage error naming the file", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", { [PATH]: selecting("prod") });
    const bad = join(repo.dir, "bad.yaml");
    await writeFile(bad, "kind: Secret\n");
    const { code, stderr } = await runPlan(
      "--repo",
      repo.dir,
      "--base",
      "main",
      "--head",
      "main",
      "--cluster-profiles",
      bad,
    );
    expect(code).toBe(2);
    expect(stderr).toContain("is neither a ClusterProfile nor a PlacementDecision");
  });
});
