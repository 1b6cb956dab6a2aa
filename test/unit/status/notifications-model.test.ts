import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { RolloutReport } from "../../../src/rollout/edge.ts";
import { type FleetReading, notificationsBetween, readFleet } from "../../../src/status/notifications.ts";
import { hubCrRow } from "../../../src/status/row.ts";
import { hubCr, ready } from "./hub-crs.ts";

// "Told once per transition", checked over random sequences of readings (the rollout's report and each
// cluster's health, at random times) by an observer that keeps its own account of what happened, not by
// re-running the code's comparisons:
//   1. a leader's first reading tells nothing;
//   2. a halt, a completion, a start and an approval wait are each told at the reading where they begin,
//      and never again while they last (the same commit, phase and wave);
//   3. a cluster is told unhealthy only once it was unhealthy at every reading for unhealthyAfter, once per
//      such stretch; recovered only at the first healthy reading after it was told unhealthy.

const MIN = 60_000;
const UNHEALTHY_AFTER = 10 * MIN;
const CLUSTERS = ["c1", "c2", "c3"];
const COMMITS = ["a".repeat(40), "b".repeat(40)];
const WAVES = ["canary", "production"];

interface Step {
  advanceMs: number;
  phase: "Progressing" | "Halted" | "Complete";
  commit: number;
  wave: number;
  opened: boolean;
  awaitingApproval: boolean;
  reverted: boolean;
  healthy: boolean[];
}

const stepArbitrary: fc.Arbitrary<Step> = fc.record({
  advanceMs: fc.oneof(fc.constant(5_000), fc.integer({ min: 1_000, max: 8 * MIN })),
  phase: fc.constantFrom("Progressing", "Halted", "Complete"),
  commit: fc.integer({ min: 0, max: 1 }),
  wave: fc.integer({ min: 0, max: 1 }),
  opened: fc.boolean(),
  awaitingApproval: fc.boolean(),
  reverted: fc.boolean(),
  healthy: fc.array(fc.boolean(), { minLength: CLUSTERS.length, maxLength: CLUSTERS.length }),
});

const failing = [{ type: "Ready", status: "False" as const, reason: "Failed", message: "backoff" }];

function reportOf(step: Step): RolloutReport {
  const commit = COMMITS[step.commit]!;
  const wave = WAVES[step.wave]!;
  const progressing = step.phase === "Progressing";
  return {
    phase: step.phase,
    commit,
    paused: false,
    waiting: 0,
    history: [],
    ...(progressing && { wave, opened: step.opened && !step.awaitingApproval }),
    ...(progressing && step.awaitingApproval && { approval: { wave, commit } }),
    ...(step.phase === "Halted" && {
      halt: {
        wave,
        waveIndex: step.wave,
        resource: "r",
        cluster: "c1",
        hash: "ab",
        commit,
        reason: "x",
        at: "",
      },
    }),
    ...(step.phase === "Halted" && step.reverted && { reverted: ["KnativeServing ns/c1-serving"] }),
  };
}

/** The observer's account of one run: what must be told at each reading, in its own terms. */
function expectedAt(
  steps: Step[],
  times: number[],
  index: number,
  since: (number | undefined)[][],
): string[] {
  if (index === 0) return [];
  const [before, now] = [steps[index - 1]!, steps[index]!];
  const out: string[] = [];
  const sameRollout = before.commit === now.commit;
  if (now.phase === "Progressing" && !sameRollout) out.push("RolloutStarted");
  const opened = (s: Step) => s.phase === "Progressing" && s.opened && !s.awaitingApproval;
  if (opened(now) && !(opened(before) && before.wave === now.wave && sameRollout)) out.push("WaveOpened");
  const waits = (s: Step) => s.phase === "Progressing" && s.awaitingApproval;
  if (waits(now) && !(waits(before) && before.wave === now.wave && sameRollout))
    out.push("WaitingForApproval");
  if (now.phase === "Halted" && !(before.phase === "Halted" && sameRollout)) out.push("RolloutHalted");
  if (now.phase === "Halted" && now.reverted) out.push("RolloutReverted");
  if (now.phase === "Complete" && !(before.phase === "Complete" && sameRollout)) out.push("RolloutCompleted");
  CLUSTERS.forEach((_, c) => {
    const due = (at: number) => {
      const start = since[at]![c];
      return start !== undefined && times[at]! - start >= UNHEALTHY_AFTER;
    };
    if (due(index) && !due(index - 1)) out.push(`ClusterUnhealthy ${c}`);
    else if (since[index]![c] === undefined && due(index - 1)) out.push(`ClusterRecovered ${c}`);
  });
  return out.sort();
}

describe("notifications over random readings", () => {
  it("each transition is told once, at the reading it happens, and nothing at a leader's first", () => {
    fc.assert(
      fc.property(fc.array(stepArbitrary, { minLength: 1, maxLength: 40 }), (steps) => {
        let last: FleetReading | undefined;
        let at = 0;
        const times: number[] = [];
        // Since when each cluster has been unhealthy at every reading (the observer's own count).
        const since: (number | undefined)[][] = [];
        steps.forEach((step, index) => {
          at += step.advanceMs;
          times.push(at);
          since.push(step.healthy.map((healthy, c) => (healthy ? undefined : (since[index - 1]?.[c] ?? at))));
          const rows = CLUSTERS.map((cluster, c) =>
            hubCrRow(hubCr(`${cluster}-serving`, { cluster, conditions: step.healthy[c] ? ready : failing })),
          );
          const next = readFleet(reportOf(step), rows, last, at);
          const told = notificationsBetween(last, next, { fleet: "f", unhealthyAfterMs: UNHEALTHY_AFTER });
          last = next;
          const names = told
            .map((n) =>
              n.event.startsWith("Cluster")
                ? `${n.event} ${CLUSTERS.indexOf(n.cluster!.split("/")[1]!)}`
                : n.event,
            )
            .sort();
          expect(names, `reading ${index}`).toEqual(expectedAt(steps, times, index, since));
        });
      }),
      { numRuns: 2_000 },
    );
  });
});
