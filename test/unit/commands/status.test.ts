import { describe, expect, it } from "vitest";
import { ConditionType } from "../../../src/api/conditions.ts";
import type { DriftRecord } from "../../../src/api/drift.ts";
import type { Condition } from "../../../src/api/knative.ts";
import { DRIFT_STATUS_ANNOTATION } from "../../../src/api/labels.ts";
import {
  isSettled,
  renderDriftRecords,
  renderStatusTable,
  statusRows,
} from "../../../src/commands/status.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { runCli } from "../../support/cli.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { CORRECTED, KEPT } from "../status/drift-records.ts";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const READY: Condition[] = Object.values(ConditionType).map((type) => ({ type, status: "True" }));

interface CrOptions {
  kind?: "KnativeServing" | "KnativeEventing";
  namespace?: string;
  cluster?: string;
  generation?: number;
  status?: Record<string, unknown>;
  annotations?: Record<string, string>;
  deleting?: string[];
}

/** A CR as the hub lists it; Ready on its current generation unless told otherwise. */
function cr(name: string, options: CrOptions = {}): KubeObject {
  const { kind = "KnativeServing", namespace = "knative-serving", generation = 1, cluster } = options;
  const [profileNamespace, profileName] = cluster?.split("/") ?? [];
  return {
    apiVersion: "operator.knative.dev/v1beta1",
    kind,
    metadata: {
      name,
      namespace,
      generation,
      annotations: options.annotations,
      ...(options.deleting && { deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: options.deleting }),
    },
    spec: cluster ? { clusterProfileRef: { namespace: profileNamespace, name: profileName } } : {},
    status: options.status ?? { observedGeneration: generation, version: "1.22.0", conditions: READY },
  };
}

/** READY with some conditions replaced (conditions stay sorted by type, as knative.dev/pkg keeps them). */
function withConditions(...changed: Condition[]): Condition[] {
  return READY.map((condition) => changed.find((c) => c.type === condition.type) ?? condition);
}

const row = (object: KubeObject) => statusRows([object])[0]!;

describe("statusRows", () => {
  it("reads a Ready CR: cluster, version, generations and the fleet file and commit it came from", () => {
    const ready = row(
      cr("serving", {
        cluster: "fleet-system/spoke-1",
        generation: 3,
        annotations: {
          "fleet.knative.dev/source-path": "clusters/spoke-1/serving.yaml",
          "fleet.knative.dev/source-commit": COMMIT,
        },
      }),
    );
    expect(ready).toEqual({
      cluster: "fleet-system/spoke-1",
      kind: "KnativeServing",
      namespace: "knative-serving",
      name: "serving",
      phase: "Current",
      ready: "True",
      version: "1.22.0",
      generation: 3,
      observedGeneration: 3,
      stale: false,
      path: "clusters/spoke-1/serving.yaml",
      commit: COMMIT,
    });
    expect(isSettled(ready)).toBe(true);
  });

  it("names the hub as the target of a CR without clusterProfileRef", () => {
    expect(row(cr("serving")).cluster).toBe("hub");
  });

  it("explains a CR by its first non-True condition in upstream's order, not the stored (alphabetical) one", () => {
    const unresolved = row(
      cr("serving", {
        status: {
          observedGeneration: 1,
          conditions: withConditions(
            { type: "DependenciesInstalled", status: "Unknown", reason: "Waiting" },
            { type: "Ready", status: "False", reason: "ClusterProfileNotFound", message: "from Ready" },
            {
              type: "TargetClusterResolved",
              status: "False",
              reason: "ClusterProfileNotFound",
              message: "ClusterProfile fleet-system/gone not found",
            },
          ),
        },
      }),
    );
    expect(unresolved).toMatchObject({
      phase: "Failed",
      ready: "False",
      condition: "TargetClusterResolved",
      reason: "ClusterProfileNotFound",
      message:
        "TargetClusterResolved=False (ClusterProfileNotFound: ClusterProfile fleet-system/gone not found)",
    });
    expect(unresolved.version).toBeUndefined();
    expect(isSettled(unresolved)).toBe(false);

    const installing = row(
      cr("serving", {
        status: {
          observedGeneration: 1,
          conditions: withConditions(
            { type: "DeploymentsAvailable", status: "False", reason: "NotReady", message: "0/1 available" },
            { type: "InstallSucceeded", status: "Unknown", reason: "Installing" },
            { type: "Ready", status: "Unknown", reason: "Installing" },
          ),
        },
      }),
    );
    expect(installing).toMatchObject({
      phase: "InProgress",
      ready: "Unknown",
      condition: "InstallSucceeded",
      reason: "Installing",
    });
  });

  it("falls back to Ready itself when no dependency condition says why", () => {
    const status = {
      observedGeneration: 1,
      conditions: [{ type: "Ready", status: "False", reason: "Failed", message: "it broke" }],
    };
    expect(row(cr("serving", { status }))).toMatchObject({
      phase: "Failed",
      ready: "False",
      condition: "Ready",
      reason: "Failed",
      message: "Ready=False (Failed: it broke)",
    });
  });

  it("marks a CR stale while the controller is behind its generation, or has never reported", () => {
    const behind = row(
      cr("serving", { generation: 3, status: { observedGeneration: 2, conditions: READY } }),
    );
    expect(behind).toMatchObject({
      phase: "InProgress",
      ready: "True",
      generation: 3,
      observedGeneration: 2,
      stale: true,
    });
    expect(isSettled(behind)).toBe(false);

    const fresh = row(cr("serving", { status: {} }));
    expect(fresh).toMatchObject({ phase: "InProgress", ready: "Unknown", generation: 1, stale: true });
    expect(fresh.observedGeneration).toBeUndefined();
    expect(fresh.condition).toBeUndefined();
  });

  it("shows a CR being deleted with its pending finalizer, offering the abandon command only when its cluster is unresolved", () => {
    const finalizer = "knativeeventings.operator.knative.dev";
    const unresolved = withConditions({
      type: "TargetClusterResolved",
      status: "False",
      reason: "ClusterProfileNotReady",
      message: "ClusterProfile fleet-system/spoke-9 is not healthy",
    });
    const stuck = row(
      cr("eventing", {
        kind: "KnativeEventing",
        namespace: "knative-eventing",
        cluster: "fleet-system/spoke-9",
        deleting: [finalizer],
        status: { observedGeneration: 1, conditions: unresolved },
      }),
    );
    expect(stuck.deleting).toEqual({
      finalizers: [finalizer],
      abandonCommand:
        "kubectl -n knative-eventing annotate knativeeventing eventing fleet.knative.dev/abandon-cleanup=true",
    });
    expect(isSettled(stuck)).toBe(false);

    const alreadyAbandoned = row(
      cr("eventing", {
        deleting: [finalizer],
        annotations: { "fleet.knative.dev/abandon-cleanup": "true" },
        status: { observedGeneration: 1, conditions: unresolved },
      }),
    );
    expect(alreadyAbandoned.deleting).toEqual({ finalizers: [finalizer] });

    const cleaningUp = row(cr("serving", { deleting: ["knativeservings.operator.knative.dev"] }));
    expect(cleaningUp.deleting).toEqual({ finalizers: ["knativeservings.operator.knative.dev"] });
    expect(isSettled(cleaningUp)).toBe(false);
  });

  it("sorts by cluster, kind, namespace and name, in code-unit order whatever the list order", () => {
    const objects = [
      cr("b", { cluster: "fleet-system/spoke-1" }),
      cr("z", { cluster: "fleet-system/spoke-1", kind: "KnativeEventing" }),
      cr("a", { namespace: "team-b" }),
      cr("a", { cluster: "fleet-system/spoke-1" }),
      cr("a", { namespace: "team-a" }),
      cr("a", { cluster: "Fleet/upper" }),
    ];
    const order = (rows: ReturnType<typeof statusRows>) =>
      rows.map((r) => `${r.cluster} ${r.kind} ${r.namespace}/${r.name}`);
    const expected = [
      "Fleet/upper KnativeServing knative-serving/a",
      "fleet-system/spoke-1 KnativeEventing knative-serving/z",
      "fleet-system/spoke-1 KnativeServing knative-serving/a",
      "fleet-system/spoke-1 KnativeServing knative-serving/b",
      "hub KnativeServing team-a/a",
      "hub KnativeServing team-b/a",
    ];
    expect(order(statusRows(objects))).toEqual(expected);
    expect(order(statusRows(objects.toReversed()))).toEqual(expected);
  });
});

describe("renderStatusTable", () => {
  it("prints one aligned row per CR, the explanation last, then the command that releases a stuck deletion", () => {
    const rows = statusRows([
      cr("serving", {
        cluster: "fleet-system/spoke-1",
        annotations: {
          "fleet.knative.dev/source-path": "clusters/spoke-1.yaml",
          "fleet.knative.dev/source-commit": COMMIT,
        },
      }),
      cr("serving", {
        namespace: "team-a",
        generation: 3,
        status: {
          observedGeneration: 3,
          version: "1.21.1",
          conditions: withConditions(
            { type: "InstallSucceeded", status: "False", reason: "InstallFailed", message: "apply failed" },
            { type: "Ready", status: "False", reason: "InstallFailed", message: "apply failed" },
          ),
        },
      }),
      cr("fresh", { namespace: "team-a", status: {} }),
      cr("eventing", {
        kind: "KnativeEventing",
        namespace: "knative-eventing",
        cluster: "fleet-system/spoke-9",
        deleting: ["knativeeventings.operator.knative.dev"],
        status: {
          observedGeneration: 1,
          conditions: withConditions(
            { type: "Ready", status: "False", reason: "ClusterProfileNotReady" },
            { type: "TargetClusterResolved", status: "False", reason: "ClusterProfileNotReady" },
          ),
        },
      }),
    ]);
    expect(renderStatusTable(rows, true)).toBe(
      [
        "CLUSTER               KIND             CR                         READY    VERSION  GENERATION  SOURCE                         DRIFT  STATUS",
        "fleet-system/spoke-1  KnativeServing   knative-serving/serving    True     1.22.0   1/1         clusters/spoke-1.yaml@0123456  -      Current",
        "fleet-system/spoke-9  KnativeEventing  knative-eventing/eventing  False    -        1/1         -                              -      Terminating (finalizer knativeeventings.operator.knative.dev pending): the CR is being deleted; its cluster is being cleaned up; TargetClusterResolved=False (ClusterProfileNotReady)",
        "hub                   KnativeServing   team-a/fresh               Unknown  -        -/1 stale   -                              -      InProgress: the hub controller has not reported on the current spec yet",
        "hub                   KnativeServing   team-a/serving             False    1.21.1   3/3         -                              -      Failed: InstallSucceeded=False (InstallFailed: apply failed)",
        "",
        "KnativeEventing knative-eventing/eventing is being deleted, but its cluster fleet-system/spoke-9 cannot be reached to clean it up. If that cluster is gone for good, release the CR without cleanup:",
        "  kubectl -n knative-eventing annotate knativeeventing eventing fleet.knative.dev/abandon-cleanup=true",
        "",
      ].join("\n"),
    );
  });

  it("leaves -o wide's columns, the generations and the source, to -o wide", () => {
    const rows = statusRows([cr("serving", { cluster: "fleet-system/spoke-1", generation: 2 })]);
    expect(renderStatusTable(rows)).toBe(
      [
        "CLUSTER               KIND            CR                       READY  VERSION  STATUS",
        "fleet-system/spoke-1  KnativeServing  knative-serving/serving  True   1.22.0   Current",
        "",
      ].join("\n"),
    );
  });

  it("says when there is nothing to show", () => {
    expect(renderStatusTable([])).toBe("No KnativeServing or KnativeEventing CRs found.\n");
  });
});

/** A Ready CR whose status says it drifted, as src/reconcile/drift.ts writes it: Drifted, and the records. */
function drifted(name: string, cluster: string, reason: string, records: readonly DriftRecord[]): KubeObject {
  return cr(name, {
    cluster,
    status: {
      observedGeneration: 1,
      version: "1.22.0",
      conditions: withConditions({
        type: "Drifted",
        status: reason === "DriftKept" ? "True" : "False",
        reason,
      }),
      annotations: { [DRIFT_STATUS_ANNOTATION]: JSON.stringify(records) },
    },
  });
}

const DRIFTED = [
  drifted("serving", "fleet-system/spoke-1", "DriftKept", [KEPT, CORRECTED]),
  drifted("serving", "fleet-system/spoke-2", "DriftCorrected", [CORRECTED]),
  cr("serving", { cluster: "fleet-system/spoke-3" }),
  drifted("serving", "fleet-system/spoke-4", "NoDrift", [KEPT]),
];

describe("knative-fleet status with drift", () => {
  it("carries each row's drift for -o json and yaml; drift alone leaves a Ready CR settled", () => {
    const rows = statusRows(DRIFTED);
    expect(rows.map((r) => r.drift)).toEqual([
      { state: "kept", records: [KEPT, CORRECTED] },
      { state: "corrected", records: [CORRECTED] },
      undefined,
      undefined,
    ]);
    expect(rows.every(isSettled)).toBe(true);
    expect(JSON.parse(JSON.stringify(rows[0]))).toMatchObject({
      drift: { state: "kept", records: [KEPT, CORRECTED] },
    });
  });

  it("-o wide shows the newest record in a DRIFT column; the plain table leaves it out", () => {
    const rows = statusRows(DRIFTED);
    expect(renderStatusTable(rows, true)).toBe(
      [
        "CLUSTER               KIND            CR                       READY  VERSION  GENERATION  SOURCE  DRIFT                                                                              STATUS",
        "fleet-system/spoke-1  KnativeServing  knative-serving/serving  True   1.22.0   1/1         -       kept: ConfigMap knative-serving/config-autoscaler changed by kubectl-edit          Current",
        "fleet-system/spoke-2  KnativeServing  knative-serving/serving  True   1.22.0   1/1         -       put back: Deployment knative-serving/activator changed by kube-controller-manager  Current",
        "fleet-system/spoke-3  KnativeServing  knative-serving/serving  True   1.22.0   1/1         -       -                                                                                  Current",
        "fleet-system/spoke-4  KnativeServing  knative-serving/serving  True   1.22.0   1/1         -       -                                                                                  Current",
        "",
      ].join("\n"),
    );
    expect(renderStatusTable(rows)).not.toContain("DRIFT");
  });

  it("--drift prints each drifted CR's records in full, newest first, one block per CR", () => {
    expect(renderDriftRecords(statusRows(DRIFTED))).toBe(
      [
        "",
        "Drift on KnativeServing knative-serving/serving (cluster fleet-system/spoke-1): a change is kept",
        '  kept ConfigMap knative-serving/config-autoscaler changed by kubectl-edit at 2026-11-28T15:00:00Z; data.enable-scale-to-zero: "true" -> "false"; edit spec.config.autoscaler.enable-scale-to-zero in clusters/spoke-1-serving.yaml:14 instead',
        '  put back Deployment knative-serving/activator changed by kube-controller-manager at 2026-11-28T14:00:00Z; spec.replicas: 2 -> 5; set spec.workloads in clusters/spoke-2-serving.yaml:6 instead; spec.template.spec.priorityClassName: (absent) -> "high" (from the release manifests); spec.template.spec.containers[name=activator].resources: {"limits":{"cpu":"1"}} -> {"limits":{"cpu":"2"}}; set spec.workloads in clusters/spoke-2-serving.yaml:6 instead; 2 more fields',
        "",
        "Drift on KnativeServing knative-serving/serving (cluster fleet-system/spoke-2): the last change was put back",
        '  put back Deployment knative-serving/activator changed by kube-controller-manager at 2026-11-28T14:00:00Z; spec.replicas: 2 -> 5; set spec.workloads in clusters/spoke-2-serving.yaml:6 instead; spec.template.spec.priorityClassName: (absent) -> "high" (from the release manifests); spec.template.spec.containers[name=activator].resources: {"limits":{"cpu":"1"}} -> {"limits":{"cpu":"2"}}; set spec.workloads in clusters/spoke-2-serving.yaml:6 instead; 2 more fields',
        "",
      ].join("\n"),
    );
    expect(renderDriftRecords(statusRows([cr("serving")]))).toBe("\nNo drift recorded.\n");
  });

  it("keeps a hostile manager on its line, in the DRIFT column and in --drift", () => {
    const hostile = { ...KEPT, manager: "evil\nCLUSTER  fake-row\u001b[2J" };
    const rows = statusRows([drifted("serving", "fleet-system/spoke-1", "DriftKept", [hostile])]);
    const table = renderStatusTable(rows, true);
    expect(table.split("\n")).toHaveLength(3);
    expect(table).toContain(
      "kept: ConfigMap knative-serving/config-autoscaler changed by evil\\nCLUSTER  fake-row\\u001b[2J",
    );
    const records = renderDriftRecords(rows).split("\n");
    expect(records).toHaveLength(4);
    expect(records[2]).toContain("changed by evil\\nCLUSTER  fake-row\\u001b[2J at ");
  });

  it("documents --drift in its help", async () => {
    const { code, stdout } = await runCli("status", "--help");
    expect(code).toBe(0);
    expect(stdout).toContain("  --drift ");
  });
});

describe("knative-fleet status without a usable hub", () => {
  const status = (...args: string[]) => runCli("status", ...args);

  it("names the kubeconfig it cannot load, exit 2", async () => {
    const { code, stderr } = await status("--kubeconfig", "/nonexistent/hub.kubeconfig");
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /^knative-fleet status: cannot load the hub kubeconfig \/nonexistent\/hub\.kubeconfig: .*ENOENT/,
    );
  });

  it("names the server it cannot reach and why, exit 2", async () => {
    // Port 9 (discard) on loopback: nothing listens there, so the connection is refused at once.
    const server = "https://127.0.0.1:9";
    const kubeconfig = writeTokenKubeconfig({ server, "insecure-skip-tls-verify": true }, "t");
    const { code, stdout, stderr } = await status("--kubeconfig", kubeconfig);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toBe(
      `knative-fleet status: cannot reach the hub ${server}: connection refused (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9)\n`,
    );
  });

  it("rejects an unknown output format as a usage error", async () => {
    const { code, stderr } = await status("-o", "xml");
    expect(code).toBe(2);
    expect(stderr).toContain(
      'knative-fleet status: -o/--output is the output format, table, wide, json, yaml, not "xml"',
    );
  });
});
