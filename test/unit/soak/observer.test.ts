import { afterEach, describe, expect, it, vi } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import {
  CONFIRM_PRUNE_ANNOTATION,
  CR_KIND_LABEL,
  CR_NAME_LABEL,
  DESIRED_HASH_ANNOTATION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  PRUNE_CONFIRMATION_CONFIGMAP,
  UPGRADE_TARGET_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { HELD_PRUNE_KEY } from "../../../src/mirror/decide.ts";
import { anchorsOn, isHealthy, notReady, withTimeout } from "../../soak/observer.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { observedFleet, SPOKE } from "./observed-fleet.ts";

// The observer's judgements during the soak, each on the violation it exists to catch and on the case it
// must let pass: a soak report with no violations means something only if each check can fail.

// ── The observer's checks: converged, spec-from-pushed-revision, no-spoke-leftovers ──────────────────────

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

  it("converged: catches a CR on another version, and one whose install reports another version", async () => {
    const { hub, fleet, observer, pushed, cr, installed } = observedFleet();
    const key = `KnativeServing ${fleet.layout.namespace}/serving-${SPOKE}`;
    installed(pushed.marker);
    hub.put(cr({ version: "1.21", marker: pushed.marker }));
    expect(await observer.differences(fleet)).toEqual([
      `${key} holds 1.21/${pushed.marker}, not ${pushed.version}/${pushed.marker}`,
    ]);
    const behind = cr(pushed);
    hub.put({ ...behind, status: { ...(behind.status as object), version: "1.21.3" } });
    expect(await observer.differences(fleet)).toEqual([`${key} reports version 1.21.3`]);
  });

  it("converged: names every broken file", async () => {
    const { fleet, observer } = observedFleet();
    fleet.files = {
      ...fleet.files,
      broken: new Map([
        ["clusters/spoke-1.yaml", "yaml-syntax"],
        ["rollout.yaml", "kind-typo"],
      ]),
    };
    expect(await observer.differences(fleet)).toEqual(["broken files: clusters/spoke-1.yaml, rollout.yaml"]);
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
    expect(observer.counts.spokeSamples).toBe(2); // the spoke's serving and eventing installs

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

// ── The hub CRs' tracks: deletions, no-prune-of-declared, what counts as new content ────────────────────

describe("the observer's hub CR watch", () => {
  afterEach(() => vi.useRealTimers());

  /** The fleet with a clock the test moves, and the observer's tracks to look at. */
  function watched() {
    vi.useFakeTimers({ now: 1_000_000, toFake: ["Date"] });
    const observed = observedFleet();
    const tracks = (
      observed.observer as unknown as {
        crs: Map<string, { changedAt?: number; unhealthySince?: number; deletingSince?: number }>;
      }
    ).crs;
    const key = `KnativeServing ${observed.fleet.layout.namespace}/serving-${SPOKE}`;
    const at = (ms: number) => vi.setSystemTime(1_000_000 + ms);
    /** The CR with a deletionTimestamp: a deletion the hub has begun (finalizers pending). */
    const deleting = (object: KubeObject): KubeObject => ({
      ...object,
      metadata: { ...object.metadata, deletionTimestamp: new Date().toISOString() },
    });
    return { ...observed, tracks, key, at, deleting };
  }

  it("no-prune-of-declared: catches a CR deleted while its file declared it since it appeared", async () => {
    const { fleet, observer, hooks, pushed, cr, key, at } = watched();
    observer.declare(fleet, "after");
    at(1_000);
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    at(2_000);
    await hooks.onHubCr(fleet, "DELETED", cr(pushed));
    expect(observer.violations.map((v) => [v.invariant, v.evidence, v.step])).toEqual([
      [
        "no-prune-of-declared",
        `${key} was deleted although its file declared it the whole time since it appeared (${new Date(1_001_000).toISOString()})`,
        "a unit test",
      ],
    ]);
    expect(observer.counts.hubEvents).toBe(2);
  });

  it("no-prune-of-declared: also when the deletion is first seen as a deletionTimestamp, and only once", async () => {
    const { fleet, observer, hooks, pushed, cr, at, deleting } = watched();
    observer.declare(fleet, "after");
    at(500);
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    at(1_000);
    await hooks.onHubCr(fleet, "MODIFIED", deleting(cr(pushed)));
    at(2_000);
    await hooks.onHubCr(fleet, "MODIFIED", deleting(cr(pushed)));
    await hooks.onHubCr(fleet, "DELETED", deleting(cr(pushed)));
    expect(observer.violations.map((v) => v.invariant)).toEqual(["no-prune-of-declared"]);
  });

  it("no-prune-of-declared: lets pass a CR no file declared, and any deletion once the soak stopped checking", async () => {
    const { fleet, observer, hooks, pushed, cr, at } = watched();
    // Never declared: the observer was not told of any declaration.
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    at(1_000);
    await hooks.onHubCr(fleet, "DELETED", cr(pushed));
    expect(observer.violations).toEqual([]);
    // Declared, but deleted at the end of the run, by the soak itself.
    observer.declare(fleet, "after");
    at(2_000);
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    observer.stopChecking();
    at(3_000);
    await hooks.onHubCr(fleet, "DELETED", cr(pushed));
    expect(observer.violations).toEqual([]);
  });

  it("declare: `before` a change keeps only what was declared and still is; `after` it takes the new set", async () => {
    const { fleet, observer, hooks, pushed, cr, at } = watched();
    const withoutSpoke = { ...fleet.files, serving: new Map() };
    const deletedAt = async (ms: number) => {
      at(ms);
      await hooks.onHubCr(fleet, "ADDED", cr(pushed));
      at(ms + 1_000);
      await hooks.onHubCr(fleet, "DELETED", cr(pushed));
      return observer.violations.length;
    };
    // `before` a push that adds the CR: not declared yet, so its deletion is no prune of a declared one.
    observer.declare(fleet, "before");
    expect(await deletedAt(1_000)).toBe(0);
    // `after` it: declared.
    observer.declare(fleet, "after");
    expect(await deletedAt(10_000)).toBe(1);
    // `before` a push that keeps it: still declared.
    observer.declare(fleet, "before");
    expect(await deletedAt(20_000)).toBe(2);
    // `before` a push that drops it: undeclared from then on.
    at(29_000);
    observer.declare(fleet, "before", withoutSpoke);
    expect(await deletedAt(30_000)).toBe(2);
  });

  it("finalized: records how long a deletion took from its deletionTimestamp, and forgets the CR", async () => {
    const { fleet, observer, hooks, pushed, cr, at, deleting } = watched();
    const other = { ...cr(pushed), metadata: { ...cr(pushed).metadata, name: "serving-other" } };
    await hooks.onHubCr(fleet, "ADDED", other);
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    expect(observer.deleting()).toEqual([]);
    at(1_000);
    await hooks.onHubCr(fleet, "MODIFIED", deleting(cr(pushed)));
    at(3_500);
    await hooks.onHubCr(fleet, "MODIFIED", deleting(cr(pushed)));
    expect(observer.deleting().map((t) => [t.key, t.deletingSince])).toEqual([
      [`KnativeServing ${fleet.layout.namespace}/serving-${SPOKE}`, 1_001_000],
    ]);
    at(5_000);
    await hooks.onHubCr(fleet, "DELETED", deleting(cr(pushed)));
    expect(observer.finalized).toEqual([
      { key: `KnativeServing ${fleet.layout.namespace}/serving-${SPOKE}`, seconds: 4, withoutCleanup: false },
    ]);
    expect(observer.deleting()).toEqual([]);
    // Seen again later (created anew): a new track, not the deleted one's.
    at(6_000);
    await hooks.onHubCr(fleet, "ADDED", cr(pushed));
    at(8_000);
    await hooks.onHubCr(fleet, "DELETED", cr(pushed));
    expect(observer.finalized.at(-1)?.seconds).toBe(0);
  });

  it("new content: a CR's content changed when its desired hash is new, not when it repeats or is missing", async () => {
    const { fleet, observer, hooks, pushed, cr, tracks, key, at } = watched();
    const hashed = (hash: string | undefined, healthy = true): KubeObject => {
      const object = cr(pushed, healthy);
      return hash === undefined
        ? object
        : { ...object, metadata: { ...object.metadata, annotations: { [DESIRED_HASH_ANNOTATION]: hash } } };
    };
    await hooks.onHubCr(fleet, "ADDED", hashed(undefined));
    expect(tracks.get(key)?.changedAt).toBeUndefined();
    at(1_000);
    await hooks.onHubCr(fleet, "MODIFIED", hashed("h1"));
    expect(tracks.get(key)?.changedAt).toBe(1_001_000);
    at(2_000);
    await hooks.onHubCr(fleet, "MODIFIED", hashed("h1"));
    await hooks.onHubCr(fleet, "MODIFIED", hashed(undefined));
    expect(tracks.get(key)?.changedAt).toBe(1_001_000);
    // No rollout policy in the files: no wave to check, nothing skipped either.
    expect(observer.counts.waveChecksSkipped).toBe(0);
  });

  it("unhealthy since: the first unhealthy sighting, moved to when new content arrived while unhealthy", async () => {
    const { fleet, hooks, pushed, cr, tracks, key, at } = watched();
    const hashed = (hash: string, healthy: boolean): KubeObject => {
      const object = cr(pushed, healthy);
      return {
        ...object,
        metadata: { ...object.metadata, annotations: { [DESIRED_HASH_ANNOTATION]: hash } },
      };
    };
    await hooks.onHubCr(fleet, "ADDED", cr(pushed, false));
    at(1_000);
    await hooks.onHubCr(fleet, "MODIFIED", cr(pushed, false));
    expect(tracks.get(key)?.unhealthySince).toBe(1_000_000); // still the first sighting
    at(2_000);
    await hooks.onHubCr(fleet, "MODIFIED", hashed("h1", false));
    expect(tracks.get(key)?.unhealthySince).toBe(1_002_000); // new content: unhealthy from its arrival
    at(3_000);
    await hooks.onHubCr(fleet, "MODIFIED", hashed("h2", true));
    expect(tracks.get(key)?.unhealthySince).toBeUndefined();
  });
});

// ── Reading the hub and spokes: health, the first failing condition, anchors, a frozen spoke ─────────────

describe("the observer's reads", () => {
  const at = (status: object | undefined, generation: number | undefined = 2): KubeObject => ({
    apiVersion: OPERATOR_API_VERSION,
    kind: "KnativeServing",
    metadata: { name: "s", generation },
    ...(status ? { status } : {}),
  });
  const conditions = (...list: [string, string, string?, string?][]) =>
    list.map(([type, status, reason, message]) => ({ type, status, reason, message }));

  it("isHealthy: Ready and DeploymentsAvailable True on the CR's generation, nothing less", () => {
    const both = conditions(["Ready", "True"], ["DeploymentsAvailable", "True"]);
    expect(isHealthy(at({ observedGeneration: 2, conditions: both }))).toBe(true);
    expect(isHealthy(at({ observedGeneration: 1, conditions: both }))).toBe(false);
    expect(
      isHealthy(
        at({
          observedGeneration: 2,
          conditions: conditions(["Ready", "True"], ["DeploymentsAvailable", "False"]),
        }),
      ),
    ).toBe(false);
    expect(
      isHealthy(
        at({
          observedGeneration: 2,
          conditions: conditions(["Ready", "False"], ["DeploymentsAvailable", "True"]),
        }),
      ),
    ).toBe(false);
    // Another condition True says nothing of Ready or DeploymentsAvailable.
    expect(
      isHealthy(
        at({
          observedGeneration: 2,
          conditions: conditions(["Ready", "True"], ["DeploymentsAvailable", "False"], ["Other", "True"]),
        }),
      ),
    ).toBe(false);
    // No conditions at all: not healthy.
    expect(isHealthy(at({ observedGeneration: 2 }))).toBe(false);
  });

  it("notReady: names the first failing condition other than Ready, else Ready's, with its reason and message", () => {
    expect(
      notReady(
        at({
          conditions: conditions(
            ["Ready", "False", "R", "r"],
            ["DeploymentsAvailable", "True"],
            ["Other", "False", "O", "o"],
          ),
        }),
      ),
    ).toBe("Other=False O: o");
    expect(
      notReady(
        at({ conditions: conditions(["Ready", "False", "R", "r"], ["DeploymentsAvailable", "True"]) }),
      ),
    ).toBe("Ready=False R: r");
    expect(notReady(at({ conditions: conditions(["Ready", "Unknown", undefined, "m"]) }))).toBe(
      "Ready=Unknown : m",
    );
    expect(notReady(at({ conditions: conditions(["Ready", "False", "R"]) }))).toBe("Ready=False R: ");
    expect(notReady(at({ conditions: conditions(["Ready", "False", "R", "x".repeat(400)]) }))).toHaveLength(
      300,
    );
    expect(notReady(at({ conditions: conditions(["Ready", "True"]) }))).toBe("no condition is False");
    expect(notReady(at(undefined))).toBe("no condition is False");
  });

  it("anchorsOn: the spoke's knative-fleet root-owner ConfigMaps, each naming its CR's kind and name", async () => {
    const spoke = new FakeKube().serveKindsOf([{ apiVersion: "v1", kind: "ConfigMap", metadata: {} }]);
    const put = (name: string, labels: Record<string, string>) =>
      spoke.put({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, namespace: "ns", labels },
        data: {},
      });
    const managed = { [MANAGED_BY_LABEL]: MANAGED_BY };
    put("eventing-a-root-owner", {
      ...managed,
      [CR_KIND_LABEL]: "knativeeventing",
      [CR_NAME_LABEL]: "eventing-a",
    });
    put("serving-a-root-owner", {
      ...managed,
      [CR_KIND_LABEL]: "knativeserving",
      [CR_NAME_LABEL]: "serving-a",
    });
    put("nameless-root-owner", { ...managed });
    put("serving-a-config", { ...managed, [CR_KIND_LABEL]: "knativeserving", [CR_NAME_LABEL]: "serving-a" }); // not an anchor
    put("someone-root-owner", { [CR_KIND_LABEL]: "knativeserving", [CR_NAME_LABEL]: "theirs" }); // not ours
    const anchors = await anchorsOn(spoke.client);
    expect(anchors.sort((a, b) => a.configMap.localeCompare(b.configMap))).toEqual([
      { kind: "KnativeEventing", name: "eventing-a", namespace: "ns", configMap: "eventing-a-root-owner" },
      { kind: "KnativeServing", name: "", namespace: "ns", configMap: "nameless-root-owner" },
      { kind: "KnativeServing", name: "serving-a", namespace: "ns", configMap: "serving-a-root-owner" },
    ]);
  });

  it("withTimeout: a read that never answers (a frozen spoke) is undefined after its time", async () => {
    vi.useFakeTimers();
    try {
      let answer: string | undefined = "none yet";
      void withTimeout(new Promise<string>(() => {}), 50).then((value) => {
        answer = value;
      });
      await vi.advanceTimersByTimeAsync(49);
      expect(answer).toBe("none yet");
      await vi.advanceTimersByTimeAsync(1);
      expect(answer).toBeUndefined();
      expect(await withTimeout(Promise.reject(new Error("refused")))).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });
});
