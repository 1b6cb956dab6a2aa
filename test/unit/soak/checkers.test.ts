import { describe, expect, it } from "vitest";
import {
  clustersIn,
  DeclarationHistory,
  gitHistoryViolations,
  judgeLogLine,
  ownershipViolations,
  parseRefUpdate,
  quantile,
  type ReplicaSample,
  slopePerHour,
  waveViolation,
} from "../../soak/checks.ts";
import { waveCr } from "./wave-cr.ts";

// The soak's checkers on the edges of the violations they must catch (checks.test.ts covers the plain
// cases): the exact evidence a report would print, and the near-misses a checker must let pass.

const id = (c: string) => c.repeat(40);
const short = (c: string) => c.repeat(12);

describe("git history: status commits and force pushes", () => {
  const person = { id: id("a"), parents: [], tree: id("1"), author: "Ada" };
  const other = { id: id("c"), parents: [id("a")], tree: id("3"), author: "Ada" };
  const updates = [
    { old: "0".repeat(40), new: id("a"), fastForward: true },
    { old: id("a"), new: id("c"), fastForward: true },
  ];
  const base = { commits: [person, other], updates, personPushes: [], botAuthor: "bot" };
  const status = (parents: string[], tree = id("2")) => ({ id: id("b"), parents, tree, author: "bot" });

  it("catches a status commit with no parent or with two (a merge), naming it by its short id", () => {
    expect(gitHistoryViolations({ ...base, commits: [person, status([])] })).toEqual([
      `status commit ${short("b")} has 0 parents`,
    ]);
    // Both parents were heads and the tree differs: only the parent count is wrong.
    expect(gitHistoryViolations({ ...base, commits: [person, other, status([id("a"), id("c")])] })).toEqual([
      `status commit ${short("b")} has 2 parents`,
    ]);
  });

  it("names a status commit off a head and an empty one with short ids of it and its parent", () => {
    expect(gitHistoryViolations({ ...base, commits: [person, status([id("e")])] })).toEqual([
      `status commit ${short("b")}'s parent ${short("e")} was never the branch head`,
    ]);
    expect(gitHistoryViolations({ ...base, commits: [person, status([id("a")], person.tree)] })).toEqual([
      `status commit ${short("b")} changes nothing (same tree as ${short("a")})`,
    ]);
  });

  it("a non-fast-forward from the all-zero id is the branch's creation, not a force push", () => {
    const creation = { old: "0".repeat(40), new: id("a"), fastForward: false };
    expect(gitHistoryViolations({ ...base, commits: [person], updates: [creation] })).toEqual([]);
  });

  it("catches a forced update from an id that merely starts or ends with zeros", () => {
    const endsInZeros = `1${"0".repeat(39)}`;
    const startsWithZeros = `${"0".repeat(39)}1`;
    for (const old of [endsInZeros, startsWithZeros])
      expect(
        gitHistoryViolations({
          ...base,
          commits: [person],
          updates: [{ old, new: id("a"), fastForward: false }],
        }),
      ).toEqual([`the branch was force-pushed from ${old.slice(0, 12)} to ${short("a")}`]);
  });

  it("reads a fast-forward line, and rejects lines with anything before or after the three fields", () => {
    expect(parseRefUpdate(`${id("a")} ${id("b")} ff`)).toEqual({
      old: id("a"),
      new: id("b"),
      fastForward: true,
    });
    expect(parseRefUpdate(`x${id("a")} ${id("b")} ff`)).toBeUndefined();
    expect(parseRefUpdate(`${id("a")} ${id("b")} forcedly`)).toBeUndefined();
  });
});

describe("declaration history", () => {
  it("a key is undeclared before it was first declared", () => {
    const history = new DeclarationHistory();
    history.update(new Set(["a"]), 100);
    expect(history.undeclaredDuring("a", 0, 50)).toBe(true);
    expect(history.undeclaredDuring("a", 150, 200)).toBe(false);
  });

  it("closes the latest undeclared span when a key comes back a second time", () => {
    const history = new DeclarationHistory();
    history.update(new Set(["a"]), 100);
    history.update(new Set(), 200);
    history.update(new Set(["a"]), 300);
    history.update(new Set(), 400);
    history.update(new Set(["a"]), 500); // declared again: from 500 on it is not undeclared
    expect(history.undeclaredDuring("a", 600, 700)).toBe(false);
    expect(history.undeclaredDuring("a", 350, 380)).toBe(false);
    expect(history.undeclaredDuring("a", 420, 450)).toBe(true);
  });

  it("an undeclared span that starts after the window does not count; touching either end does", () => {
    const history = new DeclarationHistory();
    history.update(new Set(["a"]), 100);
    history.update(new Set(), 200);
    expect(history.undeclaredDuring("a", 120, 150)).toBe(false);
    // The instants of change are inclusive: at 200 it was already undeclared, at 100 not yet declared.
    expect(history.undeclaredDuring("a", 150, 200)).toBe(true);
    expect(history.undeclaredDuring("a", 100, 150)).toBe(true);
  });
});

describe("waves: which unhealthy CRs count", () => {
  const now = 5_000;
  const grace = 3_000;

  it("counts the CR let through even when it is no settled member", () => {
    const letThrough = waveCr("c", { member: false, unhealthySince: now, changedAt: now });
    expect(waveViolation(letThrough, [waveCr("a"), letThrough], 1, now, grace)).toBe(
      "c got new content while 2 changed CRs of wave remaining were unhealthy (maxUnavailable 1): a, c",
    );
  });

  it("counts the CR let through even when it turned unhealthy a moment ago, long after its change", () => {
    const letThrough = waveCr("c", { unhealthySince: 4_500, changedAt: 100 });
    expect(waveViolation(letThrough, [waveCr("a"), letThrough], 1, now, grace)).toMatch(/: a, c$/);
  });

  it("counts a CR unhealthy within a second of its change (the change broke it), up to the second itself", () => {
    const letThrough = waveCr("c", { unhealthySince: now, changedAt: now });
    // Unhealthy 500 ms ago, inside the grace, but exactly 1 s after its change: the change did it.
    const broken = waveCr("b", { changedAt: 3_500, unhealthySince: 4_500 });
    expect(waveViolation(letThrough, [broken, letThrough], 1, now, grace)).toMatch(/: b, c$/);
  });

  it("counts a CR whose own fault is exactly as old as the grace", () => {
    const letThrough = waveCr("c", { unhealthySince: now, changedAt: now });
    const fault = waveCr("f", { changedAt: 100, unhealthySince: now - grace });
    expect(waveViolation(letThrough, [fault, letThrough], 1, now, grace)).toMatch(/: f, c$/);
  });
});

describe("leaders and owners: the pairs that do not violate", () => {
  const sample = (
    replica: string,
    at: number,
    leader: boolean,
    clusters: ReplicaSample["clusters"] = {},
  ) => ({
    replica,
    at,
    leader,
    clusters,
  });

  it("two samples of one replica never conflict with each other", () => {
    expect(
      ownershipViolations(
        [sample("r1", 0, true, { "p/s": ["a"] }), sample("r1", 10, true, { "p/s": ["a"] })],
        100,
      ),
    ).toEqual([]);
  });

  it("one leader and one follower with no cluster in common are fine", () => {
    expect(
      ownershipViolations(
        [sample("r1", 0, true, { "p/s1": ["a"] }), sample("r2", 10, false, { "p/s2": ["a"] })],
        100,
      ),
    ).toEqual([]);
  });

  it("samples exactly the skew apart are compared", () => {
    expect(ownershipViolations([sample("r1", 0, true), sample("r2", 100, true)], 100)).toEqual([
      { invariant: "one-leader", evidence: "r1 and r2 both lead (100 ms apart)" },
    ]);
  });

  it("names only the clusters both report, each once", () => {
    const found = ownershipViolations(
      [
        sample("r1", 0, false, { "p/only-r1": ["x"], "p/s1": ["a"], "p/s2": ["b"] }),
        sample("r2", 5, false, { "p/s1": ["a"], "p/s2": ["a"] }),
      ],
      100,
    );
    expect(found).toEqual([
      {
        invariant: "one-owner-per-cluster",
        evidence: "r1 and r2 both report p/s1, p/s2 (5 ms apart; r1: a b; r2: a)",
      },
    ]);
  });
});

describe("clustersIn", () => {
  it("reads only series lines, not a comment that shows a label", () => {
    const metrics = [
      '# HELP knative_fleet_spoke_ready per spoke, as in ready{cluster="ns/name"}',
      'knative_fleet_spoke_ready{cluster="soak/spoke-1"} 1',
    ].join("\n");
    expect(clustersIn(metrics)).toEqual({ "soak/spoke-1": ["knative_fleet_spoke_ready"] });
  });

  it("strips a histogram suffix only at the end of the name", () => {
    expect(clustersIn('knative_fleet_sync_count_total{cluster="p/s"} 3')).toEqual({
      "p/s": ["knative_fleet_sync_count_total"],
    });
  });

  it("lists the clusters sorted, whatever order the series come in", () => {
    const metrics = ['m{cluster="p/b"} 1', 'm{cluster="p/a"} 1'].join("\n");
    expect(Object.keys(clustersIn(metrics))).toEqual(["p/a", "p/b"]);
  });
});

describe("judgeLogLine: errors that still say where", () => {
  const line = (entry: object) => JSON.stringify({ level: 50, time: 1, msg: "reconcile failed", ...entry });
  const subjects = [
    "cr",
    "resource",
    "kind",
    "path",
    "file",
    "url",
    "server",
    "lease",
    "namespace",
    "name",
    "repository",
    "provider",
    "object",
  ];

  it.each(subjects)("a terse transport error with a %s field names its subject", (field) => {
    expect(judgeLogLine(line({ err: "fetch failed", [field]: "x" }))).toEqual({
      level: 50,
      summary: "reconcile failed: fetch failed",
    });
  });

  it("an error that only ends or begins with a transport phrase is not terse", () => {
    for (const err of [
      "GET https://spoke/version: fetch failed",
      "fetch failed: connect ECONNREFUSED 10.0.0.1:443",
    ])
      expect(judgeLogLine(line({ err }))?.unactionable).toBeUndefined();
  });

  it("a terse error with surrounding whitespace is still terse", () => {
    expect(judgeLogLine(line({ err: "fetch failed\n" }))?.unactionable).toBe(
      "a transport error that names nothing: reconcile failed: fetch failed\n",
    );
  });
});

describe("judgeLogLine: lines that are not JSON", () => {
  it("ignores blank lines", () => {
    expect(judgeLogLine("")).toBeUndefined();
    expect(judgeLogLine("   \n")).toBeUndefined();
  });

  it("a stack frame, however indented, is an uncaught error, quoted trimmed", () => {
    expect(judgeLogLine("    at foo (x.js:1:1)  ")).toEqual({
      level: 60,
      summary: "at foo (x.js:<n>:<n>)",
      uncaught: "not a log line, an error Node printed: at foo (x.js:1:1)",
    });
  });

  it("a line that merely contains ' at ' or 'Error' is not an uncaught error", () => {
    for (const text of ["looking at the spokes", "(node:1) DeprecationWarning: Error codes change"]) {
      const judged = judgeLogLine(text);
      expect(judged?.uncaught).toBeUndefined();
      expect(judged?.unactionable).toBe(`not a log line: ${text}`);
    }
  });

  it("trims and shortens what it quotes: summary to 160, evidence to 200 characters", () => {
    const long = `  ${"w".repeat(300)}  `;
    const judged = judgeLogLine(long);
    expect(judged?.summary).toBe("w".repeat(160));
    expect(judged?.unactionable).toBe(`not a log line: ${"w".repeat(200)}`);
  });
});

describe("judgeLogLine: levels and messages", () => {
  const line = (entry: object) => JSON.stringify({ level: 50, time: 1, msg: "reconcile failed", ...entry });

  it("keeps a warn line, without judging whether it is actionable", () => {
    expect(judgeLogLine(JSON.stringify({ level: 40, msg: "slow" }))).toEqual({ level: 40, summary: "slow" });
    expect(judgeLogLine(JSON.stringify({ level: 40 }))).toEqual({ level: 40, summary: "" });
  });

  it("an error line with no err is fine and summarized by its message alone", () => {
    expect(judgeLogLine(line({}))).toEqual({ level: 50, summary: "reconcile failed" });
  });

  it("catches an error line whose message is missing or only whitespace", () => {
    expect(judgeLogLine(JSON.stringify({ level: 50 }))?.unactionable).toBe("an error line without a message");
    expect(judgeLogLine(line({ msg: "   " }))?.unactionable).toBe("an error line without a message");
  });

  it("shortens the summary to 200 characters", () => {
    expect(judgeLogLine(line({ msg: "m".repeat(300) }))?.summary).toBe("m".repeat(200));
  });

  it("catches an err that is empty, 'undefined' or 'null' (padded or not), quoting it", () => {
    for (const err of ["", "undefined", " null "])
      expect(judgeLogLine(line({ err }))?.unactionable).toBe(
        `an error without a message: reconcile failed: "${err}"`,
      );
    expect(judgeLogLine(line({ err: null }))?.unactionable).toBe(
      'an error without a message: reconcile failed: "null"',
    );
  });

  it("quotes only the first line of a programming error", () => {
    expect(
      judgeLogLine(line({ err: "TypeError: x is not a function\n    at f (a.js:1:1)" }))?.unactionable,
    ).toBe(
      "a programming error, not something a user can act on: reconcile failed: TypeError: x is not a function",
    );
  });

  it("reads a serialized error object: its type and message, or the object itself", () => {
    const summary = (err: unknown) => judgeLogLine(line({ err }))?.summary;
    expect(summary({ type: "Error", message: "connect ECONNREFUSED", stack: "..." })).toBe(
      "reconcile failed: Error: connect ECONNREFUSED",
    );
    expect(summary({ message: "connect ECONNREFUSED" })).toBe("reconcile failed: connect ECONNREFUSED");
    expect(summary({ code: "ENOTFOUND" })).toBe('reconcile failed: {"code":"ENOTFOUND"}');
  });
});

describe("judgeLogLine: summaries group lines that differ only in ids and numbers", () => {
  const summary = (msg: string) => judgeLogLine(JSON.stringify({ level: 50, msg }))?.summary;

  it("blanks a commit id", () => {
    expect(summary("applied deadbeefcafe1234 to spoke")).toBe("applied <id> to spoke");
  });

  it("blanks a uuid whole, so two lines about different objects read the same", () => {
    expect(summary("pod 123e4567-e89b-12d3-a456-426614174000 failed")).toBe("pod <uuid> failed");
    expect(summary("pod 9f1c2d3e-0a1b-4c2d-8e3f-abcdefabcdef failed")).toBe("pod <uuid> failed");
  });
});

describe("numbers: edges", () => {
  it("a slope from two points, and 0 from points all at one moment", () => {
    expect(
      slopePerHour([
        { at: 0, value: 10 },
        { at: 3_600_000, value: 16 },
      ]),
    ).toBeCloseTo(6);
    expect(
      slopePerHour([
        { at: 5, value: 1 },
        { at: 5, value: 9 },
      ]),
    ).toBe(0);
  });

  it("a quantile beyond 1 is the largest value", () => {
    expect(quantile([3, 1, 2], 1.5)).toBe(3);
  });
});
