import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { DriftRecord } from "../../../src/api/drift.ts";
import type { Condition } from "../../../src/api/knative.ts";
import { DRIFT_STATUS_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { SelectedCluster } from "../../../src/placement/expand.ts";
import type { StatusSync } from "../../../src/status/summary.ts";
import { renderStatusSummary } from "../../../src/status/summary.ts";
import { CORRECTED, KEPT } from "./drift-records.ts";
import { COMMIT, hubCr, mirrorResult, OLDER, ready } from "./hub-crs.ts";

const MIXED_RESOURCES: KubeObject[] = [
  hubCr("spoke-1-serving", { cluster: "spoke-1", version: "1.22.1", conditions: ready }),
  hubCr("spoke-1-eventing", {
    kind: "KnativeEventing",
    cluster: "spoke-1",
    version: "1.21.0",
    commit: OLDER,
    conditions: [
      {
        type: "DeploymentsAvailable",
        status: "False",
        reason: "NotMinimumReplicas",
        // Ready copies the blocking condition's text (computeReady); readinessOf reads the condition's own.
        message: "eventing-webhook: 1/2 ready | waiting\nfor node",
      },
      { type: "InstallSucceeded", status: "True" },
      {
        type: "Ready",
        status: "False",
        reason: "NotMinimumReplicas",
        message: "eventing-webhook: 1/2 ready | waiting\nfor node",
      },
    ],
  }),
  hubCr("spoke-2-serving", {
    cluster: "spoke-2",
    conditions: [
      {
        type: "Ready",
        status: "False",
        reason: "ClusterProfileUnavailable",
        message: "spoke-2 has not answered for 5m",
      },
      {
        type: "TargetClusterResolved",
        status: "False",
        reason: "ClusterProfileUnavailable",
        message: "spoke-2 has not answered for 5m",
      },
    ],
  }),
  hubCr("hub-serving", { generation: 3, observedGeneration: 2, version: "1.22.1", conditions: ready }),
  hubCr("made-by-hand", { cluster: "spoke-3", mirrored: false, conditions: ready }),
];

const MIXED_MIRROR = mirrorResult({
  resources: [
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "made-by-hand",
      path: "clusters/x.yaml",
      action: "conflict",
      reason: "made by hand; delete it, or add the label",
    },
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "spoke-1-serving",
      path: "clusters/spoke-1-serving.yaml",
      action: "unchanged",
    },
  ],
  diagnostics: [
    {
      path: "clusters/spoke-3.yaml",
      line: 7,
      column: 5,
      field: "spec.registry.overide",
      message: "unrecognized key",
    },
  ],
  failedFiles: [
    {
      path: "clusters/spoke-3.yaml",
      status: "failed",
      declares: [{ kind: "KnativeServing", namespace: "knative-fleet", name: "spoke-3-serving" }],
    },
  ],
  prune: {
    state: "held",
    reason: "over-max-fraction",
    message:
      "pruning 2 of 3 mirrored CRs (67%) exceeds maxPruneFraction 50% and waits for a person's confirmation",
    candidates: [
      {
        kind: "KnativeEventing",
        namespace: "knative-fleet",
        name: "old-eventing",
        path: "clusters/old.yaml",
      },
      { kind: "KnativeServing", namespace: "knative-fleet", name: "old-serving", path: "clusters/old.yaml" },
    ],
    retained: [
      { kind: "KnativeServing", namespace: "knative-fleet", name: "keep-me", path: "clusters/keep.yaml" },
    ],
    confirmation: { namespace: "knative-fleet", token: "8c1f0a2b3c4d5e6f" },
  },
});

const readmeOf = (resources: readonly KubeObject[], mirror: StatusSync) =>
  renderStatusSummary({ resources, sync: mirror }).find((file) => file.name === "README.md")!.content;
const dataOf = (resources: readonly KubeObject[], mirror: StatusSync) =>
  renderStatusSummary({ resources, sync: mirror }).find((file) => file.name === "fleet.yaml")!.content;

describe("renderStatusSummary", () => {
  it("renders a mixed fleet for people: ready, not ready, unreachable, in progress, errors, a held prune", () => {
    expect(readmeOf(MIXED_RESOURCES, MIXED_MIRROR)).toBe(`# Fleet status

Written by knative-fleet from the hub after each sync; edits here are overwritten.

CRs on the hub: 4; ready ✓ 1, not ready ✗ 2, in progress … 1.

| Cluster | Kind | CR | Ready | Version | Status | Commit |
| --- | --- | --- | --- | --- | --- | --- |
| fleet-system/spoke-1 | KnativeEventing | knative-fleet/spoke-1-eventing | ✗ | 1.21.0 | DeploymentsAvailable=False (NotMinimumReplicas: eventing-webhook: 1/2 ready \\| waiting<br>for node) | fedcba9 |
| fleet-system/spoke-1 | KnativeServing | knative-fleet/spoke-1-serving | ✓ | 1.22.1 |  | 0123456 |
| fleet-system/spoke-2 | KnativeServing | knative-fleet/spoke-2-serving | ✗ |  | TargetClusterResolved=False (ClusterProfileUnavailable: spoke-2 has not answered for 5m) | 0123456 |
| hub | KnativeServing | knative-fleet/hub-serving | … | 1.22.1 | the hub controller has not reported on the current spec yet | 0123456 |

## Validation errors

A file with an error is not applied: the CRs it declares keep their last good state on the hub, and nothing is pruned until every file is valid.

| Location | Field | Message |
| --- | --- | --- |
| clusters/spoke-3.yaml:7:5 | spec.registry.overide | unrecognized key |

Kept at their last good state:

- KnativeServing knative-fleet/spoke-3-serving (clusters/spoke-3.yaml)

## Conflicts

A CR of the same kind and name is on the hub but is not this repository's: made by hand, or mirrored from another repository. knative-fleet leaves it alone: it is neither updated nor pruned. The last column says how to hand it over.

| CR | File | Whose |
| --- | --- | --- |
| KnativeServing knative-fleet/made-by-hand | clusters/x.yaml | made by hand; delete it, or add the label |

## Prune held

Held: pruning 2 of 3 mirrored CRs (67%) exceeds maxPruneFraction 50% and waits for a person's confirmation. Once confirmed, these CRs are deleted and Knative is uninstalled from their clusters:

| CR | File |
| --- | --- |
| KnativeEventing knative-fleet/old-eventing | clusters/old.yaml |
| KnativeServing knative-fleet/old-serving | clusters/old.yaml |

To confirm exactly this prune, run against the hub:

\`\`\`sh
kubectl -n knative-fleet create configmap knative-fleet-prune  # if it does not exist yet
kubectl -n knative-fleet annotate configmap knative-fleet-prune --overwrite \\
  fleet.knative.dev/confirm-prune=8c1f0a2b3c4d5e6f
\`\`\`

Restoring the files in Git instead cancels the prune.

## Kept by \`fleet.knative.dev/prune: disabled\`

These CRs are no longer in Git and are never pruned; delete them on the hub to uninstall.

| CR | File |
| --- | --- |
| KnativeServing knative-fleet/keep-me | clusters/keep.yaml |
`);
  });

  it("writes the same data for tools, in a fixed key order", () => {
    const data = dataOf(MIXED_RESOURCES, MIXED_MIRROR);
    expect(data.startsWith("# Written by knative-fleet")).toBe(true);
    const parsed = parse(data);
    expect(Object.keys(parsed)).toEqual([
      "resources",
      "validationErrors",
      "invalidFiles",
      "conflicts",
      "applyErrors",
      "prune",
    ]);
    expect(parsed.resources[0]).toEqual({
      cluster: "fleet-system/spoke-1",
      kind: "KnativeEventing",
      namespace: "knative-fleet",
      name: "spoke-1-eventing",
      phase: "Failed",
      reason: "NotMinimumReplicas",
      message:
        "DeploymentsAvailable=False (NotMinimumReplicas: eventing-webhook: 1/2 ready | waiting\nfor node)",
      version: "1.21.0",
      commit: OLDER,
      path: "clusters/spoke-1-eventing.yaml",
    });
    expect(Object.keys(parsed.resources[0])).toEqual([
      "cluster",
      "kind",
      "namespace",
      "name",
      "phase",
      "reason",
      "message",
      "version",
      "commit",
      "path",
    ]);
    expect(parsed.validationErrors).toEqual([
      {
        path: "clusters/spoke-3.yaml",
        line: 7,
        column: 5,
        field: "spec.registry.overide",
        message: "unrecognized key",
      },
    ]);
    expect(parsed.prune).toMatchObject({
      state: "held",
      reason: "over-max-fraction",
      confirmation: { namespace: "knative-fleet", token: "8c1f0a2b3c4d5e6f" },
    });
  });

  it("is byte-identical for the same state, whatever the input order or the commit synced", () => {
    const first = renderStatusSummary({ resources: MIXED_RESOURCES, sync: MIXED_MIRROR });
    const later = renderStatusSummary({
      resources: [...MIXED_RESOURCES].reverse(),
      sync: { ...MIXED_MIRROR, source: { ...MIXED_MIRROR.source, commit: "f".repeat(40) } },
    });
    expect(later).toEqual(first);
  });

  it("shows a done prune as nothing pending, and a refused delete until it succeeds", () => {
    const candidate = {
      kind: "KnativeServing" as const,
      namespace: "knative-fleet",
      name: "gone",
      path: "clusters/gone.yaml",
    };
    const clean = readmeOf([], mirrorResult());
    const pruned = readmeOf(
      [],
      mirrorResult({ prune: { state: "pruned", candidates: [candidate], retained: [] } }),
    );
    expect(pruned).toBe(clean);
    const refused = mirrorResult({
      prune: {
        state: "pruned",
        candidates: [{ ...candidate, error: "DELETE …: 403 Forbidden" }],
        retained: [],
      },
    });
    expect(readmeOf([], refused)).toContain(
      "## Prune failed\n\nThese CRs are no longer in Git, but the hub refused to delete them; the next sync tries again.\n\n" +
        "| CR | File | Error |\n| --- | --- | --- |\n| KnativeServing knative-fleet/gone | clusters/gone.yaml | DELETE …: 403 Forbidden |",
    );
  });

  it("says why a prune was skipped, and lists CRs the hub refused to apply", () => {
    const readme = readmeOf(
      [],
      mirrorResult({
        resources: [
          {
            kind: "KnativeServing",
            namespace: "knative-fleet",
            name: "moved",
            path: "clusters/moved.yaml",
            action: "update",
            error: "PATCH …: 422 Invalid: spec.clusterProfileRef is immutable",
          },
        ],
        prune: {
          state: "skipped",
          reason: "apply-failed",
          message: "1 CR failed to apply; nothing is pruned until every CR applies",
          candidates: [{ kind: "KnativeServing", namespace: "knative-fleet", name: "old" }],
          retained: [],
        },
      }),
    );
    expect(readme).toContain(
      "| KnativeServing knative-fleet/moved | clusters/moved.yaml | PATCH …: 422 Invalid: spec.clusterProfileRef is immutable |",
    );
    expect(readme).toContain(
      "These CRs are no longer in Git but are not pruned: 1 CR failed to apply; nothing is pruned until every CR applies.",
    );
    expect(readme).toContain("| KnativeServing knative-fleet/old |  |");
  });

  it("keeps a message in its cell: pipes, backslashes, newlines and HTML are escaped", () => {
    const message = "a|b \\| c\r\nd <nil> & e\n";
    const readme = readmeOf(
      [hubCr("x", { conditions: [{ type: "Ready", status: "False", reason: "Failed", message }] })],
      mirrorResult(),
    );
    const row = readme.split("\n").find((line) => line.includes("knative-fleet/x"))!;
    expect(row).toBe(
      "| hub | KnativeServing | knative-fleet/x | ✗ |  | Ready=False (Failed: a\\|b \\\\\\| c<br>d &lt;nil&gt; &amp; e) | 0123456 |",
    );
    // The row has exactly the header's 7 cells: every remaining `|` is a delimiter.
    expect(row.replaceAll("\\\\", "").replaceAll("\\|", "").split("|")).toHaveLength(9);
  });

  it("shows a CR that has no status yet, or is being deleted, as in progress", () => {
    const fresh = { ...hubCr("fresh"), status: undefined };
    const deleting = hubCr("deleting", { conditions: ready });
    deleting.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
    const rows = readmeOf([fresh, deleting], mirrorResult())
      .split("\n")
      .filter((line) => line.startsWith("| hub"));
    expect(rows).toEqual([
      "| hub | KnativeServing | knative-fleet/deleting | … |  | the CR is being deleted; its cluster is being cleaned up | 0123456 |",
      "| hub | KnativeServing | knative-fleet/fresh | … |  | the hub controller has not reported on the current spec yet | 0123456 |",
    ]);
  });
});

describe("renderStatusSummary with hostile values", () => {
  it("escapes file names, messages and cluster names: no HTML, link, image or extra cell gets through", () => {
    const path = "clusters/<!--|![x](https:__t.example_p.png).yaml";
    const readme = readmeOf(
      [hubCr("spoke-1-serving", { cluster: "<img src=x>", conditions: ready })],
      mirrorResult({
        diagnostics: [
          { path, line: 1, column: 1, field: "", message: "bad `x` | [link](https://e.example)" },
        ],
        failedFiles: [{ path, status: "failed", declares: [] }],
      }),
    );
    // What Markdown reads once backslash escapes are taken out: no live syntax may remain.
    expect(readme.replace(/\\./g, "")).not.toMatch(/<!--|<img|!\[|\]\(/);
    const validationRows = readme.split("\n").filter((line) => line.startsWith("| clusters/"));
    expect(validationRows).toHaveLength(1);
    expect(validationRows[0]!.replaceAll("\\|", "").split("|")).toHaveLength(5);
  });
});

/** A hub CR whose status says it drifted, as src/reconcile/drift.ts writes it: Drifted, and the records. */
function drifted(cr: KubeObject, reason: string, records: readonly DriftRecord[]): KubeObject {
  const status = cr.status as { conditions: Condition[] };
  return {
    ...cr,
    status: {
      ...status,
      conditions: [
        ...status.conditions,
        { type: "Drifted", status: reason === "DriftKept" ? "True" : "False", reason },
      ],
      annotations: { [DRIFT_STATUS_ANNOTATION]: JSON.stringify(records) },
    },
  };
}

const DRIFTED_RESOURCES: KubeObject[] = [
  drifted(
    hubCr("spoke-1-serving", { cluster: "spoke-1", version: "1.22.1", conditions: ready }),
    "DriftKept",
    [KEPT, { ...CORRECTED, outcome: "corrected", at: "2026-11-27T09:00:00Z" }],
  ),
  drifted(
    hubCr("spoke-2-serving", { cluster: "spoke-2", version: "1.22.1", conditions: ready }),
    "DriftCorrected",
    [CORRECTED],
  ),
  // A kept change that went away: no drift to show, whatever records are left.
  drifted(hubCr("spoke-3-serving", { cluster: "spoke-3", version: "1.22.1", conditions: ready }), "NoDrift", [
    KEPT,
  ]),
];

describe("renderStatusSummary with drift", () => {
  it("adds a Drift section after the CRs: the newest record per drifted CR, and what to edit instead", () => {
    const readme = readmeOf(DRIFTED_RESOURCES, mirrorResult());
    expect(readme).toBe(`# Fleet status

Written by knative-fleet from the hub after each sync; edits here are overwritten.

CRs on the hub: 3; ready ✓ 3, not ready ✗ 0, in progress … 0.

| Cluster | Kind | CR | Ready | Version | Status | Commit |
| --- | --- | --- | --- | --- | --- | --- |
| fleet-system/spoke-1 | KnativeServing | knative-fleet/spoke-1-serving | ✓ | 1.22.1 |  | 0123456 |
| fleet-system/spoke-2 | KnativeServing | knative-fleet/spoke-2-serving | ✓ | 1.22.1 |  | 0123456 |
| fleet-system/spoke-3 | KnativeServing | knative-fleet/spoke-3-serving | ✓ | 1.22.1 |  | 0123456 |

## Drift

Someone else changed these objects on their cluster (the newest change per CR). knative-fleet puts back what Git wants unless the CR (or its placement) is annotated \`fleet.knative.dev/drift: report\`; to keep a change, make it in the fleet file at the line given.

| Cluster | CR | Object | Changed by | Fields | Edit instead | Outcome |
| --- | --- | --- | --- | --- | --- | --- |
| fleet-system/spoke-1 | KnativeServing knative-fleet/spoke-1-serving | ConfigMap knative-serving/config-autoscaler | kubectl-edit (Update) at 2026-11-28T15:00:00Z | data.enable-scale-to-zero: "true" -&gt; "false" | spec.config.autoscaler.enable-scale-to-zero in clusters/spoke-1-serving.yaml:14 | kept |
| fleet-system/spoke-2 | KnativeServing knative-fleet/spoke-2-serving | Deployment knative-serving/activator | kube-controller-manager (Update) at 2026-11-28T14:00:00Z | spec.replicas: 2 -&gt; 5<br>spec.template.spec.priorityClassName: (absent) -&gt; "high"<br>spec.template.spec.containers\\[name=activator\\].resources: {"limits":{"cpu":"1"}} -&gt; {"limits":{"cpu":"2"}}<br>2 more fields | add spec.workloads in clusters/spoke-2-serving.yaml:6<br>release manifests | put back |
`);
  });

  it("places the Drift section after the placements and before the rollout, and shows a deletion", () => {
    const deleted: DriftRecord = {
      object: "Service knative-serving/activator-service",
      change: "deleted",
      fields: [],
      outcome: "corrected",
    };
    const placements = placementAll([]);
    const readme = readmeOf(
      [drifted(hubCr("hub-serving", { conditions: ready }), "DriftCorrected", [deleted])],
      mirrorResult({
        placements,
        rollout: { phase: "Complete", commit: COMMIT, paused: false, waiting: 0, history: [] },
      }),
    );
    const headings = readme.split("\n").filter((line) => line.startsWith("## "));
    expect(headings).toEqual(["## Placements", "## Drift", "## Rollout"]);
    expect(readme).toContain(
      "| hub | KnativeServing knative-fleet/hub-serving | Service knative-serving/activator-service | unknown | (deleted) |  | put back |",
    );
  });

  it("names, under the placements, the clusters on another version than most of their placement", () => {
    const cluster = (name: string) => ({
      namespace: "fleet-system",
      name,
      crName: `all-${name}`,
      via: ["selector" as const],
      overrides: [],
      spec: {},
    });
    const placements = placementAll([cluster("a"), cluster("b"), cluster("c")]);
    const crs = [
      hubCr("all-a", { conditions: ready, version: "1.22.2", cluster: "a" }),
      hubCr("all-b", { conditions: ready, version: "1.21.4", cluster: "b" }),
      hubCr("all-c", { conditions: ready, version: "1.22.2", cluster: "c" }),
    ];
    const readme = readmeOf(crs, mirrorResult({ placements }));
    expect(readme).toContain(
      "Clusters that differ from the others of their placement:\n\n- KnativeServingPlacement knative-fleet/all: fleet-system/b: version 1.21.4, the others 1.22.2\n",
    );
    const same = readmeOf(
      crs.map((cr) => hubCr(cr.metadata.name!, { conditions: ready, version: "1.22.2" })),
      mirrorResult({ placements }),
    );
    expect(same).not.toContain("differ");
  });

  it("writes the rows' drift to fleet.yaml: the state and every record, newest first", () => {
    const parsed = parse(dataOf(DRIFTED_RESOURCES, mirrorResult()));
    expect(parsed.resources.map((row: { drift?: unknown }) => row.drift)).toEqual([
      { state: "kept", records: [KEPT, { ...CORRECTED, at: "2026-11-27T09:00:00Z" }] },
      { state: "corrected", records: [CORRECTED] },
      undefined,
    ]);
    expect(Object.keys(parsed.resources[0]).at(-1)).toBe("drift");
  });

  it("is byte-identical for the same drift, whatever the input order; no drift leaves the files as they were", () => {
    const first = renderStatusSummary({ resources: DRIFTED_RESOURCES, sync: mirrorResult() });
    expect(renderStatusSummary({ resources: DRIFTED_RESOURCES.toReversed(), sync: mirrorResult() })).toEqual(
      first,
    );
    const clean = DRIFTED_RESOURCES.map((cr) => ({
      ...cr,
      status: { ...(cr.status as object), conditions: ready, annotations: undefined },
    }));
    const gone = DRIFTED_RESOURCES.map((cr) =>
      drifted({ ...cr, status: { conditions: ready } }, "NoDrift", [KEPT]),
    );
    const withoutDrift = renderStatusSummary({ resources: clean, sync: mirrorResult() });
    expect(withoutDrift[0]!.content).not.toContain("## Drift");
    expect(withoutDrift[1]!.content).not.toContain("drift");
    expect(renderStatusSummary({ resources: gone, sync: mirrorResult() }).map((f) => f.content)).toEqual(
      renderStatusSummary({
        resources: gone.map((cr) => ({ ...cr, status: { conditions: ready } })),
        sync: mirrorResult(),
      }).map((f) => f.content),
    );
  });

  it("escapes a hostile manager, object and field path: one line per value, no extra cell, no live Markdown", () => {
    const hostile: DriftRecord = {
      ...KEPT,
      object: "ConfigMap knative-serving/<!--x",
      manager: "evil|bot\n| --- | injected |",
      fields: [
        {
          path: "data.**bold**[link](https://e.example)|`code`",
          want: "![img](https://e.example/p.png)",
          have: "<img src=x>",
          owner: { field: "spec.config.x\ny", set: true, at: "clusters/a.yaml:1" },
        },
      ],
    };
    const readme = readmeOf(
      [drifted(hubCr("hub-serving", { conditions: ready }), "DriftKept", [hostile])],
      mirrorResult(),
    );
    const section = readme.slice(readme.indexOf("## Drift"));
    const rows = section.split("\n").filter((line) => line.startsWith("| hub"));
    expect(rows).toHaveLength(1);
    // The row has exactly the header's 7 cells: every remaining `|` is a delimiter.
    expect(rows[0]!.replaceAll("\\\\", "").replaceAll("\\|", "").split("|")).toHaveLength(9);
    expect(rows[0]).toContain("evil\\|bot\\\\n\\| --- \\| injected \\| (Update)");
    expect(rows[0]).toContain("spec.config.x\\\\ny in clusters/a.yaml:1");
    // What Markdown reads once backslash escapes are taken out: no live syntax may remain.
    expect(section.replace(/\\./g, "")).not.toMatch(/<!--|<img|!\[|\]\(|\*\*|`code/);
  });
});

/** The placement report of one placement `all` (placements/all.yaml:3) selecting `clusters`. */
function placementAll(clusters: SelectedCluster[]) {
  const selection = {
    path: "placements/all.yaml",
    line: 3,
    kind: "KnativeServingPlacement" as const,
    namespace: "knative-fleet",
    name: "all",
    clusters,
    skipped: [],
  };
  return { selections: [selection], departures: [] };
}
