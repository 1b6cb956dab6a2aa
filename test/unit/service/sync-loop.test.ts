import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { CONFIRM_PRUNE_ANNOTATION } from "../../../src/api/labels.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { SyncLoop, type SyncLoopOptions } from "../../../src/service/sync-loop.ts";
import type { Snapshot } from "../../../src/source/index.ts";
import { DEFAULT_FLEET_SETTINGS } from "../../../src/sync/settings.ts";
import type { SyncEdges, SyncResult } from "../../../src/sync/sync.ts";

// The leader's syncs one at a time, with a fake sync that waits until a test lets it end: no FleetService,
// no hub, no Git.

const snapshot = (commit: string): Snapshot => ({
  commit,
  files: [{ path: `clusters/${commit}.yaml`, text: "" } satisfies FleetFile],
  digest: commit,
});

const NO_PRUNE = { state: "none", candidates: [], retained: [] };

const result = (commit: string, prune: object = NO_PRUNE, resources: object[] = [{ action: "created" }]) =>
  ({
    resources,
    prune,
    failedFiles: [],
    source: { commit },
  }) as unknown as SyncResult;

/** A sync started: its commit and files, and the hands that end it. */
interface Started {
  commit: string;
  files: readonly FleetFile[];
  edges: SyncEdges;
  /** Ends it; with a prune report and the CRs' outcomes, as that sync's. */
  finish(prune?: object, resources?: object[]): void;
  fail(err: Error): void;
}

function loop(over: Partial<SyncLoopOptions> = {}) {
  let leading = true;
  const started: Started[] = [];
  const noted: unknown[][] = [];
  /**
   * The prune-confirmation ConfigMap and the CRs as the hub holds them (by "kind namespace/name"), and how
   * often either was read between syncs.
   */
  const hub = {
    confirmation: undefined as KubeObject | undefined,
    crs: new Set<string>(),
    reads: 0,
    /** Of the reads, whole lists of the hub's CRs. */
    lists: 0,
  };
  const edges = {
    placements: { inventory: () => ({}) },
    hub: {
      confirmation: async () => {
        hub.reads++;
        return hub.confirmation;
      },
      get: async ({ kind, namespace, name }: { kind: string; namespace: string; name: string }) => {
        hub.reads++;
        return hub.crs.has(`${kind} ${namespace}/${name}`) ? ({} as KubeObject) : undefined;
      },
      read: async () => {
        hub.reads++;
        hub.lists++;
        const live = [...hub.crs].map((key) => {
          const [kind, path] = key.split(" ") as [string, string];
          const [namespace, name] = path.split("/");
          return { apiVersion: "operator.knative.dev/v1beta1", kind, metadata: { namespace, name } };
        });
        return { live };
      },
    },
  } as unknown as SyncEdges;
  const options: SyncLoopOptions = {
    settings: { fleet: DEFAULT_FLEET_SETTINGS, kodataDir: "/kodata" },
    source: { repository: "https://git.example/fleet.git", branch: "main" },
    isLeading: () => leading,
    edges: () => edges,
    report: {
      metrics: {
        syncFinished: ({ trigger }) => noted.push(["syncFinished", trigger]),
        rolloutObserved: () => noted.push(["rolloutObserved"]),
        upgradesObserved: () => noted.push(["upgradesObserved"]),
        pruned: (r) => noted.push(["pruned", r.outcome]),
      },
      log: {
        info: (...args: unknown[]) => {
          noted.push(["log", ...args]);
        },
      },
    },
    onSynced: (r) => noted.push(["synced", r.source.commit]),
    sync: ({ source, files }, settings, given) => {
      expect(settings).toBe(options.settings);
      expect(source).toEqual({
        repository: "https://git.example/fleet.git",
        branch: "main",
        commit: source.commit,
      });
      return new Promise<SyncResult>((resolve, reject) =>
        started.push({
          commit: source.commit,
          files,
          edges: given,
          finish: (prune, resources) => resolve(result(source.commit, prune, resources)),
          fail: reject,
        }),
      );
    },
    ...over,
  };
  return {
    syncs: new SyncLoop(options),
    started,
    noted,
    edges,
    hub,
    stopLeading: () => {
      leading = false;
    },
  };
}

/** Lets the queued promise callbacks run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

const triggers = (noted: unknown[][]) => noted.filter(([what]) => what === "syncFinished").map(([, t]) => t);

describe("SyncLoop", () => {
  it("syncs a commit with the edges as they are, reports it, then hands its result to the status", async () => {
    const { syncs, started, noted, edges } = loop();
    const done = syncs.snapshot(snapshot("c1"));
    await settle();
    expect(started.map((s) => s.commit)).toEqual(["c1"]);
    expect(started[0]!.files).toEqual(snapshot("c1").files);
    expect(started[0]!.edges).toBe(edges);
    started[0]!.finish();
    await done;
    expect(noted).toEqual([
      ["syncFinished", "git"],
      ["upgradesObserved"],
      ["pruned", "none"],
      [
        "log",
        { commit: "c1", trigger: "git", created: 1, invalidFiles: 0, prune: "none" },
        "fleet synced into the hub",
      ],
      ["synced", "c1"],
    ]);
  });

  it("runs one sync at a time, in the order they came", async () => {
    const { syncs, started } = loop();
    const first = syncs.snapshot(snapshot("c1"));
    const second = syncs.snapshot(snapshot("c2"));
    await settle();
    expect(started.map((s) => s.commit)).toEqual(["c1"]);
    started[0]!.finish();
    await first;
    await settle();
    expect(started.map((s) => s.commit)).toEqual(["c1", "c2"]);
    started[1]!.finish();
    await second;
  });

  it("syncs nothing again before the first commit", async () => {
    const { syncs, started } = loop();
    syncs.again("inventory");
    syncs.again("rollout");
    await syncs.idle();
    await settle();
    expect(started).toEqual([]);
  });

  it("syncs the last commit again on an inventory or rollout change, with that trigger", async () => {
    const { syncs, started, noted } = loop();
    const first = syncs.snapshot(snapshot("c1"));
    await settle();
    started[0]!.finish();
    await first;
    syncs.again("inventory");
    syncs.again("rollout");
    await settle();
    started[1]!.finish();
    await settle();
    started[2]!.finish();
    await syncs.idle();
    expect(started.map((s) => s.commit)).toEqual(["c1", "c1", "c1"]);
    expect(started[1]!.files).toEqual(snapshot("c1").files);
    expect(triggers(noted)).toEqual(["git", "inventory", "rollout"]);
  });

  it("takes the last commit when the change comes: a commit queued behind it is synced after", async () => {
    const { syncs, started, noted } = loop();
    void syncs.snapshot(snapshot("c1"));
    void syncs.snapshot(snapshot("c2"));
    await settle();
    // c1 is syncing, c2 waits: the inventory changes now, so c1 is the last commit to sync again.
    syncs.again("inventory");
    for (let i = 0; i < 3; i++) {
      started[i]!.finish();
      await settle();
    }
    await syncs.idle();
    expect(started.map((s) => s.commit)).toEqual(["c1", "c2", "c1"]);
    expect(triggers(noted)).toEqual(["git", "git", "inventory"]);
  });

  it("a sync that fails rejects its own promise alone: the next one runs, idle() settles", async () => {
    const { syncs, started, noted } = loop();
    const first = syncs.snapshot(snapshot("c1"));
    const second = syncs.snapshot(snapshot("c2"));
    await settle();
    started[0]!.fail(new Error("the hub refused the apply"));
    await expect(first).rejects.toThrow("the hub refused the apply");
    await settle();
    started[1]!.finish();
    await second;
    await syncs.idle();
    expect(triggers(noted)).toEqual(["git"]);
    expect(noted.filter(([what]) => what === "synced")).toEqual([["synced", "c2"]]);
  });

  it("once leadership ended, a queued sync does nothing, yet its commit is remembered", async () => {
    const { syncs, started, noted, stopLeading } = loop();
    stopLeading();
    await syncs.snapshot(snapshot("c1"));
    expect(started).toEqual([]);
    expect(noted).toEqual([]);
    // Remembered: had leadership come back, the inventory would sync c1 again (this replica does not lead).
    syncs.again("inventory");
    await syncs.idle();
    expect(started).toEqual([]);
  });

  it("idle() waits for the syncs queued so far", async () => {
    const { syncs, started } = loop();
    void syncs.snapshot(snapshot("c1"));
    let idle = false;
    void syncs.idle().then(() => {
      idle = true;
    });
    await settle();
    expect(idle).toBe(false);
    started[0]!.finish();
    await settle();
    expect(idle).toBe(true);
  });

  it("forgets the last commit when leadership ends: nothing to sync again until the next commit", async () => {
    const { syncs, started } = loop();
    const first = syncs.snapshot(snapshot("c1"));
    await settle();
    started[0]!.finish();
    await first;
    syncs.forget();
    syncs.again("rollout");
    await syncs.idle();
    await settle();
    expect(started.map((s) => s.commit)).toEqual(["c1"]);
  });

  it("a prune held for a person: its confirmation, which changes no commit, syncs the last commit again; nothing else does", async () => {
    const { syncs, started, noted, hub, stopLeading } = loop({ hubCheckMs: 5 });
    const held = (token: string) => ({
      ...NO_PRUNE,
      state: "held",
      confirmation: { namespace: "ns", token },
    });
    const confirm = (token: string) => {
      hub.confirmation = {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "knative-fleet-prune", annotations: { [CONFIRM_PRUNE_ANNOTATION]: token } },
      };
    };
    // Counted reads, not a sleep: on a loaded machine 40 ms may hold no timer at all.
    const moreReads = (n: number) => {
      const target = hub.reads + n;
      return vi.waitFor(() => expect(hub.reads).toBeGreaterThanOrEqual(target), { timeout: 10_000 });
    };
    void syncs.snapshot(snapshot("c1"));
    await settle();
    started[0]!.finish(held("t1"));
    await moreReads(3); // looked for while nobody confirmed
    expect(started).toHaveLength(1);
    confirm("t0"); // another prune's token releases nothing
    await moreReads(2); // at least one whole read after it
    await settle();
    expect(started).toHaveLength(1);
    confirm("t1");
    await vi.waitFor(() => expect(started).toHaveLength(2), { timeout: 10_000 });
    expect(started.map((s) => s.commit)).toEqual(["c1", "c1"]);
    expect(triggers(noted)).toEqual(["git"]);
    started[1]!.finish({ ...NO_PRUNE, state: "pruned" });
    await settle();
    expect(triggers(noted)).toEqual(["git", "prune-confirmation"]);
    // Pruned: nothing is waited for any more.
    const reads = hub.reads;
    await sleep(40);
    expect(hub.reads).toBe(reads);
    expect(started).toHaveLength(2);

    // Held again, then leadership ends: the next leader's sync decides; this replica stops looking.
    void syncs.snapshot(snapshot("c2"));
    await settle();
    started[2]!.finish(held("t2"));
    await settle();
    stopLeading();
    syncs.forget();
    const before = hub.reads;
    confirm("t2");
    await sleep(40);
    expect(hub.reads).toBe(before);
    expect(started).toHaveLength(3);
  });
  it("a declared CR whose hub copy was being deleted: the last commit is synced again once the deletion is done", async () => {
    const { syncs, started, noted, hub } = loop({ hubCheckMs: 5 });
    const moreReads = (n: number) => {
      const target = hub.reads + n;
      return vi.waitFor(() => expect(hub.reads).toBeGreaterThanOrEqual(target), { timeout: 10_000 });
    };
    const terminating = { action: "terminating", kind: "KnativeServing", namespace: "ns", name: "a" };
    hub.crs.add("KnativeServing ns/a");
    void syncs.snapshot(snapshot("c1"));
    await settle();
    started[0]!.finish(NO_PRUNE, [
      terminating,
      { action: "unchanged", kind: "KnativeServing", namespace: "ns", name: "b" },
    ]);
    await moreReads(3); // its finalizer is still at work: looked at, nothing synced
    await settle();
    expect(started).toHaveLength(1);
    hub.crs.delete("KnativeServing ns/a");
    await vi.waitFor(() => expect(started).toHaveLength(2), { timeout: 10_000 });
    expect(started.map((s) => s.commit)).toEqual(["c1", "c1"]);
    started[1]!.finish(NO_PRUNE, [{ action: "create", kind: "KnativeServing", namespace: "ns", name: "a" }]);
    await settle();
    expect(triggers(noted)).toEqual(["git", "hub-cr-deleted"]);
    // Created again: nothing is waited for any more.
    const reads = hub.reads;
    await sleep(40);
    expect(hub.reads).toBe(reads);
  });
  it("many terminating CRs are looked at with one read of the hub, not a GET each", async () => {
    const { syncs, started, noted, hub } = loop({ hubCheckMs: 5 });
    const names = ["a", "b", "c", "d", "e", "f", "g"];
    for (const name of names) hub.crs.add(`KnativeServing ns/${name}`);
    void syncs.snapshot(snapshot("c1"));
    await settle();
    started[0]!.finish(
      NO_PRUNE,
      names.map((name) => ({ action: "terminating", kind: "KnativeServing", namespace: "ns", name })),
    );
    await vi.waitFor(() => expect(hub.lists).toBeGreaterThanOrEqual(2), { timeout: 10_000 });
    await settle();
    expect(hub.reads).toBe(hub.lists);
    expect(started).toHaveLength(1);
    hub.crs.delete("KnativeServing ns/f"); // one is gone: the last commit is synced again
    await vi.waitFor(() => expect(started).toHaveLength(2), { timeout: 10_000 });
    started[1]!.finish();
    await settle();
    expect(triggers(noted)).toEqual(["git", "hub-cr-deleted"]);
  });
});
