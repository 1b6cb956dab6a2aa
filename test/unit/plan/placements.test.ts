import { describe, expect, it } from "vitest";
import { NEEDS_HUB, readInventorySnapshot } from "../../../src/placement/plan.ts";
import { renderMarkdown } from "../../../src/plan/markdown.ts";
import { crText, rolloutText } from "../../support/fleet-files.ts";
import { placementFile, servingFile } from "../placement/support.ts";
import { balancedMarkdown, planOfFiles, resourceOf, snapshotInventory } from "./support.ts";

// A plan with placements: their CRs planned like every other CR (objects, checks, removals), and the
// Placements section with what each selects before and after the merge.

const SNAPSHOT = `apiVersion: v1
kind: List
items:
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata: { name: eu-1, namespace: fleet-system, labels: { env: prod } }
  spec: { clusterManager: { name: ocm } }
  status:
    properties: [{ name: location, value: eu-west }]
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ClusterProfile
  metadata: { name: us-1, namespace: fleet-system, labels: { env: prod } }
  spec: { clusterManager: { name: ocm } }
  status:
    properties: [{ name: location, value: us-east }]
---
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: PlacementDecision
metadata: { name: d, namespace: fleet-system }
decisions: [{ clusterProfileRef: { name: us-1 } }]
`;
const inventory = snapshotInventory(readInventorySnapshot("snapshot.yaml", SNAPSHOT));

const PATH = "clusters/p.yaml";
const prodEu = placementFile(
  "p",
  "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }\n    propertySelector:\n      matchExpressions: [{ name: location, operator: In, values: [eu-west] }]",
);
const allProd = placementFile(
  "p",
  "  clusterSelectorTerms:\n  - labelSelector: { matchLabels: { env: prod } }",
);
const SLOW = { timeout: 60_000 };

describe("plan with placements", SLOW, () => {
  it("reads a kubectl-style snapshot", () => {
    expect(inventory.inventory.clusters?.map((c) => c.name)).toEqual(["eu-1", "us-1"]);
    expect(inventory.inventory.decisions?.[0]?.clusters).toEqual([
      { namespace: "fleet-system", name: "us-1" },
    ]);
  });

  it("a cluster that joins: its CR's whole install in the plan, the join and the merged spec in the section", async () => {
    const plan = await planOfFiles({ [PATH]: prodEu }, { [PATH]: allProd }, { inventory });
    expect(plan.placements.placements).toMatchObject([
      {
        placement: "KnativeServingPlacement knative-fleet/p",
        before: ["fleet-system/eu-1"],
        added: ["fleet-system/us-1"],
        removed: [],
      },
    ]);
    const joined = resourceOf(plan, "p-us-1");
    expect(joined).toMatchObject({ cluster: "fleet-system/us-1", action: "create", path: PATH });
    expect(joined.objects.created.length).toBeGreaterThan(50);
    // A new placement CR shows what it sets, as any created CR does.
    expect(joined.spec).toEqual({
      version: "1.22",
      config: { autoscaler: { "enable-scale-to-zero": "true" } },
    });
    expect(plan.clusters.map((c) => c.cluster)).toEqual(["fleet-system/us-1"]);
    const text = renderMarkdown(plan);
    expect(text).toContain("selects after the merge: `fleet-system/eu-1`, `fleet-system/us-1`");
    expect(text).toContain("fleet-system/us-1 → p-us-1");
    // The merged spec in YAML, as the fleet file is written.
    expect(text).toContain(
      '```yaml\nversion: "1.22"\nconfig:\n  autoscaler:\n    enable-scale-to-zero: "true"\n',
    );
    expect(text).not.toContain("```json");
  });

  it("shows the merged spec a null override makes, and the change on the cluster it reaches", async () => {
    const head = `${allProd}  overrides:\n  - clusters: [{ namespace: fleet-system, name: us-1 }]\n    patch: { config: { autoscaler: null } }\n`;
    const plan = await planOfFiles({ [PATH]: allProd }, { [PATH]: head }, { inventory });
    const text = renderMarkdown(plan);
    const us1 = text.slice(text.indexOf("fleet-system/us-1 → p-us-1"));
    expect(us1).toContain("config: {}");
    expect(us1).not.toContain("autoscaler");
    // Only us-1's CR changes; its config-autoscaler loses the key the template set.
    expect(plan.clusters.map((c) => c.cluster)).toEqual(["fleet-system/us-1"]);
    expect(resourceOf(plan, "p-us-1").objects.changed).toContainEqual(
      expect.objectContaining({
        name: "config-autoscaler",
        fields: [expect.objectContaining({ path: "data.enable-scale-to-zero", before: "true" })],
      }),
    );
  });

  it("without an inventory: a warning that selection needs the hub, listed clusters still planned", async () => {
    const listed = placementFile("l", "  clusterProfiles: [{ namespace: fleet-system, name: eu-1 }]");
    const plan = await planOfFiles({}, { [PATH]: allProd, "clusters/l.yaml": listed });
    expect(plan.placements.inventory).toBe("none");
    expect(plan.placements.placements.find((p) => p.placement.endsWith("/p"))?.pending).toContain(
      "--cluster-profiles",
    );
    expect(resourceOf(plan, "l-eu-1").action).toBe("create");
    expect(plan.findings).toEqual([
      expect.objectContaining({
        subject: "KnativeServingPlacement knative-fleet/p",
        severity: "warning",
        code: "placement-unknown",
      }),
    ]);
    expect(plan.warnings).toBe(1);
    expect(renderMarkdown(plan)).toContain("Selection unknown");
  });

  it("without an inventory, several placements and waves by label: the hub is asked for once, in one finding naming them all", async () => {
    const names = ["a", "b", "c"];
    const rollout = rolloutText({
      waves: [{ name: "prod", clusterSelectorTerms: [{ labelSelector: { matchLabels: { env: "prod" } } }] }],
    });
    const head = {
      ...Object.fromEntries(
        names.map((n) => [`clusters/${n}.yaml`, allProd.replace("name: p", `name: ${n}`)]),
      ),
      "clusters/rollout.yaml": rollout,
    };
    const plan = await planOfFiles({}, head);
    expect(plan.findings).toEqual([
      {
        subject: names.map((n) => `KnativeServingPlacement knative-fleet/${n}`).join(", "),
        severity: "warning",
        code: "placement-unknown",
        message: `what these 3 placements select is unknown (${NEEDS_HUB}): their CRs are not in this plan`,
      },
    ]);
    expect(plan.warnings).toBe(1);
    const text = renderMarkdown(plan);
    expect(text.match(/needs the hub/g)).toHaveLength(1);
    expect(text.match(/run plan with --kubeconfig/g)).toHaveLength(1);
    expect(text).toContain("### Rollout");
    expect(text.match(/Selection unknown \(see the findings\)\./g)).toHaveLength(3);
  });

  it("a conflict the merge would cause is a validation error with file:line, counted in the header", async () => {
    const head = { [PATH]: allProd, "clusters/q.yaml": allProd.replace("name: p", "name: q") };
    const plan = await planOfFiles({}, head, { inventory });
    expect(plan.diagnostics.map((d) => `${d.path}:${d.line}`)).toEqual([
      "clusters/p.yaml:1",
      "clusters/p.yaml:1",
      "clusters/q.yaml:1",
      "clusters/q.yaml:1",
    ]);
    expect(plan.errors).toBe(4);
    expect(renderMarkdown(plan)).toContain("❌ **4 errors**");
    expect(plan.clusters.flatMap((c) => c.resources).map((r) => r.action)).toEqual([
      "blocked",
      "blocked",
      "blocked",
      "blocked",
    ]);
  });

  it("a per-cluster file's CR moved into a placement is one reinstall, not an uninstall and a new CR", async () => {
    const own = { "clusters/eu-1.yaml": crText({ name: "eu-1-serving", cluster: "eu-1", version: "1.22" }) };
    const listed = placementFile("p", "  clusterProfiles: [{ namespace: fleet-system, name: eu-1 }]");
    const plan = await planOfFiles(
      { ...own, "clusters/l.yaml": servingFile("other", "us-1") },
      { [PATH]: listed, "clusters/l.yaml": servingFile("other", "us-1") },
      { inventory },
    );
    const moved = resourceOf(plan, "p-eu-1");
    expect(moved).toMatchObject({
      action: "reinstall",
      cluster: "fleet-system/eu-1",
      replaces: "KnativeServing knative-fleet/eu-1-serving",
      removal: { prune: "pruned", sharedWith: "KnativeServing knative-fleet/p-eu-1" },
    });
    expect(moved.findings.map((f) => f.code)).toContain("reinstall");
    // The install is there: the new CR's pass re-applies it (its anchor is new), nothing is deleted.
    expect(moved.objects.created.map((r) => r.name)).toContain("knativeserving-p-eu-1-root-owner");
    expect(moved.objects.changed.length).toBeGreaterThan(50);
    expect(moved.objects.deleted).toEqual([]);
    expect(plan.clusters.flatMap((c) => c.resources).map((r) => r.name)).toEqual(["p-eu-1"]);
    expect(renderMarkdown(plan)).toContain(
      "⚠️ **reinstall** 1.22.1, replacing KnativeServing knative-fleet/eu-1-serving",
    );
  });

  it("cut to any comment length, the placements' spec blocks and collapsed sections are closed again", async () => {
    const plan = await planOfFiles({ [PATH]: prodEu }, { [PATH]: allProd }, { inventory });
    const whole = renderMarkdown(plan, Number.POSITIVE_INFINITY);
    const placements = whole.indexOf("### Placements");
    // Every limit from just after the summary to past the placement section's spec blocks.
    for (let limit = 800; limit < whole.length - placements + 3_000; limit += 61) {
      const comment = renderMarkdown(plan, limit);
      expect(comment.length, `limit ${limit}`).toBeLessThanOrEqual(limit);
      expect(balancedMarkdown(comment), `limit ${limit}:\n${comment}`).toBe(true);
    }
  });
});
