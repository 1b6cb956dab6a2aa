import { describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { EventType, InvolvedObject } from "../../../src/observability/events.ts";
import type { FleetMetrics } from "../../../src/observability/metrics.ts";
import {
  type ReconciledCr,
  type ReconcileSinks,
  reportPollFailure,
  reportReconcile,
  reportSync,
  type SyncOutcome,
  type SyncSinks,
} from "../../../src/service/reports.ts";
import { GitSourceError } from "../../../src/source/index.ts";

// What a loop reports, into fake sinks that note every call: no FleetService, no hub, no registry.

type Call = [method: string, ...args: unknown[]];

function sinks() {
  const calls: Call[] = [];
  const note =
    (method: string) =>
    (...args: unknown[]): void => {
      calls.push([method, ...args]);
    };
  const metrics = {
    reconcileFinished: note("reconcileFinished"),
    forgetResource: note("forgetResource"),
    syncFinished: note("syncFinished"),
    rolloutObserved: note("rolloutObserved"),
    upgradesObserved: note("upgradesObserved"),
    pruned: note("pruned"),
  } satisfies Partial<FleetMetrics>;
  const events = {
    record: async (involved: InvolvedObject, type: EventType, reason: string, message: string) => {
      calls.push(["event", involved, type, reason, message]);
    },
  };
  const log = { info: note("log.info"), warn: note("log.warn") };
  return { calls, metrics, events, log } satisfies ReconcileSinks & SyncSinks & Record<string, unknown>;
}

const pass = (over: Partial<ReconciledCr> = {}): ReconciledCr => ({
  kind: "KnativeServing",
  namespace: "knative-fleet",
  name: "spoke-1-serving",
  cluster: "fleet/spoke-1",
  durationMs: 120,
  ready: true,
  drift: 0,
  requests: 7,
  reachable: true,
  version: "1.18.0",
  finalized: false,
  ...over,
});

const INVOLVED = {
  apiVersion: OPERATOR_API_VERSION,
  kind: "KnativeServing",
  metadata: { name: "spoke-1-serving", namespace: "knative-fleet" },
};

describe("reportReconcile", () => {
  it("a converged pass: its series, no Event", () => {
    const to = sinks();
    reportReconcile(pass(), to);
    expect(to.calls).toEqual([["reconcileFinished", { ...pass(), error: false }]]);
  });

  it("a failed pass: its series with error, and a Warning ReconcileFailed Event with the error's message", () => {
    const to = sinks();
    const report = pass({ error: new Error("the spoke refused the apply"), ready: false });
    reportReconcile(report, to);
    expect(to.calls).toEqual([
      ["reconcileFinished", { ...report, error: true }],
      ["event", INVOLVED, "Warning", "ReconcileFailed", "the spoke refused the apply"],
    ]);
  });

  it("each new drift: a Normal Event naming the cluster, who changed what, and the fleet file line to edit", () => {
    const to = sinks();
    const record = (outcome: "corrected" | "kept") => ({
      object: "ConfigMap knative-serving/config-autoscaler",
      change: "changed" as const,
      fields: [
        {
          path: "data.max-scale",
          want: '"3"',
          have: '"9"',
          owner: { field: "spec.config.autoscaler.max-scale", set: true, at: "clusters/a.yaml:12" },
        },
      ],
      manager: "kubectl-edit",
      outcome,
    });
    reportReconcile(pass({ drift: 1, drifted: [record("corrected"), record("kept")] }), to);
    expect(to.calls.filter(([method]) => method === "event")).toEqual([
      [
        "event",
        INVOLVED,
        "Normal",
        "DriftCorrected",
        'fleet/spoke-1: put back ConfigMap knative-serving/config-autoscaler changed by kubectl-edit; data.max-scale: "3" -> "9"; edit spec.config.autoscaler.max-scale in clusters/a.yaml:12 instead',
      ],
      [
        "event",
        INVOLVED,
        "Normal",
        "DriftKept",
        'fleet/spoke-1: kept ConfigMap knative-serving/config-autoscaler changed by kubectl-edit; data.max-scale: "3" -> "9"; edit spec.config.autoscaler.max-scale in clusters/a.yaml:12 instead',
      ],
    ]);
  });

  it("a failure that also found drift reports the failure only", () => {
    const to = sinks();
    reportReconcile(pass({ error: new Error("boom"), drift: 3 }), to);
    expect(to.calls.filter(([method]) => method === "event").map((call) => call[3])).toEqual([
      "ReconcileFailed",
    ]);
  });

  it("a finalized CR: its series forgotten, none recorded", () => {
    const to = sinks();
    const report = pass({ finalized: true });
    reportReconcile(report, to);
    expect(to.calls).toEqual([["forgetResource", report]]);
  });
});

const outcome = (over: Partial<SyncOutcome> = {}): SyncOutcome => ({
  resources: [
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "a",
      path: "clusters/a.yaml",
      action: "create",
    },
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "b",
      path: "clusters/b.yaml",
      action: "create",
    },
    {
      kind: "KnativeEventing",
      namespace: "knative-fleet",
      name: "c",
      path: "clusters/c.yaml",
      action: "unchanged",
    },
  ],
  prune: {
    state: "held",
    reason: "over-max-fraction",
    message:
      "pruning 1 of 3 mirrored CRs (33%) exceeds maxPruneFraction 10% and waits for a person's confirmation",
    candidates: [{ kind: "KnativeServing", namespace: "knative-fleet", name: "gone" }],
    retained: [],
    confirmation: { namespace: "knative-fleet", token: "0123456789abcdef" },
  },
  failedFiles: [{ path: "clusters/bad.yaml", status: "failed", declares: [] }],
  ...over,
});

const RUN = { commit: "0123abcd", trigger: "git", durationMs: 250 } as const;

describe("reportSync", () => {
  it("without a rollout: the sync's and the prune's series, and one log line counting the CRs by action", () => {
    const to = sinks();
    reportSync(outcome(), RUN, to);
    expect(to.calls).toEqual([
      ["syncFinished", { durationMs: 250, trigger: "git" }],
      ["upgradesObserved", []],
      ["pruned", { outcome: "held", count: 1 }],
      [
        "log.info",
        { commit: "0123abcd", trigger: "git", create: 2, unchanged: 1, invalidFiles: 1, prune: "held" },
        "fleet synced into the hub",
      ],
    ]);
  });

  it("with a rollout: its state as series (waves completed from its history) and in the log line", () => {
    const to = sinks();
    const rollout = {
      phase: "Progressing",
      wave: "canary",
      paused: false,
      waiting: 4,
      history: [{ wave: "first", completed: "2026-11-28T10:00:00Z" }],
    } as const satisfies SyncOutcome["rollout"];
    reportSync(outcome({ rollout, resources: [] }), { ...RUN, trigger: "rollout" }, to);
    expect(to.calls).toEqual([
      ["syncFinished", { durationMs: 250, trigger: "rollout" }],
      ["rolloutObserved", { ...rollout, wavesCompleted: 1 }],
      ["upgradesObserved", []],
      ["pruned", { outcome: "held", count: 1 }],
      [
        "log.info",
        {
          commit: "0123abcd",
          trigger: "rollout",
          invalidFiles: 1,
          prune: "held",
          rollout: "Progressing",
          wave: "canary",
          waiting: 4,
        },
        "fleet synced into the hub",
      ],
    ]);
  });
});

describe("reportPollFailure", () => {
  it("a Git failure: a warning naming its kind", () => {
    const to = sinks();
    reportPollFailure(new GitSourceError("auth", "fetch", "401 from the server"), to);
    expect(to.calls).toEqual([
      [
        "log.warn",
        { err: "401 from the server", kind: "auth" },
        "fleet sync failed; nothing is pruned, retrying on the next poll",
      ],
    ]);
  });

  it("any other failure is the sync's", () => {
    const to = sinks();
    reportPollFailure(new Error("the hub refused the mirror"), to);
    expect(to.calls[0]?.[1]).toEqual({ err: "the hub refused the mirror", kind: "sync" });
  });
});
