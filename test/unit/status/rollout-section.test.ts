import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { RolloutReport } from "../../../src/rollout/edge.ts";
import type { StatusSync } from "../../../src/status/summary.ts";
import { renderStatusSummary } from "../../../src/status/summary.ts";

const COMMIT = "0123456789abcdef0123456789abcdef01234567";

const mirror = (rollout: RolloutReport): StatusSync & { rollout: RolloutReport } => ({
  source: { repository: "https://git.example/fleet.git", branch: "main", commit: COMMIT },
  resources: [
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "a",
      path: "clusters/a.yaml",
      action: "unchanged",
    },
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "b",
      path: "clusters/b.yaml",
      action: "waiting",
      reason: "rollout of 0123456789ab halted in wave canary: x",
    },
  ],
  prune: { state: "none", candidates: [], retained: [] },
  diagnostics: [],
  failedFiles: [],
  rollout,
});

const HALTED: RolloutReport = {
  phase: "Halted",
  commit: COMMIT,
  paused: false,
  halt: {
    wave: "canary",
    waveIndex: 0,
    resource: "KnativeServing knative-fleet/a",
    cluster: "fleet-system/c1",
    hash: "0a1b2c",
    commit: COMMIT,
    reason: "DeploymentsAvailable=False (NotReady: Waiting on deployments: activator)",
    at: "2026-01-01T00:00:00.000Z",
  },
  waiting: 1,
  history: [],
};

describe("the status file's Rollout section", () => {
  it("says which revision halted, where, and the first failing reason; lists what waits", () => {
    const [readme, data] = renderStatusSummary({ resources: [], sync: mirror(HALTED) });
    expect(readme!.content).toContain(
      "## Rollout\n\nrollout of 0123456789ab halted in wave canary: KnativeServing knative-fleet/a on fleet-system/c1: " +
        "DeploymentsAvailable=False (NotReady: Waiting on deployments: activator); a commit that changes " +
        "KnativeServing knative-fleet/a (a fix, or a revert of the change) lifts the halt.",
    );
    expect(readme!.content).toContain(
      "| KnativeServing knative-fleet/b | rollout of 0123456789ab halted in wave canary: x |",
    );
    // No timestamp: the same state renders the same file, so it makes no new status commit.
    expect(parse(data!.content).rollout).toEqual({
      phase: "Halted",
      commit: COMMIT,
      paused: false,
      halt: HALTED.halt && {
        wave: "canary",
        resource: "KnativeServing knative-fleet/a",
        cluster: "fleet-system/c1",
        reason: HALTED.halt.reason,
      },
      waiting: [
        {
          resource: "KnativeServing knative-fleet/b",
          reason: "rollout of 0123456789ab halted in wave canary: x",
        },
      ],
    });
  });

  it("is absent without a rollout policy", () => {
    const { rollout: _none, ...plain } = mirror(HALTED);
    const [readme] = renderStatusSummary({ resources: [], sync: plain });
    expect(readme!.content).not.toContain("## Rollout");
  });
});
