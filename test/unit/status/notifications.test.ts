import { describe, expect, it } from "vitest";
import type { RolloutReport } from "../../../src/rollout/edge.ts";
import {
  type FleetReading,
  notificationBody,
  notificationsBetween,
  readFleet,
} from "../../../src/status/notifications.ts";
import { hubCrRow } from "../../../src/status/row.ts";
import { COMMIT, haltOnC1, hubCr, OLDER, ready } from "./hub-crs.ts";

const MIN = 60_000;
const OPTIONS = { fleet: "prod", unhealthyAfterMs: 10 * MIN };
const report = (over: Partial<RolloutReport>): RolloutReport => ({
  phase: "Progressing",
  commit: COMMIT,
  paused: false,
  waiting: 0,
  history: [],
  ...over,
});
const failing = [
  { type: "Ready", status: "False" as const, reason: "Failed", message: "image pull backoff" },
];
const rows = (c1Healthy: boolean) => [
  hubCrRow(hubCr("c1-serving", { cluster: "c1", conditions: c1Healthy ? ready : failing })),
  hubCrRow(hubCr("c1-eventing", { kind: "KnativeEventing", cluster: "c1", conditions: ready })),
  hubCrRow(hubCr("c2-serving", { cluster: "c2", conditions: ready })),
];

/** Readings one after another, each `at` ms; the events each step tells. */
function tell(steps: { at: number; rollout?: RolloutReport; c1Healthy?: boolean }[]): string[][] {
  let last: FleetReading | undefined;
  return steps.map(({ at, rollout, c1Healthy = true }) => {
    const next = readFleet(rollout, rows(c1Healthy), last, at);
    const told = notificationsBetween(last, next, OPTIONS);
    last = next;
    return told.map((n) => `${n.event}: ${n.text}`);
  });
}

describe("notifications: what happened between two readings, once", () => {
  it("a rollout's life: started, each wave opened, halted with its reason, and a new one completed", () => {
    const halt = haltOnC1("DeploymentsAvailable=False");
    expect(
      tell([
        { at: 0, rollout: report({ phase: "Complete", commit: OLDER }) },
        { at: 1, rollout: report({ wave: "canary", opened: true }) },
        { at: 2, rollout: report({ wave: "canary", opened: true }) },
        { at: 3, rollout: report({ wave: "remaining", opened: false }) },
        { at: 4, rollout: report({ wave: "remaining", opened: true }) },
        { at: 5, rollout: report({ phase: "Halted", halt }) },
        { at: 6, rollout: report({ phase: "Halted", halt }) },
        { at: 7, rollout: report({ phase: "Complete", commit: OLDER }) },
      ]),
    ).toEqual([
      [],
      [
        "RolloutStarted: rollout of 0123456789ab started",
        "WaveOpened: rollout of 0123456789ab: wave canary is open",
      ],
      [],
      [],
      ["WaveOpened: rollout of 0123456789ab: wave remaining is open"],
      [
        "RolloutHalted: rollout of 0123456789ab halted in wave canary: KnativeServing knative-fleet/c1-serving on " +
          "fleet-system/c1: DeploymentsAvailable=False; a commit that changes KnativeServing knative-fleet/c1-serving " +
          "(a fix, or a revert of the change) lifts the halt",
      ],
      [],
      ["RolloutCompleted: rollout of fedcba987654 has reached every wave"],
    ]);
  });

  it("a leader's first reading tells nothing: it cannot know what the last leader told", () => {
    expect(tell([{ at: 0, rollout: report({ phase: "Halted" }), c1Healthy: false }])).toEqual([[]]);
  });

  it("a cluster is told unhealthy only once it stayed so, and recovered once; a CR flapping meanwhile is nothing", () => {
    expect(
      tell([
        { at: 0 },
        { at: 1 * MIN, c1Healthy: false },
        { at: 2 * MIN, c1Healthy: true },
        { at: 3 * MIN, c1Healthy: false },
        { at: 12 * MIN, c1Healthy: false },
        { at: 13 * MIN, c1Healthy: false },
        { at: 14 * MIN, c1Healthy: false },
        { at: 15 * MIN, c1Healthy: true },
        { at: 16 * MIN, c1Healthy: true },
      ]),
    ).toEqual([
      [],
      [],
      [],
      [],
      [],
      ["ClusterUnhealthy: cluster fleet-system/c1 has not been healthy for 10 min"],
      [],
      ["ClusterRecovered: cluster fleet-system/c1 is healthy again"],
      [],
    ]);
  });

  it("each receiver's format: generic JSON, Slack's text (escaped), a Teams Adaptive Card", () => {
    const [note] = notificationsBetween(
      { rollout: report({ phase: "Complete", commit: OLDER }), unhealthySince: new Map(), at: 0 },
      { rollout: report({ phase: "Complete" }), unhealthySince: new Map(), at: 1 },
      OPTIONS,
    );
    expect(notificationBody(note!, "generic")).toEqual({
      event: "RolloutCompleted",
      severity: "info",
      fleet: "prod",
      commit: COMMIT,
      text: "rollout of 0123456789ab has reached every wave",
    });
    expect(notificationBody({ ...note!, text: "a <b> & c" }, "slack")).toEqual({
      text: "*knative-fleet prod: RolloutCompleted*\na &lt;b&gt; &amp; c",
    });
    const teams = notificationBody(note!, "teams") as {
      attachments: { contentType: string; content: { body: { text: string }[] } }[];
    };
    expect(teams.attachments[0]!.contentType).toBe("application/vnd.microsoft.card.adaptive");
    expect(teams.attachments[0]!.content.body.map((b) => b.text)).toEqual([
      "knative-fleet prod: RolloutCompleted",
      "rollout of 0123456789ab has reached every wave",
      "commit 0123456789ab",
    ]);
  });
});
