import { describe, expect, it } from "vitest";
import {
  clustersIn,
  DeclarationHistory,
  gitHistoryViolations,
  judgeLogLine,
  ownershipViolations,
  parseRefUpdate,
  quantile,
  slopePerHour,
  waveViolation,
} from "../../soak/checks.ts";
import { waveCr } from "./wave-cr.ts";

// The soak's judgements, each on the violation it exists to catch and on the case it must let pass: a
// counter of the soak report that stayed 0 means something only if its check can fail.

const id = (c: string) => c.repeat(40);

describe("Git history", () => {
  const person = { id: id("a"), parents: [], tree: id("1"), author: "Ada" };
  const status = { id: id("b"), parents: [id("a")], tree: id("2"), author: "knative-fleet" };
  const updates = [
    { old: "0".repeat(40), new: id("a"), fastForward: true },
    { old: id("a"), new: id("b"), fastForward: true },
  ];
  const clean = {
    commits: [person, status],
    updates,
    personPushes: [{ commit: id("a"), message: "fleet" }],
    botAuthor: "knative-fleet",
  };

  it("passes a linear history of a push and its status commit", () => {
    expect(gitHistoryViolations(clean)).toEqual([]);
  });

  it("catches a force push, a status commit off a head, an empty status commit and a lost push", () => {
    expect(
      gitHistoryViolations({
        ...clean,
        updates: [...updates, { old: id("b"), new: id("c"), fastForward: false }],
      }),
    ).toEqual([`the branch was force-pushed from ${id("b").slice(0, 12)} to ${id("c").slice(0, 12)}`]);
    const offHead = { ...status, parents: [id("e")] };
    expect(gitHistoryViolations({ ...clean, commits: [person, offHead] })[0]).toMatch(
      /was never the branch head/,
    );
    const empty = { ...status, tree: person.tree };
    expect(gitHistoryViolations({ ...clean, commits: [person, empty] })[0]).toMatch(/changes nothing/);
    expect(
      gitHistoryViolations({
        ...clean,
        personPushes: [...clean.personPushes, { commit: id("d"), message: "lost" }],
      }),
    ).toEqual([`the push "lost" (${id("d").slice(0, 12)}) is no longer in the branch's history`]);
  });

  it("reads the update hook's lines", () => {
    expect(parseRefUpdate(`${id("a")} ${id("b")} forced\n`)).toEqual({
      old: id("a"),
      new: id("b"),
      fastForward: false,
    });
    expect(parseRefUpdate("garbage")).toBeUndefined();
  });
});

describe("declarations", () => {
  it("a CR deleted while declared the whole time since it appeared was pruned against its file", () => {
    const history = new DeclarationHistory();
    history.update(new Set(["a", "b"]), 100);
    history.update(new Set(["a"]), 200); // b's file removed
    history.update(new Set(["a", "b"]), 300); // and added back
    expect(history.undeclaredDuring("a", 150, 400)).toBe(false);
    expect(history.undeclaredDuring("b", 150, 400)).toBe(true);
    expect(history.undeclaredDuring("b", 310, 400)).toBe(false);
    expect(history.undeclaredDuring("never", 0, 1)).toBe(true);
    expect(history.isDeclared("b")).toBe(true);
  });
});

describe("waves", () => {
  it("catches a CR let through while maxUnavailable changed CRs of its wave are unhealthy", () => {
    const letThrough = waveCr("c", { unhealthySince: 5_000, changedAt: 5_000 });
    expect(waveViolation(letThrough, [waveCr("a"), letThrough], 1, 5_000, 3_000)).toMatch(
      /2 changed CRs of wave remaining/,
    );
    expect(waveViolation(letThrough, [waveCr("a"), letThrough], 2, 5_000, 3_000)).toBeUndefined();
  });

  it("a CR counted already (changed, unhealthy) that gets new content, a fix, takes its own place", () => {
    const fix = waveCr("c", { unhealthySince: 5_000, changedAt: 5_000, wasUnavailable: true });
    expect(waveViolation(fix, [waveCr("a"), fix], 1, 5_000, 3_000)).toBeUndefined();
  });

  it("does not count healthy CRs, unchanged ones, other waves, or one that turned unhealthy on its own a moment ago", () => {
    const letThrough = waveCr("c", { unhealthySince: 5_000, changedAt: 5_000 });
    const others = [
      waveCr("healthy", { healthy: true }),
      waveCr("unchanged", { hash: "old" }),
      waveCr("canary", { wave: "canary" }),
      waveCr("fault", { changedAt: 100, unhealthySince: 4_500 }),
    ];
    expect(waveViolation(letThrough, [...others, letThrough], 1, 5_000, 3_000)).toBeUndefined();
    // The same fault, unhealthy for longer than the grace: the gate had time to see it.
    expect(waveViolation(letThrough, [...others, letThrough], 1, 9_000, 3_000)).toMatch(/fault/);
  });

  it("does not count a CR the fleet no longer wants (its cluster left the placement): it blocks no wave", () => {
    const letThrough = waveCr("c", { unhealthySince: 5_000, changedAt: 5_000 });
    const departing = waveCr("eventing-spoke-1", { member: false });
    expect(waveViolation(letThrough, [departing, letThrough], 1, 9_000, 3_000)).toBeUndefined();
    expect(waveViolation(letThrough, [{ ...departing, member: true }, letThrough], 1, 9_000, 3_000)).toMatch(
      /eventing-spoke-1/,
    );
  });
});

describe("leaders and owners", () => {
  it("two replicas sampled close together that both lead, or both report a cluster", () => {
    const found = ownershipViolations(
      [
        { replica: "r1", at: 1_000, leader: true, clusters: { "p/spoke-1": ["a"] } },
        { replica: "r2", at: 1_050, leader: true, clusters: { "p/spoke-1": ["b", "c"], "p/spoke-2": ["d"] } },
        { replica: "r3", at: 9_000, leader: true, clusters: { "p/spoke-2": ["a"] } },
      ],
      2_000,
    );
    expect(found).toEqual([
      { invariant: "one-leader", evidence: "r1 and r2 both lead (50 ms apart)" },
      {
        invariant: "one-owner-per-cluster",
        evidence: "r1 and r2 both report p/spoke-1 (50 ms apart; r1: a; r2: b c)",
      },
    ]);
  });

  it("reads the clusters a replica reports from its /metrics, with the metrics that name each", () => {
    const metrics = [
      "# HELP knative_fleet_spoke_ready whether the install is ready",
      'knative_fleet_spoke_ready{kind="KnativeServing",cluster="soak/spoke-2"} 1',
      'knative_fleet_spoke_reachable{cluster="soak/spoke-1"} 1',
      'knative_fleet_reconcile_duration_seconds_bucket{le="1",cluster="soak/spoke-1"} 1',
      'knative_fleet_reconcile_duration_seconds_sum{cluster="soak/spoke-1"} 0.5',
      'knative_fleet_reconcile_errors_total{kind="KnativeServing",cluster="hub"} 0',
    ].join("\n");
    expect(clustersIn(metrics)).toEqual({
      "soak/spoke-1": ["knative_fleet_reconcile_duration_seconds", "knative_fleet_spoke_reachable"],
      "soak/spoke-2": ["knative_fleet_spoke_ready"],
    });
  });
});

describe("log lines", () => {
  const line = (entry: object) => JSON.stringify({ level: 50, time: 1, msg: "reconcile failed", ...entry });

  it("passes an error that says what failed and where, and ignores info lines", () => {
    expect(
      judgeLogLine(line({ cluster: "p/spoke-1", err: "GET /version: connect ECONNREFUSED 127.0.0.1:1" })),
    ).toEqual({
      level: 50,
      summary: "reconcile failed: GET /version: connect ECONNREFUSED <n>.<n>.<n>.<n>:<n>",
    });
    expect(judgeLogLine(JSON.stringify({ level: 30, msg: "synced" }))).toBeUndefined();
  });

  it("catches uncaught errors, in the log or printed by Node", () => {
    expect(
      judgeLogLine(line({ msg: "uncaught error; the service goes on", err: "Error: boom" }))?.uncaught,
    ).toBe("uncaught error; the service goes on: Error: boom");
    expect(judgeLogLine("TypeError: x is not a function")?.uncaught).toMatch(/an error Node printed/);
  });

  it("catches error lines no user can act on", () => {
    expect(judgeLogLine(line({ err: "[object Object]" }))?.unactionable).toMatch(/object printed as text/);
    expect(
      judgeLogLine(line({ err: "TypeError: Cannot read properties of undefined (reading 'x')" }))
        ?.unactionable,
    ).toMatch(/programming error/);
    expect(judgeLogLine(line({ err: "fetch failed" }))?.unactionable).toMatch(/names nothing/);
    expect(judgeLogLine(line({ err: "fetch failed", cluster: "p/spoke-1" }))?.unactionable).toBeUndefined();
    expect(judgeLogLine(line({ msg: "" }))?.unactionable).toMatch(/without a message/);
    expect(
      judgeLogLine("(node:1) MaxListenersExceededWarning: Possible EventEmitter memory leak")?.unactionable,
    ).toMatch(/not a log line/);
  });
});

describe("numbers", () => {
  it("slope per hour by least squares, and nearest-rank quantiles", () => {
    const points = [0, 1, 2, 3].map((h) => ({ at: h * 3_600_000, value: 100 + 4 * h }));
    expect(slopePerHour(points)).toBeCloseTo(4);
    expect(slopePerHour([{ at: 0, value: 1 }])).toBe(0);
    expect(quantile([5, 1, 3, 2, 4], 0.5)).toBe(3);
    expect(quantile([5, 1, 3, 2, 4], 0.99)).toBe(5);
    expect(quantile([], 0.5)).toBeUndefined();
  });
});
