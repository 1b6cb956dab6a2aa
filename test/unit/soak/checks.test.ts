import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import {
  CONFIRM_PRUNE_ANNOTATION,
  CR_KIND_LABEL,
  CR_NAME_LABEL,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  PRUNE_CONFIRMATION_CONFIGMAP,
  UPGRADE_TARGET_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { HELD_PRUNE_KEY } from "../../../src/mirror/decide.ts";
import {
  clustersIn,
  DeclarationHistory,
  gitHistoryViolations,
  judgeLogLine,
  ownershipViolations,
  parseRefUpdate,
  quantile,
  slopePerHour,
  type WaveCr,
  waveViolation,
} from "../../soak/checks.ts";
import { type SoakContext, SoakFleet } from "../../soak/fleet.ts";
import { type FleetFiles, MARKER_KEY } from "../../soak/model.ts";
import { Observer } from "../../soak/observer.ts";
import { FakeKube } from "../../support/fake-kube.ts";

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
  const cr = (key: string, more: Partial<WaveCr> = {}): WaveCr => ({
    key,
    wave: "remaining",
    hash: "new",
    baseline: "old",
    healthy: false,
    member: true,
    unhealthySince: 1_000,
    changedAt: 1_000,
    ...more,
  });

  it("catches a CR let through while maxUnavailable changed CRs of its wave are unhealthy", () => {
    const letThrough = cr("c", { unhealthySince: 5_000, changedAt: 5_000 });
    expect(waveViolation(letThrough, [cr("a"), letThrough], 1, 5_000, 3_000)).toMatch(
      /2 changed CRs of wave remaining/,
    );
    expect(waveViolation(letThrough, [cr("a"), letThrough], 2, 5_000, 3_000)).toBeUndefined();
  });

  it("a CR counted already (changed, unhealthy) that gets new content, a fix, takes its own place", () => {
    const fix = cr("c", { unhealthySince: 5_000, changedAt: 5_000, wasUnavailable: true });
    expect(waveViolation(fix, [cr("a"), fix], 1, 5_000, 3_000)).toBeUndefined();
  });

  it("does not count healthy CRs, unchanged ones, other waves, or one that turned unhealthy on its own a moment ago", () => {
    const letThrough = cr("c", { unhealthySince: 5_000, changedAt: 5_000 });
    const others = [
      cr("healthy", { healthy: true }),
      cr("unchanged", { hash: "old" }),
      cr("canary", { wave: "canary" }),
      cr("fault", { changedAt: 100, unhealthySince: 4_500 }),
    ];
    expect(waveViolation(letThrough, [...others, letThrough], 1, 5_000, 3_000)).toBeUndefined();
    // The same fault, unhealthy for longer than the grace: the gate had time to see it.
    expect(waveViolation(letThrough, [...others, letThrough], 1, 9_000, 3_000)).toMatch(/fault/);
  });

  it("does not count a CR the fleet no longer wants (its cluster left the placement): it blocks no wave", () => {
    const letThrough = cr("c", { unhealthySince: 5_000, changedAt: 5_000 });
    const departing = cr("eventing-spoke-1", { member: false });
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

// ── The observer's checks: converged, spec-from-pushed-revision, no-spoke-leftovers ──────────────────────

const SPOKE = "spoke-1";

/** A leader fleet of one spoke over an in-memory hub, with no placement: one KnativeServing expected. */
function observedFleet() {
  const hub = new FakeKube().serveKindsOf([
    { apiVersion: OPERATOR_API_VERSION, kind: "KnativeServing", metadata: {} },
    { apiVersion: OPERATOR_API_VERSION, kind: "KnativeEventing", metadata: {} },
  ]);
  const spoke = new FakeKube().serveKindsOf([{ apiVersion: "v1", kind: "ConfigMap", metadata: {} }]);
  const context = { hub: hub.client, workDir: mkdtempSync(join(tmpdir(), "soak-checks-")) };
  const fleet = new SoakFleet(context as unknown as SoakContext, {
    id: "a",
    mode: "leader",
    replicas: 1,
    spokes: [SPOKE],
  });
  fleet.files = { ...fleet.files, placement: undefined };
  (fleet as unknown as { recordContents(files: FleetFiles): void }).recordContents(fleet.files);
  const observer = new Observer({
    hub: hub.client,
    fleets: [fleet],
    spokes: new Map([[SPOKE, spoke.client]]),
    hubPort: 0,
    openSpokeRequests: () => [],
    step: () => "a unit test",
  });
  const pushed = fleet.files.serving.get(SPOKE)!;
  const name = `serving-${SPOKE}`;
  /** The hub CR as the fleet's sync writes it, Ready on its generation when `healthy`. */
  const cr = (content: { version: string; marker: number }, healthy = true): KubeObject => ({
    apiVersion: OPERATOR_API_VERSION,
    kind: "KnativeServing",
    metadata: { name, namespace: fleet.layout.namespace, generation: 2 },
    spec: {
      version: content.version,
      config: { observability: { [MARKER_KEY]: String(content.marker) } },
      clusterProfileRef: { namespace: fleet.layout.profileNamespace, name: SPOKE },
    },
    status: {
      observedGeneration: 2,
      version: `${content.version}.0`,
      conditions: ["Ready", "DeploymentsAvailable"].map((type) => ({
        type,
        status: healthy ? "True" : "False",
      })),
    },
  });
  /** What the install on the spoke says: its marker, and the anchor naming its CR. */
  const installed = (marker: number, crName = name) => {
    spoke.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "config-observability", namespace: "knative-serving" },
      data: { [MARKER_KEY]: String(marker) },
    });
    spoke.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: `${crName}-root-owner`,
        namespace: "knative-serving",
        labels: {
          [MANAGED_BY_LABEL]: MANAGED_BY,
          [CR_KIND_LABEL]: "knativeserving",
          [CR_NAME_LABEL]: crName,
        },
      },
    });
  };
  const hooks = observer as unknown as {
    onHubCr(fleet: SoakFleet, event: string, object: KubeObject): Promise<void>;
    sampleSpokes(): Promise<void>;
  };
  return { hub, spoke, fleet, observer, hooks, pushed, cr, installed };
}

describe("the observer", () => {
  it("converged: no differences when the hub CR holds the last push, Ready, installed with its marker", async () => {
    const { hub, fleet, observer, pushed, cr, installed } = observedFleet();
    hub.put(cr(pushed));
    installed(pushed.marker);
    expect(await observer.differences(fleet)).toEqual([]);
  });

  it("converged: catches a CR missing, on other content, not Ready, a spoke on another marker, a CR no file declares", async () => {
    const { hub, fleet, observer, pushed, cr, installed } = observedFleet();
    const key = `KnativeServing ${fleet.layout.namespace}/serving-${SPOKE}`;
    expect(await observer.differences(fleet)).toEqual([`${key} is not on the hub`]);
    installed(pushed.marker);
    hub.put(cr({ ...pushed, marker: pushed.marker + 100 }));
    expect(await observer.differences(fleet)).toEqual([
      `${key} holds ${pushed.version}/${pushed.marker + 100}, not ${pushed.version}/${pushed.marker}`,
    ]);
    hub.put(cr(pushed, false));
    expect((await observer.differences(fleet))[0]).toMatch(`${key} is not Ready on generation 2`);
    hub.put(cr(pushed));
    installed(pushed.marker + 100);
    expect(await observer.differences(fleet)).toEqual([
      `${SPOKE} knative-serving has marker ${pushed.marker + 100}, not ${pushed.marker}`,
    ]);
    installed(pushed.marker);
    hub.put({ ...cr(pushed), metadata: { ...cr(pushed).metadata, name: "serving-stray" } });
    expect(await observer.differences(fleet)).toEqual([
      `KnativeServing ${fleet.layout.namespace}/serving-stray is on the hub, but no file declares it`,
    ]);
  });

  it("converged: a broken file is never converged", async () => {
    const { hub, fleet, observer, pushed, cr, installed } = observedFleet();
    hub.put(cr(pushed));
    installed(pushed.marker);
    fleet.files = { ...fleet.files, broken: new Map([["clusters/spoke-1.yaml", "yaml-syntax"]]) };
    expect(await observer.differences(fleet)).toEqual(["broken files: clusters/spoke-1.yaml"]);
  });

  it("spec-from-pushed-revision: catches a hub CR and a spoke install on content no push declared", async () => {
    const { fleet, observer, hooks, pushed, cr, installed } = observedFleet();
    expect(fleet.wasPushed("KnativeServing", `serving-${SPOKE}`, pushed.version, String(pushed.marker))).toBe(
      true,
    );
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    installed(pushed.marker);
    await hooks.sampleSpokes();
    expect(observer.violations).toEqual([]);

    await hooks.onHubCr(fleet, "MODIFIED", cr({ ...pushed, marker: 4242 }));
    await hooks.onHubCr(fleet, "MODIFIED", cr({ version: "1.21", marker: pushed.marker }));
    installed(4343);
    await hooks.sampleSpokes();
    expect(observer.violations.map((v) => [v.invariant, v.evidence])).toEqual([
      [
        "spec-from-pushed-revision",
        expect.stringMatching(/serving-spoke-1 holds version 1\.22, marker 4242, which no push declared/),
      ],
      [
        "spec-from-pushed-revision",
        expect.stringMatching(/serving-spoke-1 holds version 1\.21, marker \d+, which no push declared/),
      ],
      ["spec-from-pushed-revision", expect.stringMatching(/spoke-1 runs knative-serving with marker 4343/)],
    ]);
  });

  it("spec-from-pushed-revision: takes a step of an upgrade chain toward a pushed version, and nothing else that names a target", async () => {
    const { fleet, observer, hooks, pushed, cr } = observedFleet();
    expect(pushed.version).toBe("1.22");
    // A later push wants 1.23 with a new marker; the CR is on the chain's step before it (a found case of
    // the hour soak: two version pushes 29 s apart, the second while the first was still rolling out).
    const later = pushed.marker + 1;
    fleet.pushedContents.add(`serving-${SPOKE}|1.23|${later}`);
    const onStep = (version: string, marker: number, target: string | undefined): KubeObject => {
      const object = cr({ version, marker });
      return {
        ...object,
        metadata: { ...object.metadata, annotations: { [UPGRADE_TARGET_ANNOTATION]: target! } },
      };
    };
    await hooks.onHubCr(fleet, "MODIFIED", onStep("1.22", later, "1.23.1"));
    expect(observer.violations).toEqual([]);
    await hooks.onHubCr(fleet, "MODIFIED", onStep("1.21", later, "1.23")); // below where the CR ever was
    await hooks.onHubCr(fleet, "MODIFIED", onStep("1.22", 4242, "1.23")); // the target's push had another marker
    await hooks.onHubCr(fleet, "MODIFIED", onStep("1.23", pushed.marker, "1.23")); // not below its target
    await hooks.onHubCr(fleet, "MODIFIED", cr({ version: "1.22", marker: later })); // no target named
    expect(observer.violations.map((v) => v.evidence)).toEqual([
      expect.stringContaining("holds version 1.21, marker"),
      expect.stringContaining("holds version 1.22, marker 4242"),
      expect.stringContaining(`holds version 1.23, marker ${pushed.marker}`),
      expect.stringContaining(`holds version 1.22, marker ${later}`),
    ]);
  });

  it("a prune held for a person's confirmation: confirmed when it names only undeclared CRs, never when it names a declared one", async () => {
    const { hub, fleet, observer } = observedFleet();
    // The service applies the record's data only: a person's annotation stays.
    const held = (candidates: string[], token: string) =>
      hub.put({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: {
          name: PRUNE_CONFIRMATION_CONFIGMAP,
          namespace: fleet.layout.namespace,
          annotations: hub.find("ConfigMap", PRUNE_CONFIRMATION_CONFIGMAP)?.metadata.annotations ?? {},
        },
        data: {
          [HELD_PRUNE_KEY]: JSON.stringify({ token, message: "held", count: candidates.length, candidates }),
        },
      });
    const confirmed = () =>
      hub.find("ConfigMap", PRUNE_CONFIRMATION_CONFIGMAP)?.metadata.annotations?.[CONFIRM_PRUNE_ANNOTATION];
    await observer.answerHeldPrune(fleet); // nothing held: nothing to do
    expect(confirmed()).toBeUndefined();

    held([`KnativeEventing ${fleet.layout.namespace}/eventing-${SPOKE}`], "t1");
    await observer.answerHeldPrune(fleet);
    expect(confirmed()).toBe("t1");
    expect(observer.counts.prunesConfirmed).toBe(1);

    await observer.answerHeldPrune(fleet); // confirmed already: nothing more to do
    expect(observer.counts.prunesConfirmed).toBe(1);

    // One of the CRs it names is still declared by its file: not confirmed.
    held(
      [
        `KnativeEventing ${fleet.layout.namespace}/eventing-${SPOKE}`,
        `KnativeServing ${fleet.layout.namespace}/serving-${SPOKE}`,
      ],
      "t2",
    );
    await observer.answerHeldPrune(fleet);
    expect(confirmed()).toBe("t1");
    expect(observer.counts.prunesConfirmed).toBe(1);
    expect(observer.violations).toEqual([]);
  });

  it("no-spoke-leftovers: catches a spoke that keeps the install of a CR gone from the hub, unless it was finalized while its ClusterProfile was gone", async () => {
    const { hub, fleet, observer, hooks, pushed, cr, installed } = observedFleet();
    hub.put(cr(pushed));
    installed(pushed.marker);
    installed(pushed.marker, "serving-removed");
    const removed = { ...cr(pushed), metadata: { ...cr(pushed).metadata, name: "serving-removed" } };
    const leftover = `${SPOKE} keeps the install of KnativeServing ${fleet.layout.namespace}/serving-removed (anchor knative-serving/serving-removed-root-owner)`;
    expect(await observer.differences(fleet)).toEqual([leftover]);
    // Finalized with its ClusterProfile in place: the spoke had to be cleaned.
    await hooks.onHubCr(fleet, "DELETED", removed);
    expect(await observer.differences(fleet)).toEqual([leftover]);
    // Finalized while its ClusterProfile was gone: the install stays by design.
    fleet.profileAbsences.set(SPOKE, [{ from: 0 }]);
    await hooks.onHubCr(fleet, "DELETED", removed);
    expect(observer.finalized.map((f) => f.withoutCleanup)).toEqual([false, true]);
    expect(await observer.differences(fleet)).toEqual([]);
  });
});
