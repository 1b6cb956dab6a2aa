import { writeFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DESIRED_HASH_ANNOTATION,
  PLACEMENT_KIND_LABEL,
  PLACEMENT_LABEL,
  SOURCE_CLUSTER_ANNOTATION,
} from "../../../src/api/labels.ts";
import { approvalKey } from "../../../src/fleet/approval-document.ts";
import type { FleetResource } from "../../../src/fleet/document-schema.ts";
import { formatIdentity, type ResourceIdentity } from "../../../src/fleet/identity.ts";
import type { DesiredResource, FleetModel } from "../../../src/fleet/model.ts";
import { RolloutDocumentSchema, type RolloutSpec } from "../../../src/fleet/rollout-schema.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import {
  type ApplyStep,
  decideApplies,
  decidePrune,
  MirrorOptionsSchema,
  mirroredObject,
} from "../../../src/mirror/decide.ts";
import { decideDepartures } from "../../../src/placement/departures.ts";
import type { InventoryCluster } from "../../../src/placement/inventory.ts";
import { gateApplies, gatePrunes, healthOf } from "../../../src/rollout/gate.ts";
import { revertStep, withReverts } from "../../../src/rollout/revert.ts";
import { type RolloutState, RolloutStateSchema } from "../../../src/rollout/state.ts";
import { maxUnavailableCount, plannedWaves, waveIndexOf } from "../../../src/rollout/waves.ts";
import { clusterWindowClosed, windowOpen } from "../../../src/rollout/windows.ts";
import { atVersion, chainUpgrades, upgradeMemory } from "../../../src/upgrade/chain.ts";

// A model of the rollout, checked over random interleavings: pushes of good and bad content, relabels,
// clusters joining and leaving a placement, files that fail validation, health flips, leader restarts (the
// state read back from its JSON, the departure clock lost), pauses, windows, a crash between storing the
// state and writing the CRs, and the clock. The system is the real gate with the real mirror planning,
// prune safeguards, departures and revert derivation over an in-memory hub; an observer that knows nothing
// of the gate's state but its phase (and, for guarantee 10, the commit the rollout is named after) checks the
// guarantees of docs/rollout.md after every sync:
//   1. a CR gets content other than its baseline only when every CR of every earlier wave is on the content
//      Git wants, healthy, and (if it changed since its baseline) healthy for its wave's soak;
//   2. a sync that lets CRs of a wave change leaves at most maxUnavailable of its changed CRs unhealthy;
//   3. halted with HaltAndRevert, every CR not on its baseline is put back on it, whatever happened since;
//   4. a halted rollout writes nothing but baselines until it is lifted, and a halt happens: a CR let through
//      that stays unhealthy on the content Git wants past its time limit halts the rollout (unless paused);
//   5. no wave opens outside the windows; a CR that left is pruned after its grace period and blocks
//      nothing: once the faults stop, the fleet completes (every CR on what Git wants, healthy).
// Files also move their Knative version (1.20-1.23) by several minors at once, which the sync turns into
// upgrade chains (src/upgrade/chain.ts) ahead of the gate; "what Git wants" above is the chain's step. The
// observer checks the chains from the versions on the hub, the files and the stored phase alone:
//   6. no cluster skips a minor: every write of a hub CR (reverts too; creations aside) moves its
//      spec.version by at most one minor;
//   7. no step opens before the previous one completed: the first sync that gives a CR of a chain (the CRs
//      of a kind whose files want the same minor) minor m finds every CR that has been on the chain since
//      m-1 was given on m-1 at least, and, when m-1 was itself a step of the chain, a rollout that completed
//      after it and the state stored Complete;
//   8. a revert goes back exactly one step: halted with HaltAndRevert, a CR that was moved on from its
//      baseline's minor ends on that minor, one below the one that failed, never two;
//   9. once the faults stop, every CR ends on the version its file wants (the chain walked to its end).
// Waves may need an approval held in Git (a KnativeRolloutApproval of the rollout's commit and the wave; the
// model keeps the keys at each commit and passes them as the gate's `approvals`), and clusters have
// maintenance windows of their own (`clusterWindows`: by name, by label, and in a time zone a cluster
// property names, an invalid one among them), which the model's clock moves in and out of:
//  10. no CR of a wave that needs an approval gets new content (other than its baseline: a revert or a drift
//      repair is never held) at a sync unless the approvals hold the key of the rollout's commit (the state's
//      `commit`, a commit of the repository) and that wave: an approval of another commit, stale or made up,
//      never opens it; allAtOnce needs none;
//  11. no CR gets new content while its cluster is outside a window of an entry of clusterWindows that
//      selects it (or its time zone property names no time zone), as the model reads the windows from the
//      clock with its own arithmetic; allAtOnce ignores them;
// and guarantees 5 and 9 hold with both: once the faults stop, every approval the final commit needs is given
// and the clock moved into the windows, the fleet ends on what Git wants.
// The observer's baseline is the content each CR had the last time the whole fleet was settled; at the end
// the gate's baselines must equal it, and at every completion each baseline's commit must give its CR that
// content again (what a revert re-derives).
//
// The generator is aimed: each guarantee's triggering situation occurs in at least 5% of the runs (the test
// prints the rates and fails below it), with ops that steer towards the rare ones (a relabel of the halted
// or a pending cluster, a rollout that completes while a file is broken).

const CLUSTERS = ["c0", "c1", "c2", "c3", "c4"] as const;
type ClusterName = (typeof CLUSTERS)[number];
const NS = "fleet-system";
const REPOSITORY = "https://git.example/fleet.git";
const SOAK_S = 60;
const TIME_LIMIT_S = 180;
const GRACE_MS = 240_000;
const T0 = Date.parse("2026-03-02T15:00:00Z"); // a Monday: the window (08:00-17:00) closes two hours in

/** A Knative minor of 1.x, within the releases there are (1.20-1.23). */
type Minor = 20 | 21 | 22 | 23;
const MINORS = [20, 21, 22, 23] as const;
const RELEASES = { KnativeServing: MINORS.map((m) => `1.${m}`).reverse() };

/** The waves of the policy that may need an approval (the remaining wave never does). */
const APPROVAL_WAVES = ["canary", "ring-a", "ring-b"] as const;
type ApprovalWave = (typeof APPROVAL_WAVES)[number];
/** The wave an approval names: one of the policy's, or the one the rollout waits on (else the first it needs). */
type WaveChoice = ApprovalWave | "held";

/** A whole commit id no commit of the model has: an approval of it approves nothing. */
const MADE_UP_COMMIT = "0f".repeat(20);

/** The ClusterProfile property the zoned windows are read in. */
const ZONE_PROPERTY = "example.com/time-zone";
/** A cluster's time zone property: none (UTC), a zone, or no zone at all (its windows read as closed). */
const ZONES = ["none", "Asia/Kolkata", "Asia/Kathmandu", "America/Caracas", "Mars/Olympus_Mons"] as const;
type Zone = (typeof ZONES)[number];
/** The model's own clock arithmetic: each zone's offset from UTC in minutes (none of them keeps daylight saving). */
const OFFSET_MINUTES: Readonly<Record<string, number>> = {
  UTC: 0,
  "Asia/Kolkata": 330,
  "Asia/Kathmandu": 345,
  "America/Caracas": -240,
  "Asia/Tokyo": 540,
};

/**
 * The policy's clusterWindows, as the model knows them: whom each entry selects (by name, by the ring label,
 * by name with a time zone property), and its daily windows `HH:MM-HH:MM` (past midnight when the end is
 * earlier), in UTC, in their own zone, or in the cluster's. The runs start near 16:05 UTC: windows open and
 * close every few minutes then, and the zones shift them by hours (in Caracas's they stay closed through most
 * runs, and a property that names no zone closes them). Whatever its ring and valid zone, a cluster has a
 * time of day inside every entry that selects it (a named one in ring b: 16:08-16:12 and 16:24-16:30; a
 * zoned one in ring b in Caracas: 01:00-02:00 UTC). Few windows: the gate reads each with an
 * Intl.DateTimeFormat of its own, about a third of the run's time.
 */
const CLUSTER_WINDOWS: readonly {
  name: string;
  selects: (c: ClusterName, ring: "a" | "b" | "-") => boolean;
  policy: Record<string, unknown>;
  zoned: boolean;
  windows: readonly { span: string; timeZone?: string }[];
}[] = [
  {
    name: "named",
    selects: (c) => c === "c1" || c === "c3",
    policy: { clusterProfiles: ["c1", "c3"].map((name) => ({ namespace: NS, name })) },
    zoned: false,
    windows: [{ span: "16:00-16:12" }, { span: "16:24-16:40" }, { span: "22:00-02:00" }],
  },
  {
    name: "ring-b",
    selects: (_, ring) => ring === "b",
    policy: { clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }] },
    zoned: false,
    windows: [{ span: "16:08-16:30" }, { span: "10:00-11:00", timeZone: "Asia/Tokyo" }],
  },
  {
    name: "zoned",
    selects: (c) => c === "c2" || c === "c4",
    policy: {
      clusterProfiles: ["c2", "c4"].map((name) => ({ namespace: NS, name })),
      timeZoneProperty: ZONE_PROPERTY,
    },
    zoned: true,
    windows: [{ span: "16:15-16:45" }, { span: "21:00-23:00" }],
  },
];

const minutesOf = (time: string): number => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

/**
 * Whether the cluster is inside a window of every entry that selects it at `now`, by minutes of the day and
 * fixed offsets (no Intl): the zoned entry reads its windows in the cluster's zone, UTC without one, and a
 * zone it has no offset for (no time zone) as closed.
 */
function insideClusterWindows(c: ClusterName, ring: "a" | "b" | "-", zone: Zone, now: number): boolean {
  const utc = Math.floor(now / 60_000) % 1440;
  for (const entry of CLUSTER_WINDOWS) {
    if (!entry.selects(c, ring)) continue;
    const clusterZone = entry.zoned && zone !== "none" ? zone : "UTC";
    if (OFFSET_MINUTES[clusterZone] === undefined) return false;
    const open = entry.windows.some((window) => {
      const local = (utc + OFFSET_MINUTES[window.timeZone ?? clusterZone]! + 1440) % 1440;
      const start = minutesOf(window.span);
      const end = minutesOf(window.span.slice(6));
      return start < end ? local >= start && local < end : local >= start || local < end;
    });
    if (!open) return false;
  }
  return true;
}

type Op =
  /** New content for `clusters` (all when none); `version`: their files move to 1.<version> too (see `toVersion`). */
  | { op: "push"; clusters: ClusterName[]; bad: boolean; version?: Minor; failAt?: Minor }
  /**
   * Every file moves to 1.<to> with new content, which fails on 1.<failAt> if given (onFailure as given);
   * the syncs go on until the chain reaches its end or halts (`steered`: as the settling does, the clock is
   * moved into the clusters' windows and the rollout's commit gets its approvals, so the chain goes on).
   */
  | { op: "upgradeRollout"; to: Minor; failAt?: Minor; revert: boolean; steered?: boolean }
  | { op: "gitRevert" }
  | { op: "relabel"; cluster: ClusterName; ring: "a" | "b" | "-" }
  /** A relabel of the cluster whose CR halted the rollout, else of one whose CR waits: moves it to `ring`. */
  | { op: "relabelStuck"; ring: "a" | "b" | "-" }
  /**
   * A file breaks, the others get new good content, and the syncs go on until the rollout completes (the
   * clock moved into the windows and the approvals given, as the settling does).
   */
  | { op: "brokenRollout"; cluster: ClusterName }
  /**
   * Bad content for `clusters` (with onFailure as given), syncs until it halts (`steered` as above); `fix`:
   * then a good push.
   */
  | { op: "badRollout"; clusters: ClusterName[]; revert: boolean; fix: boolean; steered?: boolean }
  /** A cluster leaves the placement and the syncs go on past its grace period. */
  | { op: "depart"; cluster: ClusterName }
  | { op: "select"; cluster: ClusterName; selected: boolean }
  | { op: "break"; cluster: ClusterName; broken: boolean }
  | { op: "flap"; cluster: ClusterName; seconds: number }
  | { op: "restart" }
  | { op: "crash" }
  | { op: "pause"; paused: boolean; onHub: boolean }
  | { op: "onFailure"; revert: boolean }
  | { op: "allAtOnce"; on: boolean }
  | { op: "tick"; seconds: number }
  /** A commit that adds an approval of the rollout's commit (the state names it) and the wave. */
  | { op: "approve"; wave: WaveChoice }
  /** A commit that adds an approval of another commit: the rollout's before it was renamed, the head's, one made up. */
  | { op: "approveOther"; wave: WaveChoice; commit: "previous" | "head" | "madeUp" }
  /** A revert of an approval's commit: the last approval of the rollout's commit (`current`), else the last one. */
  | { op: "unapprove"; current: boolean }
  /** A commit that makes these waves need an approval (the others none). */
  | { op: "requireApproval"; waves: ApprovalWave[] }
  | { op: "clusterWindows"; on: boolean }
  /** The cluster's time zone property changes (its ClusterProfile's status, no commit). */
  | { op: "zone"; cluster: ClusterName; zone: Zone }
  /** The clock moves to the next minute the cluster's windows open or close (none: one second). */
  | { op: "toWindow"; cluster: ClusterName }
  /**
   * The clock moves to the next minute a wave has clusters inside and outside their windows (if any within
   * a day), new good content goes to every cluster, and the syncs go on for five minutes.
   */
  | { op: "splitRollout" };

interface PolicyShape {
  maxUnavailable: number | string;
  windows: boolean;
  onFailure: "Halt" | "HaltAndRevert";
  paused: boolean;
  allAtOnce: boolean;
  /** The waves that need an approval in Git. */
  approval: ApprovalWave[];
  clusterWindows: boolean;
}

const policies = new Map<string, RolloutSpec>();

function policySpec(shape: PolicyShape): RolloutSpec {
  const key = JSON.stringify(shape);
  if (!policies.has(key)) policies.set(key, parsePolicy(shape));
  return policies.get(key)!;
}

function parsePolicy(shape: PolicyShape): RolloutSpec {
  return RolloutDocumentSchema.parse({
    apiVersion: "fleet.knative.dev/v1alpha1",
    kind: "KnativeRollout",
    metadata: { name: "knative", namespace: "knative-fleet" },
    spec: {
      waves: [
        { name: "canary", clusterProfiles: [{ namespace: NS, name: "c0" }] },
        { name: "ring-a", clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "a" } } }] },
        { name: "ring-b", clusterSelectorTerms: [{ labelSelector: { matchLabels: { ring: "b" } } }] },
      ].map((wave) => ({
        ...wave,
        ...(shape.approval.includes(wave.name as ApprovalWave) && { approval: "Required" }),
      })),
      maxUnavailable: shape.maxUnavailable,
      soak: `${SOAK_S}s`,
      timeLimit: `${TIME_LIMIT_S}s`,
      onFailure: shape.onFailure,
      paused: shape.paused,
      allAtOnce: shape.allAtOnce,
      ...(shape.windows ? { windows: [{ start: "08:00", end: "17:00" }] } : {}),
      ...(shape.clusterWindows && {
        clusterWindows: CLUSTER_WINDOWS.map((entry) => ({
          name: entry.name,
          ...entry.policy,
          windows: entry.windows.map(({ span, timeZone }) => ({
            start: span.slice(0, 5),
            end: span.slice(6),
            ...(timeZone && { timeZone }),
          })),
        })),
      }),
    },
  }).spec;
}

interface LiveCr {
  object: KubeObject;
  /** When the controller next reports on it. */
  reconcileAt: number;
}

class Violation extends Error {}

/** What the runs exercised: a model test whose checks never meet a halt or a revert proves little. */
const exercised = { syncs: 0, newContent: 0, earlierWaveChecks: 0, halts: 0, reverts: 0, completions: 0 };

/** The situations that trigger a guarantee; the test counts the runs each occurs in. */
const TRIGGERS = [
  "a CR let through is unhealthy past its time limit", // 4: a halt happens
  "a halted rollout with onFailure HaltAndRevert reverts", // 3
  "a newer commit lifts a halt", // 4: only Git lifts one
  "a relabel moves the halted or a waiting cluster to another wave", // 4, 1
  "a rollout completes while a file is broken", // baselines by commit
  "a later wave changes after earlier ones", // 1
  "a wave holds a change at maxUnavailable", // 2
  "a change waits for the rollout windows", // 5
  "a change waits while paused", // 4
  "a departed cluster's CR is pruned", // 5
  "a chain gives a CR a step below its file's version", // 6, 7
  "a chain's next step opens after its previous one", // 7
  "HaltAndRevert puts a CR back one minor", // 8
  "the faults stop with a chain of several minors to walk", // 9
  "a wave waits for its approval", // 10
  "an approval of another commit is there while a wave waits for its own", // 10
  "a wave opens after its approval", // 10
  "a cluster is outside its windows while its wave is open", // 11
  "a wave opens while one of its clusters is outside its windows", // 11
] as const;
type Trigger = (typeof TRIGGERS)[number];
const triggerRuns = new Map<Trigger, number>(TRIGGERS.map((t) => [t, 0]));
/** The triggers met by the run in progress. */
let triggered = new Set<Trigger>();

interface GitContent {
  content: ReadonlyMap<ClusterName, number>;
  /** The minor of 1.x each cluster's file wants. */
  versions: ReadonlyMap<ClusterName, number>;
  broken: ReadonlySet<ClusterName>;
  shape: PolicyShape;
  /** The approvals the commit holds, by `approvalKey(commit, wave)`. */
  approvals: ReadonlySet<string>;
}

/** The fleet, the hub and the gate, one sync at a time. */
class Sim {
  now = T0;
  commitNumber = 0;
  commit = "c-0";
  readonly content = new Map<ClusterName, number>();
  readonly versions = new Map<ClusterName, number>();
  /** Content the controller fails on: `<content>` on every version, `<content>@<minor>` on that minor only. */
  readonly bad = new Set<string>();
  readonly history: { content: Map<ClusterName, number>; versions: Map<ClusterName, number> }[] = [];
  readonly ring = new Map<ClusterName, "a" | "b" | "-">();
  readonly selected = new Set<ClusterName>(CLUSTERS);
  /** Each cluster's time zone property. */
  readonly zone = new Map<ClusterName, Zone>();
  readonly broken = new Set<ClusterName>();
  /** The approvals in Git at the head, in the order their commits added them. */
  readonly approvals = new Set<string>();
  /** The wave the last sync's open wave waits for an approval of, as the gate reports it. */
  awaiting: { wave: string; commit: string } | undefined;
  /** The rollout's commits (the state's `commit`), in the order the syncs named them. */
  readonly rolloutCommits: string[] = [];
  readonly downUntil = new Map<ClusterName, number>();
  /** What Git holds at each commit; its model is expanded against the inventory of the moment, as modelAt does. */
  readonly commits = new Map<string, GitContent>();
  readonly hub = new Map<string, LiveCr>();
  shape: PolicyShape;
  hubPaused = false;
  state: RolloutState | undefined;
  departedSince = new Map<string, number>();
  readonly observer = new Observer();
  syncs = 0;

  constructor(shape: PolicyShape, rings: ("a" | "b" | "-")[], zones: readonly Zone[] = []) {
    this.shape = shape;
    CLUSTERS.forEach((c, i) => {
      this.ring.set(c, rings[i]!);
      this.zone.set(c, zones[i] ?? "none");
      this.content.set(c, 1);
      this.versions.set(c, 20);
    });
    this.commits.set(this.commit, this.git());
  }

  git(): GitContent {
    return {
      content: new Map(this.content),
      versions: new Map(this.versions),
      broken: new Set(this.broken),
      shape: this.shape,
      approvals: new Set(this.approvals),
    };
  }

  spec(): RolloutSpec {
    return policySpec(this.commits.get(this.commit)!.shape);
  }

  inventory(): InventoryCluster[] {
    return CLUSTERS.map(
      (name): InventoryCluster => ({
        namespace: NS,
        name,
        labels: this.ring.get(name) === "-" ? {} : { ring: this.ring.get(name)! },
        properties: new Map(this.zone.get(name) === "none" ? [] : [[ZONE_PROPERTY, this.zone.get(name)!]]),
      }),
    );
  }

  resource(c: ClusterName, content: number, minor: number): FleetResource {
    return {
      apiVersion: "operator.knative.dev/v1beta1",
      kind: "KnativeServing",
      metadata: {
        name: `${c}-serving`,
        namespace: "knative-fleet",
        labels: { [PLACEMENT_LABEL]: "knative", [PLACEMENT_KIND_LABEL]: "knativeservingplacement" },
        annotations: { [SOURCE_CLUSTER_ANNOTATION]: `${NS}/${c}` },
      },
      spec: {
        version: `1.${minor}`,
        config: { sim: { content: String(content) } },
        clusterProfileRef: { namespace: NS, name: c },
      },
    } as FleetResource;
  }

  /** The fleet model of a commit: one CR per selected cluster; a broken file holds none. */
  model(git: GitContent = this.commits.get(this.commit)!): FleetModel {
    const resources: DesiredResource[] = [];
    const files: FleetModel["files"] = [];
    for (const c of CLUSTERS) {
      if (!this.selected.has(c)) continue;
      const path = `clusters/${c}.yaml`;
      const identity = { kind: "KnativeServing" as const, namespace: "knative-fleet", name: `${c}-serving` };
      if (git.broken.has(c)) {
        files.push({ path, status: "failed", declares: [identity] });
        continue;
      }
      files.push({ path, status: "valid", declares: [identity] });
      resources.push({
        resource: this.resource(c, git.content.get(c)!, git.versions.get(c)!),
        path,
        documentIndex: 0,
        line: 1,
      });
    }
    const failed = files.filter((file) => file.status === "failed").map((file) => file.path);
    return {
      resources,
      diagnostics: failed.map((path) => ({ path, line: 1, column: 1, field: "", message: "broken" })),
      omittedDiagnostics: 0,
      files,
      placements: [],
      rollout: { failedPaths: [] },
      approvals: [],
    };
  }

  /** A change in Git: a new commit and its model. */
  change(edit: () => void): void {
    this.history.push({ content: new Map(this.content), versions: new Map(this.versions) });
    edit();
    this.commit = `c-${++this.commitNumber}`;
    this.commits.set(this.commit, this.git());
  }

  live(): KubeObject[] {
    return [...this.hub.values()].map((cr) => cr.object);
  }

  /** The controller: a CR it has caught up with reports healthy unless its content is bad or its spoke is down. */
  advance(seconds: number): void {
    this.now += seconds * 1000;
    for (const [key, cr] of this.hub) {
      if (cr.reconcileAt > this.now) continue;
      const c = key.slice(key.indexOf("/") + 1, key.indexOf("-serving")) as ClusterName;
      const content = Number((cr.object.spec as { config: { sim: { content: string } } }).config.sim.content);
      const version = (cr.object.spec as { version: string }).version;
      const healthy =
        !this.bad.has(`${content}`) &&
        !this.bad.has(`${content}@${minorOf(version)}`) &&
        (this.downUntil.get(c) ?? 0) <= this.now;
      const condition = (type: string) => ({
        type,
        status: healthy ? "True" : "False",
        lastTransitionTime: "2026-01-01T00:00:00Z",
        ...(healthy ? {} : { reason: "NotReady" }),
      });
      cr.object = {
        ...cr.object,
        status: {
          observedGeneration: cr.object.metadata.generation,
          // What the controller installed: the version asked for, once it is healthy on it.
          version: healthy ? version : (cr.object.status as { version?: string } | undefined)?.version,
          conditions: [condition("DeploymentsAvailable"), condition("Ready")],
        },
      };
    }
  }

  write(object: KubeObject): void {
    const key = formatIdentity({
      kind: "KnativeServing",
      namespace: object.metadata.namespace!,
      name: object.metadata.name!,
    });
    const previous = this.hub.get(key);
    const same = previous && JSON.stringify(previous.object.spec) === JSON.stringify(object.spec);
    const generation = previous ? Number(previous.object.metadata.generation) + (same ? 0 : 1) : 1;
    this.hub.set(key, {
      object: { ...object, metadata: { ...object.metadata, generation }, status: previous?.object.status },
      reconcileAt: this.now + 5_000 + ((this.syncs * 7919) % 30) * 1000,
    });
  }

  /** One sync of the current commit, as the service runs it; `crash`: the leader dies after storing the state. */
  sync(crash = false): void {
    this.syncs++;
    const git = this.commits.get(this.commit)!;
    const model = this.model();
    const spec = this.spec();
    const source = { repository: REPOSITORY, branch: "main", commit: this.commit };
    const live = this.live();
    const clusters = this.inventory();
    const before = new Map([...this.hub].map(([key, cr]) => [key, hashOf(cr.object)]));
    const healthBefore = new Map([...this.hub].map(([key, cr]) => [key, healthOf(cr.object).healthy]));
    const minorsBefore = new Map([...this.hub].map(([key, cr]) => [key, minorOfCr(cr.object)]));
    // As the sync does (step 2c): a version several minors ahead is the next step of its upgrade chain, from
    // the steps the stored state keeps. What Git wants, for the gate and the observer, is that step.
    const upgrades = chainUpgrades(model.resources, live, {
      ...upgradeMemory(true, this.state),
      available: RELEASES,
    });
    const stepped: FleetModel = { ...model, resources: upgrades.resources };
    const intent = this.intent(stepped);
    const waveOf = (key: string) => this.waveOf(spec, key, clusters);
    const phaseBefore = this.state?.phase;
    const haltBefore = this.state?.halt;
    this.observer.sample(this.now, before, healthBefore);
    if (phaseBefore !== "Halted") {
      this.observer.settle(this.now, intent, before, healthBefore, spec, waveOf, minorsBefore);
    }

    const departures = decideDepartures({
      live,
      repository: REPOSITORY,
      desired: new Set(model.resources.map((d) => key(d))),
      placements: new Set(["KnativeServingPlacement knative-fleet/knative"]),
      pendingPlacements: new Set(),
      failedPaths: new Set(model.files.filter((f) => f.status === "failed").map((f) => f.path)),
      now: this.now,
      gracePeriodMs: GRACE_MS,
      previous: this.departedSince,
    });
    this.departedSince = departures.since;
    const held = departures.held as ResourceIdentity[];
    const steps = decideApplies(stepped.resources, source, live);
    const outcome = gateApplies(
      {
        spec,
        hubPaused: this.hubPaused,
        commit: this.commit,
        clusters,
        state: this.state,
        frozen: model.files.filter((f) => f.status === "failed").flatMap((f) => f.declares),
        held,
        now: new Date(this.now),
        upgrades: upgrades.steps,
        approvals: git.approvals,
      },
      steps,
      live,
    );
    this.awaiting = outcome.awaitingApproval;
    if (this.rolloutCommits.at(-1) !== outcome.state.commit) this.rolloutCommits.push(outcome.state.commit);
    // A revert that cannot be made fails the run, once the observer has said what it left (guarantee 8).
    const revertFailures: string[] = [];
    const reverts = outcome.reverts.flatMap((request): ApplyStep[] => {
      const result = revertStep(request, this.model(this.commits.get(request.to.commit)!), source);
      if ("step" in result) return [result.step];
      revertFailures.push(`a revert failed: ${result.failure}`);
      return [];
    });
    // The state is stored before anything is written (write-ahead), read back as a new leader would.
    this.state = RolloutStateSchema.parse(JSON.parse(JSON.stringify(outcome.state)));
    // 7. The chains' steps, at every sync: a crash stores the step as any sync does.
    this.observer.checkChains({
      sync: this.syncs,
      files: new Map(model.resources.map((d) => [key(d), minorOf(String(d.resource.spec.version))] as const)),
      given: new Map(
        stepped.resources.map((d) => [key(d), minorOf(String(d.resource.spec.version))] as const),
      ),
      minorsBefore,
      phaseBefore,
      phaseAfter: this.state.phase,
    });
    if (crash) {
      this.departedSince = new Map();
      if (revertFailures.length > 0) throw new Violation(revertFailures.join("; "));
      return;
    }
    const revertKeys = new Set(reverts.map((step) => formatIdentity(step)));
    const writes: Write[] = [];
    for (const step of withReverts(outcome.steps, reverts)) {
      if (step.action !== "create" && step.action !== "update") continue;
      this.write(step.object);
      writes.push({
        key: formatIdentity(step),
        to: hashOf(step.object)!,
        revert: revertKeys.has(formatIdentity(step)),
        ...(minorsBefore.has(formatIdentity(step)) && { fromMinor: minorsBefore.get(formatIdentity(step)) }),
        toMinor: minorOfCr(step.object),
      });
    }
    // Prunes behind the mirror's safeguards, in reverse wave order.
    const prune = decidePrune(
      {
        model,
        source,
        options: MirrorOptionsSchema.parse({ maxPruneFraction: 1 }),
        namespace: "knative-fleet",
      },
      this.live(),
      { applyFailures: 0, confirmedToken: undefined, held },
    );
    if (prune.state === "pruned") {
      for (const candidate of gatePrunes(
        spec,
        clusters,
        spec.paused || this.hubPaused,
        prune.candidates,
        this.live(),
      )) {
        if (candidate.waiting === undefined) {
          this.hub.delete(formatIdentity(candidate));
          triggered.add("a departed cluster's CR is pruned");
        }
      }
    }

    const after = new Map([...this.hub].map(([k, cr]) => [k, hashOf(cr.object)]));
    this.observer.check({
      now: this.now,
      spec,
      paused: spec.paused || this.hubPaused,
      intent,
      before,
      healthBefore,
      after,
      healthAfter: new Map([...this.hub].map(([k, cr]) => [k, healthOf(cr.object).healthy])),
      minorsBefore,
      minorsAfter: new Map([...this.hub].map(([k, cr]) => [k, minorOfCr(cr.object)])),
      writes,
      waveOf,
      phaseBefore,
      haltBefore,
      phaseAfter: this.state.phase,
      commit: this.commit,
      declared: new Set(model.files.flatMap((f) => f.declares.map(formatIdentity))),
      approvalWaves: new Set(git.shape.approval),
      approvals: git.approvals,
      rolloutCommit: this.state.commit,
      commitOrder: (commit) => [...this.commits.keys()].indexOf(commit),
      ...(outcome.awaitingApproval && { awaitingApproval: outcome.awaitingApproval }),
      ...(outcome.openWave && { openWave: outcome.openWave }),
      outside: (k) => !this.insideWindows(clusterOf(k)),
    });
    if (revertFailures.length > 0) throw new Violation(revertFailures.join("; "));
    if (this.state.phase === "Complete" && phaseBefore !== "Complete") {
      if ([...this.broken].some((c) => this.hub.has(crKey(c)))) {
        triggered.add("a rollout completes while a file is broken");
      }
      this.checkBaselineCommits();
    }
  }

  /** What Git wants for each CR of a selected cluster: a broken file keeps what it last wanted. */
  intent(model: FleetModel): Map<string, string | undefined> {
    const intent = new Map<string, string | undefined>();
    const source = { repository: REPOSITORY, branch: "main", commit: this.commit };
    for (const desired of model.resources) intent.set(key(desired), hashOf(mirroredObject(desired, source)));
    for (const c of this.broken) {
      const k = `KnativeServing knative-fleet/${c}-serving`;
      // A broken file whose CR is not on the hub (pruned while its cluster was away) wants nothing yet: no
      // CR can be made from a file that does not parse, and an empty wave holds no other.
      if (!this.selected.has(c) || !this.hub.has(k)) continue;
      intent.set(k, this.observer.lastIntent.get(k));
    }
    for (const [k, hash] of intent) if (hash !== undefined) this.observer.lastIntent.set(k, hash);
    return intent;
  }

  waveOf(spec: RolloutSpec, crKey: string, clusters: InventoryCluster[]): number {
    if (spec.allAtOnce) return 0;
    const c = crKey.slice(crKey.indexOf("/") + 1, crKey.indexOf("-serving"));
    return waveIndexOf(
      spec,
      { namespace: NS, name: c },
      new Map(clusters.map((cl) => [`${NS}/${cl.name}`, cl])),
    );
  }

  run(op: Op): void {
    switch (op.op) {
      case "push":
        this.change(() => {
          const id = this.commitNumber + 100;
          if (op.bad) this.bad.add(`${id}`);
          if (op.failAt !== undefined) this.bad.add(`${id}@${op.failAt}`);
          for (const c of op.clusters.length > 0 ? op.clusters : CLUSTERS) {
            this.content.set(c, id);
            if (op.version !== undefined) this.toVersion(c, op.version);
          }
        });
        break;
      case "gitRevert": {
        const previous = this.history.at(-1);
        if (previous)
          this.change(() => {
            for (const [c, id] of previous.content) this.content.set(c, id);
            for (const [c, minor] of previous.versions) this.toVersion(c, minor);
          });
        break;
      }
      case "upgradeRollout":
        this.change(() => {
          const id = this.commitNumber + 100;
          if (op.failAt !== undefined) this.bad.add(`${id}@${op.failAt}`);
          for (const c of CLUSTERS) {
            this.content.set(c, id);
            this.toVersion(c, op.to);
          }
          this.shape = { ...this.shape, onFailure: op.revert ? "HaltAndRevert" : "Halt" };
        });
        this.syncUntil(
          40,
          () =>
            this.state?.phase === "Halted" ||
            CLUSTERS.every((c) => !this.selected.has(c) || this.hubMinor(c) === this.versions.get(c)),
          op.steered,
        );
        break;
      case "relabel":
        this.relabel(op.cluster, op.ring);
        break;
      case "relabelStuck": {
        const c = this.stuckCluster();
        if (c) this.relabel(c, op.ring !== this.ring.get(c) ? op.ring : op.ring === "a" ? "b" : "a");
        break;
      }
      case "brokenRollout": {
        // A file that breaks while its CR waits holds the rollout (its change waits): break one that does not.
        const broken = [op.cluster, ...CLUSTERS].find((c) => !this.waits(c))!;
        this.change(() => {
          this.broken.add(broken);
          const id = this.commitNumber + 100;
          for (const c of CLUSTERS) if (c !== broken) this.content.set(c, id);
        });
        this.syncUntil(24, () => this.state?.phase === "Complete", true);
        break;
      }
      case "badRollout":
        this.change(() => {
          const id = this.commitNumber + 100;
          this.bad.add(`${id}`);
          for (const c of op.clusters.length > 0 ? op.clusters : CLUSTERS) this.content.set(c, id);
          this.shape = { ...this.shape, onFailure: op.revert ? "HaltAndRevert" : "Halt" };
        });
        this.syncUntil(16, () => this.state?.phase === "Halted", op.steered);
        if (op.fix) this.run({ op: "push", clusters: [], bad: false });
        break;
      case "depart":
        this.selected.delete(op.cluster);
        this.syncUntil(10, () => !this.hub.has(crKey(op.cluster)));
        break;
      case "select":
        this.selected[op.selected ? "add" : "delete"](op.cluster); // the placement follows the inventory
        break;
      case "break":
        this.change(() => this.broken[op.broken ? "add" : "delete"](op.cluster));
        break;
      case "flap":
        this.downUntil.set(op.cluster, this.now + op.seconds * 1000);
        break;
      case "restart":
        this.departedSince = new Map();
        break;
      case "crash":
        this.sync(true);
        break;
      case "pause":
        if (op.onHub) this.hubPaused = op.paused;
        else this.change(() => (this.shape = { ...this.shape, paused: op.paused }));
        break;
      case "onFailure":
        this.change(() => (this.shape = { ...this.shape, onFailure: op.revert ? "HaltAndRevert" : "Halt" }));
        break;
      case "allAtOnce":
        this.change(() => (this.shape = { ...this.shape, allAtOnce: op.on }));
        break;
      case "tick":
        break;
      case "approve":
        this.approve(this.rolloutCommit(), this.waveOfChoice(op.wave));
        break;
      case "approveOther": {
        const current = this.rolloutCommit();
        const previous =
          this.rolloutCommits.findLast((commit) => commit !== current) ??
          `c-${Math.max(0, Number(current.slice(2)) - 1)}`;
        const other =
          op.commit === "head" && this.commit !== current
            ? this.commit
            : op.commit === "madeUp" || previous === current
              ? MADE_UP_COMMIT
              : previous;
        this.approve(other, this.waveOfChoice(op.wave));
        break;
      }
      case "unapprove": {
        const current = this.rolloutCommit();
        const ofCurrent = (k: string) => APPROVAL_WAVES.some((wave) => k === approvalKey(current, wave));
        const reverted = [...this.approvals].filter((k) => !op.current || ofCurrent(k)).at(-1);
        if (reverted !== undefined) this.change(() => this.approvals.delete(reverted));
        break;
      }
      case "requireApproval":
        this.change(() => (this.shape = { ...this.shape, approval: op.waves }));
        break;
      case "clusterWindows":
        this.change(() => (this.shape = { ...this.shape, clusterWindows: op.on }));
        break;
      case "zone":
        this.zone.set(op.cluster, op.zone);
        break;
      case "splitRollout": {
        const spec = this.spec();
        const inventory = this.inventory();
        const selected = CLUSTERS.filter((c) => this.selected.has(c));
        const wave = new Map(selected.map((c) => [c, this.waveOf(spec, crKey(c), inventory)]));
        const split = (at: number) => {
          const inside = selected.filter((c) => this.insideWindows(c, at));
          return inside.some((c) => selected.some((d) => wave.get(d) === wave.get(c) && !inside.includes(d)));
        };
        const at = spec.allAtOnce ? undefined : this.nextMinute(split);
        if (at !== undefined && at - this.now < 86_400_000) this.advanceTo(at);
        this.run({ op: "push", clusters: [], bad: false });
        this.syncUntil(10, () => false);
        break;
      }
      case "toWindow": {
        const inside = this.insideWindows(op.cluster);
        const at = this.nextMinute((t) => this.insideWindows(op.cluster, t) !== inside);
        if (at !== undefined) this.advanceTo(at);
        break;
      }
    }
    this.advance(op.op === "tick" ? op.seconds : 1);
    this.sync();
  }

  /**
   * The cluster's file moves to 1.<minor>: up by any number of minors (a chain), down by one at most from
   * what its file, its hub CR and its last settled content have (Knative refuses more, and a multi-minor
   * downgrade is no chain: it is left as the file says, so the model does not ask for one).
   */
  toVersion(c: ClusterName, minor: number): void {
    const settled = this.observer.baselineMinor.get(crKey(c)) ?? 0;
    const floor = Math.max(this.versions.get(c)!, this.hubMinor(c) ?? 0, settled) - 1;
    this.versions.set(c, Math.max(minor, floor));
  }

  /**
   * Syncs every 30 s, at most `times`, until `done`; `steered`: the clock moves into the clusters' windows and
   * the rollout's commit gets the approvals it needs, as in the settling.
   */
  syncUntil(times: number, done: () => boolean, steered = false): void {
    for (let i = 0; i < times && !done(); i++) {
      if (steered) this.clockIntoWindows(false);
      this.advance(30);
      this.sync();
      if (steered) this.approveRollout();
    }
  }

  /** The commit the rollout is named after, as its state says (the head's before the first sync). */
  rolloutCommit(): string {
    return this.state?.commit ?? this.commit;
  }

  /** The wave chosen: "held" is the one the rollout waits on, else the first the policy wants approved. */
  waveOfChoice(choice: WaveChoice): string {
    if (choice !== "held") return choice;
    const needed = this.commits.get(this.commit)!.shape.approval;
    return (
      this.awaiting?.wave ??
      needed.find((wave) => !this.approvals.has(approvalKey(this.rolloutCommit(), wave))) ??
      "canary"
    );
  }

  /** A commit that adds an approval of `commit` and `wave`. */
  approve(commit: string, wave: string): void {
    this.change(() => this.approvals.add(approvalKey(commit, wave)));
  }

  /** Whether the cluster is inside its maintenance windows at `now` (the current commit's policy; the model's arithmetic). */
  insideWindows(c: ClusterName, now = this.now): boolean {
    if (!this.commits.get(this.commit)!.shape.clusterWindows) return true;
    return insideClusterWindows(c, this.ring.get(c)!, this.zone.get(c)!, now);
  }

  /** The first whole minute after now, within three days, at which `when` holds. */
  nextMinute(when: (at: number) => boolean): number | undefined {
    for (let minute = 1; minute <= 3 * 1440; minute++) {
      const at = (Math.floor(this.now / 60_000) + minute) * 60_000;
      if (when(at)) return at;
    }
    return undefined;
  }

  advanceTo(at: number): void {
    this.advance((at - this.now) / 1000);
    this.now = at;
  }

  /**
   * The settling moves the clock into the windows: when a cluster of the first wave with a change to take is
   * outside its windows at the next sync, to the first minute every such cluster is inside, else (their
   * windows never meet) the first one of those outside is; there must be one. A cluster outside may hold the
   * others: unhealthy on a change that failed, it fills its wave's maxUnavailable until its own window opens
   * for the fix. Between the faults (not `settling`), only when every such cluster is outside, to the first
   * minute one is inside, if any: a wave open with some of its clusters outside is a case to meet.
   */
  clockIntoWindows(settling = true): void {
    const spec = this.spec();
    if (spec.allAtOnce || !this.commits.get(this.commit)!.shape.clusterWindows) return;
    const inventory = this.inventory();
    const waveOf = (c: ClusterName) => this.waveOf(spec, crKey(c), inventory);
    const pending = CLUSTERS.filter(
      (c) => this.selected.has(c) && (!this.hub.has(crKey(c)) || this.waits(c)),
    );
    const first = pending.filter((c) => waveOf(c) === Math.min(...pending.map(waveOf)));
    const inside = (c: ClusterName, at: number) => this.insideWindows(c, at + 30_000);
    const outside = first.filter((c) => !inside(c, this.now));
    if (outside.length === 0 || (!settling && outside.length < first.length)) return;
    const at =
      this.nextMinute((t) => first.every((c) => inside(c, t))) ??
      this.nextMinute((t) => outside.some((c) => inside(c, t)));
    // The model's windows leave every cluster a time inside all of its entries (an invalid zone aside, which
    // the settling fixes): a cluster that never opens is the model's mistake.
    if (at !== undefined) this.advanceTo(at);
    else if (settling) throw new Error(`the model's windows never open for ${outside.join(", ")}`);
  }

  /** The settling gives every approval the rollout's commit needs, in one commit. */
  approveRollout(): void {
    const commit = this.state?.commit;
    if (commit === undefined || this.state?.phase === "Complete") return;
    const missing = this.commits
      .get(this.commit)!
      .shape.approval.filter((wave) => !this.approvals.has(approvalKey(commit, wave)));
    if (missing.length > 0) {
      this.change(() => {
        for (const wave of missing) this.approvals.add(approvalKey(commit, wave));
      });
    }
  }

  /** The cluster whose CR halted the rollout, else the first whose CR waits, that a label can move (not c0). */
  stuckCluster(): ClusterName | undefined {
    const halted = this.state?.phase === "Halted" ? this.state.halt?.resource : undefined;
    const candidates = halted ? [clusterOf(halted)] : CLUSTERS.filter((c) => this.waits(c));
    return candidates.find((c) => c !== "c0" && this.selected.has(c));
  }

  /** Its CR is not on what Git last wanted for it. */
  waits(c: ClusterName): boolean {
    const want = this.observer.lastIntent.get(crKey(c));
    return want !== undefined && want !== hashOf(this.hub.get(crKey(c))?.object);
  }

  relabel(c: ClusterName, ring: "a" | "b" | "-"): void {
    const spec = this.spec();
    const from = this.waveOf(spec, crKey(c), this.inventory());
    this.ring.set(c, ring);
    const halted = this.state?.phase === "Halted" && this.state.halt?.resource === crKey(c);
    if ((halted || this.waits(c)) && this.waveOf(spec, crKey(c), this.inventory()) !== from) {
      triggered.add("a relabel moves the halted or a waiting cluster to another wave");
    }
  }

  /** Each baseline names a commit that gives its CR that content again: what a revert re-derives. */
  checkBaselineCommits(): void {
    for (const [k, entry] of Object.entries(this.state?.crs ?? {})) {
      if (entry.baseline === undefined || !this.hub.has(k) || !this.selected.has(clusterOf(k))) continue;
      const { commit, hash } = entry.baseline;
      const git = this.commits.get(commit);
      const file = git && this.model(git).resources.find((d) => key(d) === k);
      // A step of an upgrade chain: the commit's CR with the version the step gave it.
      const desired = file && atVersion(file, entry.baseline.version);
      const gives =
        desired && hashOf(mirroredObject(desired, { repository: REPOSITORY, branch: "main", commit }));
      if (gives !== hash) {
        throw new Violation(
          `${k}: its baseline's commit ${commit} gives it ${gives ?? "nothing"}, not ${hash}`,
        );
      }
    }
  }

  /** Once the faults stop and Git wants good content everywhere, the fleet completes. */
  settleAtTheEnd(): void {
    this.hubPaused = false;
    this.downUntil.clear();
    // A time zone property that names no zone is fixed (the cluster's windows could never be read).
    for (const c of CLUSTERS) if (OFFSET_MINUTES[this.zone.get(c)!] === undefined) this.zone.set(c, "none");
    this.change(() => {
      this.shape = { ...this.shape, paused: false, allAtOnce: false, windows: false };
      this.broken.clear();
      for (const c of CLUSTERS) this.content.set(c, 9999);
    });
    this.complete();
  }

  /** A file wants a version several minors ahead of its hub CR's: the settling walks a chain. */
  chainsLeft(): void {
    if (CLUSTERS.some((c) => this.selected.has(c) && this.versions.get(c)! - (this.hubMinor(c) ?? 99) >= 2)) {
      triggered.add("the faults stop with a chain of several minors to walk");
    }
  }

  /** Syncs every 30 s until the rollout completes with every CR on what Git wants; the gate's baselines are the observer's. */
  complete(): void {
    for (let i = 0; i < 300; i++) {
      this.clockIntoWindows();
      this.advance(30);
      this.sync();
      this.approveRollout();
      // With every cluster gone Git declares no CR, and the mirror's safeguard (no allowEmpty) prunes none.
      const declaresNone = CLUSTERS.every((c) => !this.selected.has(c));
      const done =
        this.state?.phase === "Complete" &&
        (declaresNone ||
          [...this.hub.keys()].every((k) =>
            this.selected.has(k.slice(k.indexOf("/") + 1, k.indexOf("-serving")) as ClusterName),
          )) &&
        CLUSTERS.every(
          (c) =>
            !this.selected.has(c) ||
            (this.content.get(c) === contentOf(this.hub.get(`KnativeServing knative-fleet/${c}-serving`)) &&
              this.hubMinor(c) === this.versions.get(c)),
        );
      if (done) {
        this.checkBaselineCommits();
        for (const [k, entry] of Object.entries(this.state!.crs)) {
          if (this.hub.has(k) && entry.baseline?.hash !== this.observer.baseline.get(k)) {
            throw new Violation(
              `${k}: the gate's baseline ${entry.baseline?.hash} is not the observer's ${this.observer.baseline.get(k)}`,
            );
          }
        }
        return;
      }
    }
    // 9. Every CR ends on the version its file wants: a chain walked to its end.
    const behind = CLUSTERS.filter((c) => this.selected.has(c) && this.hubMinor(c) !== this.versions.get(c));
    if (this.state?.phase === "Complete" && behind.length > 0) {
      throw new Violation(
        `the fleet settled with ${behind.map((c) => `${crKey(c)} on 1.${this.hubMinor(c)}, its file wants 1.${this.versions.get(c)}`).join("; ")} (steps ${JSON.stringify(this.state.upgrades ?? {})})`,
      );
    }
    throw new Violation(
      `the fleet did not complete 300 syncs after the faults stopped: phase ${this.state?.phase}, halt ${JSON.stringify(this.state?.halt)}`,
    );
  }

  /** The minor of 1.x the cluster's hub CR asks for, if it has one. */
  hubMinor(c: ClusterName): number | undefined {
    const cr = this.hub.get(crKey(c));
    return cr && minorOfCr(cr.object);
  }
}

interface Write {
  key: string;
  to: string;
  revert: boolean;
  /** The minor of 1.x the hub CR asked for before the write (none for a creation) and after it. */
  fromMinor?: number;
  toMinor: number;
}

/** What the chains' check sees of one sync: versions alone, and the stored phase. */
interface ChainCheck {
  sync: number;
  /** The minor each valid file's CR wants, and the minor the sync gives it (its chain's step). */
  files: Map<string, number>;
  given: Map<string, number>;
  /** The minor each hub CR asks for before the sync. */
  minorsBefore: Map<string, number>;
  phaseBefore: RolloutState["phase"] | undefined;
  phaseAfter: RolloutState["phase"];
}

/** What the observer knows of one chain (the CRs whose files want one minor, some of them below it). */
interface ChainRecord {
  /** Since which sync each CR has been on the chain without a break. */
  since: Map<string, number>;
  /** The sync each minor was first given to a CR of the chain at. */
  givenAt: Map<number, number>;
  /** The minors given that a rollout completed after (the state stored Complete at a later sync). */
  completedAfter: Set<number>;
}

interface Check {
  now: number;
  spec: RolloutSpec;
  paused: boolean;
  intent: Map<string, string | undefined>;
  before: Map<string, string | undefined>;
  healthBefore: Map<string, boolean>;
  after: Map<string, string | undefined>;
  healthAfter: Map<string, boolean>;
  /** The minor of 1.x each hub CR asks for before the sync and after it. */
  minorsBefore: Map<string, number>;
  minorsAfter: Map<string, number>;
  writes: Write[];
  waveOf(key: string): number;
  phaseBefore: RolloutState["phase"] | undefined;
  /** The halt the sync started with (what was halted, at which commit): only Git lifts it. */
  haltBefore: RolloutState["halt"];
  commit: string;
  /** Every CR a file of the commit declares, valid or not. */
  declared: ReadonlySet<string>;
  phaseAfter: RolloutState["phase"];
  /** The waves the commit's policy says need an approval (the model's shape, not the parsed policy). */
  approvalWaves: ReadonlySet<string>;
  /** The approvals the gate was given, by `approvalKey(commit, wave)`. */
  approvals: ReadonlySet<string>;
  /** The commit the rollout is named after once the sync is done (the state's `commit`). */
  rolloutCommit: string;
  /** Where a commit is in the branch's history (-1: no commit of it). */
  commitOrder(commit: string): number;
  /** The open wave that waits for an approval, and the open (or next) wave, as the gate reports them. */
  awaitingApproval?: { wave: string; commit: string };
  openWave?: string;
  /** Its cluster is outside its maintenance windows at `now`, by the model's own reading of them. */
  outside(key: string): boolean;
}

/** What the guarantees say, from what it sees of the hub: the gate's state only by its phase. */
class Observer {
  readonly baseline = new Map<string, string>();
  /** The minor of 1.x each baseline asks for. */
  readonly baselineMinor = new Map<string, number>();
  /** The chains under way, by the minor their files want. */
  readonly chains = new Map<number, ChainRecord>();
  readonly lastIntent = new Map<string, string>();
  /** Since when each CR has been seen healthy (at a sync) on the content it has. */
  readonly healthySince = new Map<string, { hash: string | undefined; since: number }>();
  /** The waves a change went out in since the fleet was last settled. */
  readonly opened = new Set<number>();
  /** CRs given new content, unhealthy on it at every sync since: when, and which content. */
  readonly released = new Map<string, { hash: string; at: number }>();
  /** Where the commit the rollout was last named after is in the branch's history. */
  rolloutCommitOrder = -1;
  /** The waves that waited for an approval since the fleet was last settled. */
  readonly heldForApproval = new Set<string>();

  sample(now: number, live: Map<string, string | undefined>, health: Map<string, boolean>): void {
    for (const [k, hash] of live) {
      const seen = this.healthySince.get(k);
      if (!health.get(k)) this.healthySince.delete(k);
      else if (seen?.hash !== hash) this.healthySince.set(k, { hash, since: now });
    }
    for (const k of this.healthySince.keys()) if (!live.has(k)) this.healthySince.delete(k);
    for (const [k, { hash }] of this.released) {
      if (live.get(k) !== hash || health.get(k)) this.released.delete(k);
    }
  }

  soaked(k: string, hash: string | undefined, now: number, soakMs: number): boolean {
    const seen = this.healthySince.get(k);
    return seen !== undefined && seen.hash === hash && now - seen.since >= soakMs;
  }

  /** The fleet is settled when every CR is on what Git wants, healthy, and soaked if it changed. */
  settle(
    now: number,
    intent: Map<string, string | undefined>,
    live: Map<string, string | undefined>,
    health: Map<string, boolean>,
    spec: RolloutSpec,
    waveOf: (key: string) => number,
    minors: Map<string, number>,
  ): void {
    const soakMs = (k: string) => (spec.allAtOnce ? 0 : plannedWaves(spec)[waveOf(k)]!.soakMs);
    const settled = [...intent].every(([k, want]) => {
      const has = live.get(k);
      if (has !== want) return false;
      if (has === undefined || has === this.baseline.get(k)) return true;
      return health.get(k) === true && this.soaked(k, has, now, soakMs(k));
    });
    if (!settled) return;
    for (const [k, has] of live) {
      if (intent.has(k) && has !== undefined && health.get(k)) {
        this.baseline.set(k, has);
        this.baselineMinor.set(k, minors.get(k)!);
      }
    }
    this.opened.clear();
    this.heldForApproval.clear();
  }

  /**
   * 7. No step opens before the previous one completed. A CR is given minor m (one up from the m-1 it has)
   * only once it settled on m-1: its baseline (the content it had when the fleet last settled) is on m-1 or
   * above, so a revert takes it back one minor at most. When a chain first gives minor m and m-1 was itself
   * given by the chain, the state this sync starts from is Complete (the rollout that carried m-1 is done). A CR
   * further behind than the chain's step (its file was broken, its cluster left) walks one minor per
   * rollout behind the others.
   */
  checkChains(c: ChainCheck): void {
    for (const [k, given] of c.given) {
      const has = c.minorsBefore.get(k);
      const base = this.baselineMinor.get(k);
      // A CR given more than one minor up is for guarantee 6, at its write.
      if (has === undefined || given !== has + 1 || base === undefined) continue;
      if (base < given - 1) {
        throw new Violation(
          `${k} is given 1.${given} while its 1.${has} has not settled: its baseline is on 1.${base}`,
        );
      }
    }
    const targets = new Set([...this.chains.keys(), ...c.files.values()]);
    for (const target of targets) {
      const members = [...c.files]
        .filter(([k, want]) => want === target && c.minorsBefore.has(k) && c.minorsBefore.get(k)! <= target)
        .map(([k]) => k);
      // Every CR on the minor its file wants (or none left): the chain is done.
      if (members.every((k) => c.minorsBefore.get(k) === target)) {
        this.chains.delete(target);
        continue;
      }
      const chain = this.chains.get(target) ?? {
        since: new Map(),
        givenAt: new Map(),
        completedAfter: new Set(),
      };
      this.chains.set(target, chain);
      for (const k of [...chain.since.keys()]) if (!members.includes(k)) chain.since.delete(k);
      for (const k of members) if (!chain.since.has(k)) chain.since.set(k, c.sync);
      // A CR back on the minor it settled on (a return to its baseline, no rollout needed) opens no step.
      const opens = (k: string) =>
        c.given.get(k)! > c.minorsBefore.get(k)! && c.given.get(k)! > (this.baselineMinor.get(k) ?? -1);
      const given = new Set(members.filter(opens).map((k) => c.given.get(k)!));
      for (const m of [...given].sort((a, b) => a - b)) {
        if (chain.givenAt.has(m)) continue;
        const previous = chain.givenAt.get(m - 1);
        // A CR further behind than the step walks one minor at a time behind the others (docs/rollout.md,
        // upgrade chains): each CR's own minor is the check above; here, that the step waited for its rollout.
        if (previous !== undefined) {
          triggered.add("a chain's next step opens after its previous one");
          if (c.phaseBefore !== "Complete") {
            throw new Violation(
              `step 1.${m} of the chain to 1.${target} opened though the rollout of step 1.${m - 1} (given at sync ${previous}) ${chain.completedAfter.has(m - 1) ? "completed" : "never completed"} and the state was ${c.phaseBefore}`,
            );
          }
        }
        if (m < target) triggered.add("a chain gives a CR a step below its file's version");
        chain.givenAt.set(m, c.sync);
      }
      if (c.phaseAfter === "Complete") {
        for (const [m, at] of chain.givenAt) if (at < c.sync) chain.completedAfter.add(m);
      }
    }
  }

  /** Guarantees 10 and 11 (approvals, the clusters' windows), and their triggers. */
  checkApprovalsAndWindows(c: Check, news: readonly Write[], waitsAfter: readonly string[]): void {
    const waves = plannedWaves(c.spec);
    const members = [...c.intent.keys()];
    const waveName = (k: string) => waves[c.waveOf(k)]!.name;
    // Git wants content for it that it has not got, other than its baseline: a change the waves decide on.
    const changeWaits = (k: string) =>
      waitsAfter.includes(k) && c.intent.get(k) !== undefined && c.intent.get(k) !== this.baseline.get(k);
    const held = c.awaitingApproval?.wave;
    if (held !== undefined && members.some((k) => waveName(k) === held && changeWaits(k))) {
      triggered.add("a wave waits for its approval");
      this.heldForApproval.add(held);
      const own = approvalKey(c.rolloutCommit, held);
      // An approval of the wave naming another commit (a key of the same wave with another commit).
      if ([...c.approvals].some((k) => k !== own && k.endsWith(approvalKey("", held)))) {
        triggered.add("an approval of another commit is there while a wave waits for its own");
      }
    }
    // The rollout is named after a commit of the branch, the one it started at or a later one that changed
    // content, never an earlier one (whose approvals would then count) nor one that is not there.
    const order = c.commitOrder(c.rolloutCommit);
    if (order === -1 || order > c.commitOrder(c.commit) || order < this.rolloutCommitOrder) {
      throw new Violation(
        `at ${c.commit}, the rollout is named after ${c.rolloutCommit} (number ${order} of the branch; it was named after number ${this.rolloutCommitOrder}): not the commit it started at or a later one`,
      );
    }
    this.rolloutCommitOrder = order;
    for (const w of news) {
      const wave = waveName(w.key);
      // 10. New content in a wave that needs an approval: only with the rollout's commit's approval of it.
      if (c.approvalWaves.has(wave)) {
        if (!c.approvals.has(approvalKey(c.rolloutCommit, wave))) {
          throw new Violation(
            `${w.key} got new content ${w.to} in wave ${wave}, which needs an approval, without one of the rollout's commit ${c.rolloutCommit} (approvals: ${[...c.approvals].join(", ") || "none"})`,
          );
        }
        if (this.heldForApproval.has(wave)) triggered.add("a wave opens after its approval");
      }
      // 11. New content only inside the cluster's windows.
      if (c.outside(w.key)) {
        throw new Violation(
          `${w.key} got new content ${w.to} at ${new Date(c.now).toISOString()}, while its cluster is outside its maintenance windows`,
        );
      }
      if (members.some((k) => k !== w.key && waveName(k) === wave && changeWaits(k) && c.outside(k))) {
        triggered.add("a wave opens while one of its clusters is outside its windows");
      }
    }
    const open = c.phaseAfter === "Progressing" && !c.paused && held === undefined ? c.openWave : undefined;
    if (open !== undefined && members.some((k) => waveName(k) === open && changeWaits(k) && c.outside(k))) {
      triggered.add("a cluster is outside its windows while its wave is open");
    }
  }

  check(c: Check): void {
    const fail = (message: string) => {
      throw new Violation(message);
    };
    const waves = plannedWaves(c.spec);
    const members = [...c.intent.keys()];
    // A CR gone from the hub that no file wants any more has no baseline (the gate's guarantee 3 keeps it
    // while the hub CR exists): one made again later, for a cluster that came back, starts without one.
    for (const k of [...this.baseline.keys()]) {
      if (c.before.get(k) === undefined && !c.intent.has(k) && !c.declared.has(k)) {
        this.baseline.delete(k);
        this.baselineMinor.delete(k);
      }
    }
    // 6. No cluster skips a minor: a write moves a hub CR's spec.version by one minor at most.
    for (const w of c.writes) {
      if (w.fromMinor !== undefined && Math.abs(w.toMinor - w.fromMinor) > 1) {
        fail(`${w.key} was ${w.revert ? "reverted" : "written"} from 1.${w.fromMinor} to 1.${w.toMinor}`);
      }
    }
    const news = c.writes.filter(
      (w) => !w.revert && w.to !== this.baseline.get(w.key) && w.to !== c.before.get(w.key),
    );
    exercised.syncs++;
    exercised.newContent += news.length;
    exercised.reverts += c.writes.filter((w) => w.revert).length;
    if (c.phaseAfter === "Halted" && c.phaseBefore !== "Halted") exercised.halts++;
    if (c.phaseAfter === "Complete" && c.phaseBefore !== "Complete") exercised.completions++;
    if (c.writes.some((w) => w.revert))
      triggered.add("a halted rollout with onFailure HaltAndRevert reverts");
    if (c.haltBefore && c.phaseAfter !== "Halted" && !c.spec.allAtOnce)
      triggered.add("a newer commit lifts a halt");
    const waitsAfter = members.filter((k) => c.after.get(k) !== c.intent.get(k));
    if (c.paused && waitsAfter.length > 0) triggered.add("a change waits while paused");
    if (!c.spec.allAtOnce && !windowOpen(c.spec.windows, new Date(c.now)) && waitsAfter.length > 0) {
      triggered.add("a change waits for the rollout windows");
    }
    // 4. A halt happens: a CR let through that stays unhealthy on the content Git wants past its time limit
    // halts the rollout, whatever commits came in between (checked here, before a later settle hides it).
    if (!c.spec.allAtOnce) {
      for (const [k, { hash, at }] of this.released) {
        if (c.intent.get(k) !== hash || c.before.get(k) !== hash || c.healthBefore.get(k) !== false) continue;
        if (c.now - at <= waves[c.waveOf(k)]!.timeLimitMs) continue;
        triggered.add("a CR let through is unhealthy past its time limit");
        if (!c.paused && c.phaseAfter !== "Halted") {
          fail(
            `${k} has been unhealthy on ${hash} for ${(c.now - at) / 1000}s, past its time limit, and the rollout is ${c.phaseAfter}, not Halted`,
          );
        }
      }
    }
    // 4. Halted: nothing but baselines.
    // 4. Only Git lifts a halt: a newer commit that wants other content for the CR that failed, or drops it.
    if (c.haltBefore && c.phaseAfter !== "Halted" && !c.spec.allAtOnce) {
      const { resource, hash, commit } = c.haltBefore;
      const want = c.intent.get(resource);
      const dropped = !c.declared.has(resource) && want === undefined;
      if (c.commit === commit || (!dropped && (want === hash || !c.declared.has(resource)))) {
        fail(`the halt on ${resource} was lifted at ${c.commit} though Git still wants what failed`);
      }
    }
    if (c.phaseBefore === "Halted" && c.phaseAfter === "Halted") {
      for (const w of news) fail(`${w.key} got new content ${w.to} while the rollout was halted`);
    }
    if (!c.spec.allAtOnce) this.checkApprovalsAndWindows(c, news, waitsAfter);
    if (c.paused) for (const w of news) fail(`${w.key} got new content ${w.to} while the rollout was paused`);
    if (!c.spec.allAtOnce) {
      for (const w of news) {
        const wave = c.waveOf(w.key);
        // 5. No wave opens outside the windows.
        if (!this.opened.has(wave) && !windowOpen(c.spec.windows, new Date(c.now))) {
          fail(`wave ${waves[wave]!.name} opened outside its windows with ${w.key}`);
        }
        this.opened.add(wave);
        // 1. Every earlier wave: on what Git wants, healthy, soaked if changed.
        for (const d of members) {
          const earlier = c.waveOf(d);
          if (earlier >= wave) continue;
          const has = c.before.get(d);
          const soakMs = waves[earlier]!.soakMs;
          exercised.earlierWaveChecks++;
          triggered.add("a later wave changes after earlier ones");
          if (has !== c.intent.get(d))
            fail(`${w.key} (wave ${wave}) changed while ${d} (wave ${earlier}) was not on what Git wants`);
          if (
            has !== undefined &&
            has !== this.baseline.get(d) &&
            !(c.healthBefore.get(d) && this.soaked(d, has, c.now, soakMs))
          ) {
            fail(
              `${w.key} (wave ${wave}) changed while ${d} (wave ${earlier}) had not soaked healthy on its change`,
            );
          }
        }
      }
      // 2. maxUnavailable, in each wave a CR that was not already counted changed in: every changed CR
      // that is unhealthy counts, on whatever content (one Git moved on from too); a CR already counted may
      // take new content in its own place.
      const counted = (k: string, has: string | undefined, healthy: boolean | undefined) =>
        has !== undefined && has !== this.baseline.get(k) && !healthy;
      const adding = news.filter((w) => !counted(w.key, c.before.get(w.key), c.healthBefore.get(w.key)));
      for (const wave of new Set(adding.map((w) => c.waveOf(w.key)))) {
        const inWave = members.filter((k) => c.waveOf(k) === wave);
        const unavailable = inWave.filter((k) => counted(k, c.after.get(k), c.healthAfter.get(k)));
        const budget = maxUnavailableCount(waves[wave]!.maxUnavailable, inWave.length);
        if (unavailable.length >= budget && inWave.some((k) => waitsAfter.includes(k))) {
          triggered.add("a wave holds a change at maxUnavailable");
        }
        if (unavailable.length > budget) {
          fail(
            `wave ${waves[wave]!.name}: ${unavailable.length} changed CRs unhealthy (${unavailable.join(", ")}), maxUnavailable ${budget}`,
          );
        }
      }
    }
    // 8. A revert goes back exactly one step: halted with HaltAndRevert, a CR moved on from its baseline's
    // minor is put back on it, one below the minor that failed.
    if (c.phaseAfter === "Halted" && c.spec.onFailure === "HaltAndRevert" && !c.spec.allAtOnce) {
      for (const k of members) {
        const base = this.baselineMinor.get(k);
        const from = c.minorsBefore.get(k);
        if (base === undefined || from === undefined || from === base) continue;
        if (from === base + 1) triggered.add("HaltAndRevert puts a CR back one minor");
        if (Math.abs(from - base) > 1) fail(`${k} is reverted from 1.${from} to 1.${base}: not one step`);
        if (c.minorsAfter.get(k) !== base) {
          fail(`${k} was left on 1.${c.minorsAfter.get(k)} after a halt, not its baseline's 1.${base}`);
        }
      }
    }
    // 3. Halted with HaltAndRevert: every member back on its baseline.
    if (c.phaseAfter === "Halted" && c.spec.onFailure === "HaltAndRevert" && !c.spec.allAtOnce) {
      for (const k of members) {
        const base = this.baseline.get(k);
        const has = c.after.get(k);
        if (base !== undefined && has !== undefined && has !== base)
          fail(`${k} was left on ${has}, not its baseline ${base}, after a halt`);
      }
    }
    for (const w of c.writes) this.released.delete(w.key);
    for (const w of news) this.released.set(w.key, { hash: w.to, at: c.now });
  }
}

const key = (d: DesiredResource): string =>
  formatIdentity({
    kind: d.resource.kind,
    namespace: d.resource.metadata.namespace,
    name: d.resource.metadata.name,
  });
/** The minor of a `1.x` version. */
const minorOf = (version: string): number => Number(version.split(".")[1]);
/** The minor of 1.x a hub CR's spec.version asks for. */
const minorOfCr = (object: KubeObject): number => minorOf((object.spec as { version: string }).version);
const hashOf = (object: KubeObject | undefined): string | undefined =>
  object?.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
const contentOf = (cr: LiveCr | undefined): number | undefined =>
  cr ? Number((cr.object.spec as { config: { sim: { content: string } } }).config.sim.content) : undefined;

const crKey = (c: ClusterName): string => `KnativeServing knative-fleet/${c}-serving`;
const clusterOf = (crKey: string): ClusterName =>
  crKey.slice(crKey.indexOf("/") + 1, crKey.indexOf("-serving")) as ClusterName;

const cluster = fc.constantFrom(...CLUSTERS);
const minor = fc.constantFrom(...MINORS);
const zone = fc.constantFrom(...ZONES);
/** Half the time no wave needs an approval; else some do. */
const approvalWaves: fc.Arbitrary<ApprovalWave[]> = fc.oneof(
  fc.constant<ApprovalWave[]>([]),
  fc.subarray([...APPROVAL_WAVES], { minLength: 1 }),
);
const waveChoice: fc.Arbitrary<WaveChoice> = fc.oneof(
  { weight: 3, arbitrary: fc.constant("held" as const) },
  { weight: 1, arbitrary: fc.constantFrom(...APPROVAL_WAVES) },
);
const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record(
      {
        op: fc.constant("push" as const),
        clusters: fc.subarray([...CLUSTERS]),
        bad: fc.boolean(),
        version: minor,
        failAt: minor,
      },
      { requiredKeys: ["op", "clusters", "bad"] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        op: fc.constant("upgradeRollout" as const),
        to: fc.constantFrom(22 as const, 23 as const),
        failAt: fc.constantFrom(21 as const, 22 as const, 23 as const),
        revert: fc.boolean(),
        steered: fc.boolean(),
      },
      { requiredKeys: ["op", "to", "revert", "steered"] },
    ),
  },
  { weight: 1, arbitrary: fc.constant({ op: "gitRevert" as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("relabel" as const),
      cluster,
      ring: fc.constantFrom("a" as const, "b" as const, "-" as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("relabelStuck" as const),
      ring: fc.constantFrom("a" as const, "b" as const, "-" as const),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant("brokenRollout" as const), cluster }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("badRollout" as const),
      clusters: fc.subarray([...CLUSTERS]),
      revert: fc.boolean(),
      fix: fc.boolean(),
      steered: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("depart" as const), cluster }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant("select" as const), cluster, selected: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("break" as const), cluster, broken: fc.boolean() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("flap" as const),
      cluster,
      seconds: fc.integer({ min: 10, max: 400 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: "restart" as const }) },
  { weight: 1, arbitrary: fc.constant({ op: "crash" as const }) },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant("pause" as const), paused: fc.boolean(), onHub: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("onFailure" as const), revert: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("allAtOnce" as const), on: fc.boolean() }) },
  {
    weight: 12,
    arbitrary: fc.record({
      op: fc.constant("tick" as const),
      seconds: fc.constantFrom(10, 30, 60, 120, 200, 400, 3600),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("approve" as const), wave: waveChoice }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant("approveOther" as const),
      wave: waveChoice,
      commit: fc.constantFrom("previous" as const, "head" as const, "madeUp" as const),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("unapprove" as const), current: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("requireApproval" as const), waves: approvalWaves }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("clusterWindows" as const), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("zone" as const), cluster, zone }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("toWindow" as const), cluster }) },
  { weight: 2, arbitrary: fc.constant({ op: "splitRollout" as const }) },
);
const shapeArbitrary: fc.Arbitrary<PolicyShape> = fc.record({
  maxUnavailable: fc.constantFrom(1, 2, "50%"),
  windows: fc.boolean(),
  onFailure: fc.constantFrom("Halt" as const, "HaltAndRevert" as const),
  paused: fc.constant(false),
  allAtOnce: fc.constant(false),
  approval: approvalWaves,
  clusterWindows: fc.oneof(
    { weight: 2, arbitrary: fc.constant(false) },
    { weight: 1, arbitrary: fc.constant(true) },
  ),
});
const ringsArbitrary = fc.array(fc.constantFrom("a" as const, "b" as const, "-" as const), {
  minLength: 5,
  maxLength: 5,
});
const zonesArbitrary = fc.array(zone, { minLength: 5, maxLength: 5 });

/**
 * One run of the property: installed (then the policy's approvals and cluster windows committed), the
 * operations, then the faults stop and the fleet settles.
 */
function interleave(shape: PolicyShape, rings: ("a" | "b" | "-")[], ops: Op[], zones: Zone[] = []): void {
  const sim = new Sim({ ...shape, approval: [], clusterWindows: false }, rings, zones);
  sim.advance(3600);
  sim.complete(); // installed: every CR has a baseline
  if (shape.approval.length > 0 || shape.clusterWindows) sim.change(() => (sim.shape = shape));
  triggered = new Set();
  for (const op of ops) sim.run(op);
  sim.chainsLeft();
  sim.settleAtTheEnd();
}

/** A policy shape of one change at a time, with no windows, pause or emergency, and what `over` sets. */
const plainShape = (over: Partial<PolicyShape> = {}): PolicyShape => ({
  maxUnavailable: 1,
  windows: false,
  onFailure: "Halt",
  paused: false,
  allAtOnce: false,
  approval: [],
  clusterWindows: false,
  ...over,
});

/**
 * What the observer is shown of one sync after a completed rollout, every CR healthy and on minor 20,
 * that writes `to` on the CR `written`, and nothing else; no approvals, no windows.
 */
function oneWrite(sim: Sim, before: Map<string, string | undefined>, written: string, to: string): Check {
  const all = <T>(value: T) => new Map<string, T>([...before.keys()].map((k) => [k, value]));
  return {
    now: sim.now,
    spec: sim.spec(),
    paused: false,
    intent: sim.intent(sim.model()),
    before,
    healthBefore: all(true),
    after: new Map([...before, [written, to]]),
    healthAfter: all(true),
    minorsBefore: all(20),
    minorsAfter: all(20),
    writes: [{ key: written, to, revert: false, fromMinor: 20, toMinor: 20 }],
    waveOf: (k) => sim.waveOf(sim.spec(), k, sim.inventory()),
    phaseBefore: "Complete",
    haltBefore: undefined,
    commit: sim.commit,
    declared: new Set(),
    phaseAfter: "Progressing",
    approvalWaves: new Set(),
    approvals: new Set(),
    rolloutCommit: sim.commit,
    commitOrder: () => 0,
    outside: () => false,
  };
}

/**
 * Interleavings a random search once failed on, shrunk, kept so each stays covered whatever the seed. The
 * model's own mistakes are here too: a guarantee the model got wrong is fixed in the model, and its
 * counterexample stays to show the fix holds.
 */
const FOUND: { why: string; shape: PolicyShape; rings: ("a" | "b" | "-")[]; zones?: Zone[]; ops: Op[] }[] = [
  {
    why: "a CR that failed on a minor of its chain, outside its windows, filled its wave's maxUnavailable through the settling, which waited inside the others' windows (the model's: the settling moves the clock into every window of the wave)",
    shape: plainShape({ approval: ["canary"], clusterWindows: true }),
    rings: ["a", "-", "b", "a", "a"],
    zones: ["none", "none", "none", "none", "Asia/Kathmandu"],
    ops: [
      { op: "depart", cluster: "c0" },
      { op: "push", clusters: [], bad: false, version: 23, failAt: 21 },
      { op: "brokenRollout", cluster: "c0" },
      { op: "tick", seconds: 400 },
      { op: "push", clusters: [], bad: false },
    ],
  },
  {
    why: "the model's windows left a cluster of ring b in Caracas's zone no time inside both entries that select it, so the settling never ended (the model's mistake: every cluster now has one)",
    shape: plainShape({ approval: ["ring-b"], clusterWindows: true }),
    rings: ["a", "a", "b", "a", "a"],
    ops: [{ op: "brokenRollout", cluster: "c0" }],
    zones: ["none", "none", "America/Caracas", "none", "none"],
  },
  {
    why: "every cluster left: Git declares no CR and the prune safeguard (no allowEmpty) keeps the last one on the hub, which the settling took for a fleet never finished (the model's mistake)",
    shape: plainShape({ clusterWindows: true }),
    rings: ["a", "a", "a", "a", "a"],
    ops: [
      { op: "depart", cluster: "c0" },
      { op: "depart", cluster: "c2" },
      { op: "depart", cluster: "c3" },
      { op: "select", cluster: "c4", selected: false },
      { op: "depart", cluster: "c1" },
    ],
  },
  {
    why: "the canary's file broke, its cluster left and came back: a broken file with no hub CR holds no later wave",
    shape: plainShape(),
    rings: ["a", "a", "a", "a", "a"],
    ops: [
      { op: "brokenRollout", cluster: "c0" },
      { op: "select", cluster: "c0", selected: false },
      { op: "tick", seconds: 400 },
      { op: "tick", seconds: 10 },
      { op: "select", cluster: "c0", selected: true },
      { op: "push", clusters: [], bad: false },
    ],
  },
];

/** Runs of the property per CI run; KNATIVE_FLEET_MODEL_RUNS raises it for a longer search. */
const RUNS = Number(process.env.KNATIVE_FLEET_MODEL_RUNS ?? 5000);

describe("the rollout model", () => {
  it(`holds the rollout's guarantees over ${RUNS} random interleavings of pushes, relabels, broken files, faults and restarts`, () => {
    fc.assert(
      fc.property(
        shapeArbitrary,
        ringsArbitrary,
        fc.array(opArbitrary, { minLength: 1, maxLength: 40 }),
        zonesArbitrary,
        (shape, rings, ops, zones) => {
          interleave(shape, rings, ops, zones);
          for (const trigger of triggered) triggerRuns.set(trigger, triggerRuns.get(trigger)! + 1);
        },
      ),
      {
        numRuns: RUNS,
        ...(process.env.KNATIVE_FLEET_MODEL_SEED
          ? { seed: Number(process.env.KNATIVE_FLEET_MODEL_SEED) }
          : {}),
      },
    );
    const stats = process.env.KNATIVE_FLEET_MODEL_STATS;
    if (stats) writeFileSync(stats, `${JSON.stringify(exercised)}\n`);
    // How often each guarantee's triggering situation came up: a check whose case is never generated
    // catches nothing. Printed, and held at 5% of the runs at least.
    for (const [trigger, runs] of triggerRuns) {
      console.log(`trigger ${trigger}: ${runs} of ${RUNS} runs (${((100 * runs) / RUNS).toFixed(1)}%)`);
    }
    for (const [trigger, runs] of triggerRuns) expect(runs, trigger).toBeGreaterThanOrEqual(RUNS * 0.05);
    // The runs met what the guarantees are about, many times over: checks that never meet a halt prove little.
    expect(exercised.halts).toBeGreaterThan(RUNS / 10);
    expect(exercised.reverts).toBeGreaterThan(RUNS / 20);
    expect(exercised.earlierWaveChecks).toBeGreaterThan(RUNS);
  }, 600_000);

  it.each(FOUND)("holds where a search once found a counterexample: $why", ({ shape, rings, ops, zones }) => {
    interleave(shape, rings, ops, zones);
  });

  it("the observer catches a gate that skips the canary (the check can fail)", () => {
    const sim = new Sim(plainShape(), ["-", "a", "a", "b", "-"]);
    sim.advance(60);
    sim.complete();
    // Content pushed straight to a later wave, as a gate without waves would: the observer refuses it.
    sim.change(() => sim.content.set("c3", 4242));
    const model = sim.model();
    const c3 = model.resources.find((d) => d.resource.metadata.name === "c3-serving")!;
    sim.change(() => sim.content.set("c0", 4343));
    const before = new Map([...sim.hub].map(([k, cr]) => [k, hashOf(cr.object)]));
    const object = mirroredObject(c3, { repository: REPOSITORY, branch: "main", commit: sim.commit });
    expect(() => sim.observer.check(oneWrite(sim, before, key(c3), hashOf(object)!))).toThrow(
      /c3-serving \(wave 2\) changed while KnativeServing knative-fleet\/c0-serving \(wave 0\) was not on what Git wants/,
    );
  });

  it("the observer catches new content in a wave without the approval of the rollout's commit, or outside its cluster's windows", () => {
    const sim = new Sim(plainShape(), ["-", "a", "a", "b", "-"]);
    sim.advance(60);
    sim.complete();
    // New content for c1 (ring-a) alone: every earlier wave is on what Git wants.
    const stale = sim.commit;
    sim.change(() => sim.content.set("c1", 4242));
    const c1 = sim.model().resources.find((d) => d.resource.metadata.name === "c1-serving")!;
    const before = new Map([...sim.hub].map(([k, cr]) => [k, hashOf(cr.object)]));
    const to = hashOf(mirroredObject(c1, { repository: REPOSITORY, branch: "main", commit: sim.commit }))!;
    const check = (approvals: string[], outside: string[]) =>
      sim.observer.check({
        ...oneWrite(sim, before, key(c1), to),
        healthAfter: new Map([...before.keys()].map((k) => [k, k !== key(c1)])),
        approvalWaves: new Set(["ring-a"]),
        approvals: new Set(approvals),
        commitOrder: (commit) => [...sim.commits.keys()].indexOf(commit),
        outside: (k) => outside.includes(k),
      });
    expect(() => check([approvalKey(stale, "ring-a"), approvalKey(MADE_UP_COMMIT, "ring-a")], [])).toThrow(
      /c1-serving got new content \S+ in wave ring-a, which needs an approval, without one of the rollout's commit c-\d+/,
    );
    expect(() => check([approvalKey(sim.commit, "ring-a")], [key(c1)])).toThrow(
      /c1-serving got new content \S+ at \S+, while its cluster is outside its maintenance windows/,
    );
    expect(() => check([approvalKey(sim.commit, "ring-a")], [])).not.toThrow();
  });

  it("the model reads the clusters' windows as the gate does, in every ring and time zone, through a day", () => {
    const shape: PolicyShape = plainShape({ clusterWindows: true });
    const spec = policySpec(shape);
    // Every half hour, and the minute each window starts or ends in each zone the model knows, and the one before.
    const edges = CLUSTER_WINDOWS.flatMap((entry) =>
      entry.windows.flatMap(({ span }) => [minutesOf(span), minutesOf(span.slice(6))]),
    );
    const minutes = new Set(Array.from({ length: 48 }, (_, i) => i * 30));
    for (const edge of edges) {
      for (const offset of Object.values(OFFSET_MINUTES)) {
        for (const at of [edge - offset, edge - offset - 1]) minutes.add((at + 2 * 1440) % 1440);
      }
    }
    const differ: string[] = [];
    for (const ring of ["a", "b", "-"] as const) {
      for (const zone of ZONES) {
        const sim = new Sim(shape, [ring, ring, ring, ring, ring], [zone, zone, zone, zone, zone]);
        const inventory = new Map(sim.inventory().map((cluster) => [`${NS}/${cluster.name}`, cluster]));
        for (const minute of minutes) {
          const now = Date.parse("2026-03-02T00:00:00Z") + minute * 60_000;
          for (const c of ["c0", "c1", "c2"] as const) {
            const gate = clusterWindowClosed(
              spec,
              { namespace: NS, name: c },
              inventory.get(`${NS}/${c}`),
              new Date(now),
            );
            if ((gate === undefined) !== sim.insideWindows(c, now)) {
              differ.push(
                `${c} in ring ${ring}, zone ${zone}, at ${new Date(now).toISOString()}: the gate says ${gate ?? "inside"}`,
              );
            }
          }
        }
      }
    }
    expect(differ).toEqual([]);
  });
});
