import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { type FleetFile, MAX_DIAGNOSTICS_PER_FILE } from "../../../src/fleet/model.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { PlacementStage } from "../../../src/placement/stage.ts";
import { renderStatusSummary } from "../../../src/status/summary.ts";
import { runCli } from "../../support/cli.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crObject, TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { syncInto } from "../../support/sync.ts";
import { NS, PROFILES, placementFile, servingFile } from "./support.ts";

// Conflicts between placements (and with per-cluster files) are reported the way the fleet model reports
// its own: grouped and capped, so N placements on one cluster make a few short lines, not N² text, in
// validate, the status files and the model; and a conflict is no departure.

/** The service's sync of one commit (src/sync): placements expanded, mirrored, the status. */
function hubWithPlacements() {
  const kube = new FakeKube().serveKindsOf([
    crObject({ name: "x", cluster: "c1" }),
    crObject({ kind: "KnativeEventing", name: "y", cluster: "c1" }),
  ]);
  // Not started: without the watches only explicitly listed clusters are selected, which is all these use.
  const stage = new PlacementStage({
    hub: kube.client,
    clusterProfileApiVersion: "multicluster.x-k8s.io/v1alpha1",
    departureGracePeriodMs: 300_000,
    log: silentLogger,
    onChange: () => {},
  });
  const sync = async (files: FleetFile[], commit: string) => {
    const result = await syncInto(kube.client, {
      files,
      namespace: NS,
      commit,
      repository: TEST_REPOSITORY,
      placements: stage,
    });
    const status = renderStatusSummary({ resources: kube.objects(), sync: result });
    return { model: result.model, result, status };
  };
  return { kube, stage, sync };
}

const listed = (name: string) =>
  placementFile(name, `  clusterProfiles: [{ namespace: ${PROFILES}, name: spoke-1 }]`);

describe("a conflict", () => {
  it("is no departure: the placement's CR is kept at its last state, and its cluster is not listed as left", async () => {
    const { kube, stage, sync } = hubWithPlacements();
    const placement = { path: "clusters/placements/serving.yaml", text: listed("serving") };
    await sync([placement], "1".repeat(40));
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeDefined();
    const { result, status } = await sync(
      [placement, { path: "clusters/spoke-1/serving.yaml", text: servingFile("spoke-1-serving", "spoke-1") }],
      "2".repeat(40),
    );
    expect(result.diagnostics.map((d) => d.path)).toEqual([
      "clusters/placements/serving.yaml",
      "clusters/spoke-1/serving.yaml",
    ]);
    expect(result.placements.departures).toEqual([]);
    expect(result.prune.candidates).toEqual([]);
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeDefined();
    const data = parse(status.find((f) => f.name === "fleet.yaml")!.content) as {
      placements: { left: string[]; selected: string[] }[];
    };
    expect(data.placements).toEqual([
      expect.objectContaining({ selected: [`${PROFILES}/spoke-1`], left: [] }),
    ]);
    stage.stop();
  });

  it("of 999 placements on one cluster in one file stays small in the model, the status files and validate", async () => {
    const text = Array.from({ length: 999 }, (_, i) => listed(`p${i}`)).join("---\n");
    expect(text.length).toBeGreaterThan(190 * 1024);
    const path = "clusters/placements/many.yaml";
    const { model, status } = await hubWithPlacements().sync([{ path, text }], "1".repeat(40));
    expect(model.files).toEqual([expect.objectContaining({ path, status: "failed" })]);
    expect(model.diagnostics).toHaveLength(MAX_DIAGNOSTICS_PER_FILE);
    expect(model.omittedDiagnostics).toBe(999 - MAX_DIAGNOSTICS_PER_FILE);
    expect(model.diagnostics[0]!.message).toMatch(
      /^placement p0 \(clusters\/placements\/many\.yaml:1\) installs KnativeServing on ClusterProfile fleet-system\/spoke-1, as does placement p1 \(.*:14\), placement p2 \(.*\), placement p3 \(.*\) and 995 more; a cluster runs one KnativeServing/,
    );
    const messages = model.diagnostics.map(formatDiagnostic).join("\n");
    expect(messages.length).toBeLessThan(20 * 1024);
    const sizes = Object.fromEntries(status.map((file) => [file.name, file.content.length]));
    console.log(
      `999 placements on one cluster: ${messages.length} bytes of diagnostics; status ${JSON.stringify(sizes)}`,
    );
    // A row per placement, and no text that grows with the square of their number.
    for (const file of status) expect(file.content.length, file.name).toBeLessThan(512 * 1024);

    const dir = await mkdtemp(join(tmpdir(), "knative-fleet-conflicts-"));
    try {
      await mkdir(join(dir, "clusters/placements"), { recursive: true });
      await writeFile(join(dir, path), text);
      const { code, stdout } = await runCli("validate", dir);
      expect(code).toBe(1);
      const lines = stdout.trimEnd().split("\n");
      expect(lines).toHaveLength(MAX_DIAGNOSTICS_PER_FILE + 2);
      expect(lines.at(-2)).toBe(`… ${999 - MAX_DIAGNOSTICS_PER_FILE} more errors left out`);
      expect(lines.at(-1)).toBe("1 file, 0 resources, 999 placements, 999 errors");
      expect(stdout.length).toBeLessThan(20 * 1024);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
