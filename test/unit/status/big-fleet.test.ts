import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { Condition } from "../../../src/api/knative.ts";
import { DRIFT_STATUS_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { clusterPage, isClusterPage } from "../../../src/status/row.ts";
import {
  CLUSTER_INDEX,
  clusterPagesListed,
  renderStatusSummary,
  type StatusFile,
  SUMMARY_ABOVE_CLUSTERS,
} from "../../../src/status/summary.ts";
import { bigFleetStatus, clusterName } from "../../support/big-fleet.ts";

// The status files of a fleet of 1,000 clusters and 2,000 CRs mid-rollout (scripts/bench-reports.ts prints
// their sizes and render times): within what GitHub shows of a folder's README (512,000 bytes; the README
// then just stops), with room; every CR not ready in the README, every CR on its cluster's page.

/** What GitHub shows of a folder's README.md, in bytes (src/status/summary.ts cites it). */
const README_SHOWN = 512_000;
const bytes = (text: string) => Buffer.byteLength(text);
const named = (files: readonly StatusFile[], name: string) => files.find((f) => f.name === name)!.content;

describe("the status files of 1,000 clusters", () => {
  const input = bigFleetStatus(1_000);
  const files = renderStatusSummary(input);
  const readme = named(files, "README.md");
  const index = named(files, CLUSTER_INDEX);
  const pages = files.filter((f) => isClusterPage(f.name));

  it("keep the README at a tenth of what GitHub shows, the index under half, each page small", () => {
    expect(input.resources).toHaveLength(2_000);
    expect(bytes(readme)).toBeLessThan(README_SHOWN / 10);
    expect(bytes(index)).toBeLessThan(README_SHOWN / 2);
    for (const page of pages) expect(bytes(page.content), page.name).toBeLessThan(4_096);
  });

  it("count the CRs by readiness and reason, by version and by wave, and list every CR not ready", () => {
    const counts = readme.slice(readme.indexOf("## Counts"), readme.indexOf("## Not ready"));
    const tables = counts.split("\n\n").filter((part) => part.startsWith("|"));
    const cells = (line: string) =>
      line
        .slice(1, -1)
        .split("|")
        .map((cell) => cell.trim());
    const total = (table: string, column: number) =>
      table
        .split("\n")
        .slice(2)
        .reduce((sum, line) => sum + Number(cells(line)[column]), 0);
    expect(tables.map((table) => table.split("\n")[0])).toEqual([
      "| Ready | Reason | CRs |",
      "| Kind | Version | CRs |",
      "| Wave | Clusters | CRs | Ready | Not ready | In progress | Waiting |",
    ]);
    expect([total(tables[0]!, 2), total(tables[1]!, 2), total(tables[2]!, 2)]).toEqual([2_000, 2_000, 2_000]);
    expect(tables[2]!.split("\n").map((line) => cells(line)[0])).toEqual([
      "Wave",
      "---",
      "canary",
      "prod-eu",
      "prod-us",
      "remaining",
    ]);
    const notReady = input.resources.filter((cr) => !isReady(cr));
    expect(notReady.length).toBeGreaterThan(50);
    expect(readme).toContain(`## Not ready (${notReady.length})`);
    for (const cr of input.resources) {
      const cluster = `fleet-system/${(cr.spec as { clusterProfileRef: { name: string } }).clusterProfileRef.name}`;
      const row = `| [${cluster}](${clusterPage(cluster)}) | ${cr.kind} | knative-fleet/${cr.metadata.name} |`;
      expect(readme.includes(row), cr.metadata.name).toBe(!isReady(cr));
    }
  });

  it("put each cluster's CRs on its page, linked from the index, and keep every CR in fleet.yaml", () => {
    expect(files.slice(0, 3).map((f) => f.name)).toEqual(["README.md", "fleet.yaml", CLUSTER_INDEX]);
    expect(pages).toHaveLength(1_000);
    expect(files).toHaveLength(1_003);
    expect(clusterPagesListed(index)).toEqual(pages.map((p) => p.name));
    expect(readme).toContain(`[${CLUSTER_INDEX}](${CLUSTER_INDEX})`);
    const page = named(files, "clusters/fleet-system/prod-us-east-1-0042.md");
    expect(page).toContain("[fleet status](../../README.md)");
    expect(page).toContain("Rollout wave: prod-us.");
    expect(page).toContain(
      "| fleet-system/prod-us-east-1-0042 | KnativeServing | knative-fleet/serving-prod-us-east-1-0042 |",
    );
    expect(page).toContain(
      "| KnativeServing knative-fleet/serving-prod-us-east-1-0042 | rollout of 4f2a9c1 waits",
    );
    expect(parse(named(files, "fleet.yaml")).resources).toHaveLength(2_000);
  });

  it("grow with the fleet in a straight line: twice the clusters, at most a little over twice the bytes", () => {
    const total = (list: readonly StatusFile[]) => list.reduce((sum, f) => sum + bytes(f.content), 0);
    const twice = renderStatusSummary(bigFleetStatus(2_000));
    expect(total(twice) / total(files)).toBeLessThan(2.1);
    expect(bytes(named(twice, "README.md"))).toBeLessThan(README_SHOWN / 4);
  });

  it("stay under half of what GitHub shows when every CR fails with a long message and keeps a drift", () => {
    const failing: Condition[] = [
      { type: "InstallSucceeded", status: "False", reason: "ApplyFailed", message: "x".repeat(2_000) },
      { type: "Ready", status: "False", reason: "ApplyFailed", message: "x".repeat(2_000) },
      { type: "Drifted", status: "True", reason: "DriftKept" },
    ];
    const worst = input.resources.map((cr) => ({
      ...cr,
      status: { ...(cr.status as object), conditions: failing, annotations: DRIFT },
    }));
    const summary = renderStatusSummary({ ...input, resources: worst });
    expect(bytes(named(summary, "README.md"))).toBeLessThan(README_SHOWN / 2);
  });
});

describe("when the status summarizes", () => {
  it(`above ${SUMMARY_ABOVE_CLUSTERS} clusters; at ${SUMMARY_ABOVE_CLUSTERS} every CR is in the README`, () => {
    const at = renderStatusSummary(bigFleetStatus(SUMMARY_ABOVE_CLUSTERS));
    expect(at.map((f) => f.name)).toEqual(["README.md", "fleet.yaml"]);
    expect(named(at, "README.md")).toContain(`| fleet-system/${clusterName(1)} | KnativeServing |`);
    const above = renderStatusSummary(bigFleetStatus(SUMMARY_ABOVE_CLUSTERS + 1));
    expect(above).toHaveLength(SUMMARY_ABOVE_CLUSTERS + 4);
    expect(named(above, "README.md")).not.toContain(`| fleet-system/${clusterName(1)} | KnativeServing |`);
  });
});

describe("a cluster's page", () => {
  it("is clusters/<namespace>/<name>.md, clusters/hub.md, or a hashed name for any other label", () => {
    expect(clusterPage("fleet-system/eu-1.prod")).toBe("clusters/fleet-system/eu-1.prod.md");
    expect(clusterPage("hub")).toBe("clusters/hub.md");
    for (const label of [
      "fleet-system/../../fleet",
      "../x",
      "a/b/c",
      "Fleet/x",
      "ns/x..y",
      "ns/",
      "/x",
      "_/x",
    ]) {
      const page = clusterPage(label);
      expect(page, label).toMatch(/^clusters\/_\/[0-9a-f]{32}\.md$/);
      expect(isClusterPage(page)).toBe(true);
    }
    expect(clusterPage("ns/../x")).not.toBe(clusterPage("ns/x"));
  });

  it("is the only kind of path the write-back may delete", () => {
    for (const path of [
      "clusters/fleet-system/eu-1.md",
      "clusters/hub.md",
      `clusters/_/${"a".repeat(32)}.md`,
    ])
      expect(isClusterPage(path), path).toBe(true);
    for (const path of [
      "README.md",
      "fleet.yaml",
      "clusters/README.md",
      "clusters/../fleet.yaml",
      "clusters/ns/../../clusters/prod.md",
      "clusters/a/b/c.md",
      "clusters/fleet-system/eu-1.yaml",
      "../clusters/fleet-system/eu-1.md",
      `clusters/_/${"a".repeat(31)}.md`,
    ])
      expect(isClusterPage(path), path).toBe(false);
    expect(
      clusterPagesListed(
        "[a](fleet-system/a.md) [up](../README.md) [b](../../clusters/prod.md) [c](ns/../../x.md) [d](hub.md)",
      ),
    ).toEqual(["clusters/fleet-system/a.md", "clusters/hub.md"]);
  });
});

const isReady = (cr: KubeObject): boolean =>
  cr.metadata.generation === (cr.status as { observedGeneration: number }).observedGeneration &&
  (cr.status as { conditions: Condition[] }).conditions.every((c) => c.status === "True");

/** A drift kept on the cluster, as status/row.ts reads it. */
const DRIFT = {
  [DRIFT_STATUS_ANNOTATION]: JSON.stringify([
    {
      object: "ConfigMap knative-serving/config-autoscaler",
      change: "changed",
      fields: [{ path: "data.enable-scale-to-zero", want: '"true"', have: '"false"' }],
      outcome: "kept",
    },
  ]),
};
