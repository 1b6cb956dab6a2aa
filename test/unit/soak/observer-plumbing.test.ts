import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { closeSync, mkdtempSync, openSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { SoakFleet } from "../../soak/fleet.ts";
import { MARKER_KEY, type RolloutContent } from "../../soak/model.ts";
import { Observer, withTimeout } from "../../soak/observer.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { observedFleet, putRolloutState, SPOKE } from "./observed-fleet.ts";

// The observer's plumbing: its watch of the hub CRs and its timers (start, stop), its samples of the
// replicas' /metrics (ownership, resources) and of their descriptors in /proc, and the wave check's and the
// convergence check's larger cases (several fleets, several waves, an eventing install).

const T0 = 1_000_000;
const at = (ms: number) => vi.setSystemTime(T0 + ms);

type Answer = { status: number; body: string };

/** A replica's process as the observer reads it: /metrics (any other path is 404), its RSS, its pid. */
function stubProcess(
  pid: number,
  metrics: () => Answer | Promise<Answer>,
  more: { running?: boolean; rssKiB?: number } = {},
) {
  const calls: string[] = [];
  const process = {
    pid,
    running: more.running ?? true,
    get: async (path: string): Promise<Answer> => {
      calls.push(path);
      return path === "/metrics" ? metrics() : { status: 404, body: "404 page not found" };
    },
    rssKiB: () => more.rssKiB ?? 2_048,
  } as unknown as ServiceProcess;
  return { process, calls };
}

/** The fleet's replica slots, one per process (`soak-a-1`, `soak-a-2`, …; undefined: none running). */
function withReplicas(fleet: SoakFleet, processes: (ServiceProcess | undefined)[]): void {
  const slot = fleet.replicas[0]!;
  fleet.replicas.length = 0;
  for (const [i, process] of processes.entries())
    fleet.replicas.push({ ...slot, name: `${fleet.repo}-${i + 1}`, process, instances: [] });
}

const ok = (body: string): Answer => ({ status: 200, body });
const CLUSTER_1 = "soak-a-clusters/spoke-1";
const CLUSTER_2 = "soak-a-clusters/spoke-2";
/** A replica's /metrics: its leader gauge, a reconcile series per cluster it owns, and the hub's series. */
const ownership = (leader: number, clusters: string[]) =>
  [
    "# HELP knative_fleet_leader Whether this replica leads.",
    "# TYPE knative_fleet_leader gauge",
    `knative_fleet_leader ${leader}`,
    ...clusters.map((c) => `knative_fleet_reconcile_total{cluster="${c}",result="ok"} 3`),
    'knative_fleet_hub_requests_total{cluster="hub"} 12',
  ].join("\n");

/** What this process holds open now, read as an independent oracle for the observer's /proc reading. */
function descriptorsNow(): { fds: number; sockets: number } {
  const fds = readdirSync("/proc/self/fd");
  const sockets = fds.filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith("socket:[");
    } catch {
      return false;
    }
  }).length;
  return { fds: fds.length, sockets };
}

afterEach(() => vi.useRealTimers());

// ── start and stop: the hub CRs' watch, the timers ───────────────────────────────────────────────────────

describe("the observer's start and stop", () => {
  /**
   * The fleet's hub with watches, holding a KnativeServing and a KnativeEventing of the fleet's namespace
   * that no file declares and a CR of another namespace; `serving` is the fleet's declared CR, not there yet.
   */
  function onHub() {
    vi.useFakeTimers({ now: T0, toFake: ["Date"] });
    const observed = observedFleet();
    const { hub, fleet, pushed, cr } = observed;
    hub.serveWatches();
    const serving = cr(pushed);
    const named = (
      name: string,
      more: Partial<KubeObject["metadata"]> = {},
      kind = serving.kind,
    ): KubeObject => ({
      ...serving,
      kind,
      metadata: { ...serving.metadata, name, ...more },
    });
    fleet.pushedContents.add(`eventing|${pushed.version}|${pushed.marker}`);
    fleet.pushedContents.add(`serving-stray|${pushed.version}|${pushed.marker}`);
    hub.put(named(`eventing-${SPOKE}`, {}, "KnativeEventing"));
    hub.put(named("serving-stray"));
    hub.put(named("serving-elsewhere", { namespace: "soak-b" }));
    const started = () =>
      withTimeout(
        observed.observer.start().then(() => "synced"),
        2_000,
      );
    /** The declared CR appears at 1 s, heard through the watch. */
    const appears = async () => {
      at(1_000);
      hub.put(serving);
      await vi.waitFor(() => expect(observed.observer.counts.hubEvents).toBe(3));
    };
    return { ...observed, serving, started, appears };
  }

  it("start: has heard both kinds of CRs of the fleet's namespace when it returns, then hears each change", async () => {
    const { hub, observer, serving, started, appears } = onHub();
    try {
      expect(await started()).toBe("synced");
      expect(observer.counts.hubEvents).toBe(2);
      expect(hub.openWatches()).toBe(2);
      await appears();
      // start declared the fleet's files: the CR was declared since it appeared, its deletion a prune of it.
      at(2_000);
      hub.remove("KnativeServing", serving.metadata.name!);
      await vi.waitFor(() => expect(observer.finalized).toHaveLength(1));
      expect(observer.counts.hubEvents).toBe(4);
      expect(observer.violations.map((v) => v.invariant)).toEqual(["no-prune-of-declared"]);
    } finally {
      observer.stop();
    }
  });

  it("start: the fleet's declaration changes reach the observer (a CR its push drops may be deleted)", async () => {
    const { hub, fleet, observer, serving, started, appears } = onHub();
    try {
      expect(await started()).toBe("synced");
      await appears();
      at(2_000);
      fleet.onDeclarationChange("before", { ...fleet.files, serving: new Map() });
      at(3_000);
      hub.remove("KnativeServing", serving.metadata.name!);
      await vi.waitFor(() => expect(observer.finalized).toHaveLength(1));
      expect(observer.violations).toEqual([]);
    } finally {
      observer.stop();
    }
  });

  it("stop: every watch ends and no change is heard any more, so the process can exit", async () => {
    const { hub, observer, serving, started } = onHub();
    try {
      expect(await started()).toBe("synced");
      observer.stop();
      await vi.waitFor(() => expect(hub.openWatches()).toBe(0));
      hub.put(serving);
      hub.remove("KnativeServing", "serving-stray");
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(observer.counts.hubEvents).toBe(2);
      expect(observer.finalized).toEqual([]);
    } finally {
      observer.stop();
    }
  });

  it("timers: replicas every 2 s, spokes every 10 s, resources every 15 s; stop clears every timer", async () => {
    vi.useFakeTimers({ now: T0 });
    const { hub, observer } = observedFleet();
    hub.serveWatches();
    await observer.start();
    try {
      const tally = () => [
        observer.counts.ownershipSamples,
        observer.counts.spokeSamples,
        observer.spokeWatches.length,
      ];
      expect(tally()).toEqual([0, 0, 0]);
      await vi.advanceTimersByTimeAsync(1_999);
      expect(tally()).toEqual([0, 0, 0]);
      await vi.advanceTimersByTimeAsync(1);
      expect(tally()).toEqual([1, 0, 0]);
      await vi.advanceTimersByTimeAsync(8_000);
      expect(tally()).toEqual([5, 2, 0]); // the spoke's serving and eventing installs
      await vi.advanceTimersByTimeAsync(5_000);
      expect(tally()).toEqual([7, 2, 1]);
      expect(observer.spokeWatches).toEqual([{ at: T0 + 15_000, open: 0 }]);
      observer.stop();
      await vi.advanceTimersByTimeAsync(60_000);
      expect(tally()).toEqual([7, 2, 1]);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      observer.stop();
    }
  });

  it("timers: a sample still running is not started again; one that failed is tried at the next tick", async () => {
    vi.useFakeTimers({ now: T0 });
    const { hub, fleet, observer } = observedFleet();
    hub.serveWatches();
    const answers: { resolve(answer: Answer): void; reject(err: Error): void }[] = [];
    const replica = stubProcess(
      101,
      () => new Promise<Answer>((resolve, reject) => answers.push({ resolve, reject })),
    );
    withReplicas(fleet, [replica.process]);
    await observer.start();
    try {
      await vi.advanceTimersByTimeAsync(2_000);
      expect(answers).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(6_000); // 8 s: the first scrape has not answered
      expect(answers).toHaveLength(1);
      expect(observer.counts.ownershipSamples).toBe(0);
      answers[0]!.resolve(ok(ownership(1, [])));
      await vi.advanceTimersByTimeAsync(0);
      expect(observer.counts.ownershipSamples).toBe(1);
      await vi.advanceTimersByTimeAsync(1_000); // 9 s
      expect(answers).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1_000); // 10 s: scraped again
      expect(answers).toHaveLength(2);
      answers[1]!.reject(new Error("connection refused"));
      await vi.advanceTimersByTimeAsync(2_000); // 12 s: the failed one does not stop the next
      expect(answers).toHaveLength(3);
      answers[2]!.resolve(ok(ownership(1, [])));
      await vi.advanceTimersByTimeAsync(0);
      expect(observer.counts.ownershipSamples).toBe(2);
      expect(observer.violations).toEqual([]);
    } finally {
      observer.stop();
    }
  });
});

// ── The replicas' /metrics: ownership ────────────────────────────────────────────────────────────────────

describe("the observer's ownership samples", () => {
  it("one-leader, one-owner-per-cluster: catches two replicas that both lead and report a cluster at once", async () => {
    vi.useFakeTimers({ now: T0, toFake: ["Date"] });
    const { fleet, observer, hooks } = observedFleet();
    const first = stubProcess(101, () => ok(ownership(1, [CLUSTER_1])));
    const second = stubProcess(102, () => ok(ownership(1, [CLUSTER_1, CLUSTER_2])));
    withReplicas(fleet, [first.process, second.process]);
    await hooks.sampleReplicas();
    const [a, b] = ["soak-a-1 (pid 101)", "soak-a-2 (pid 102)"];
    expect(observer.violations.map((v) => [v.invariant, v.evidence, v.at])).toEqual([
      ["one-leader", `soak-a: ${a} and ${b} both lead (0 ms apart)`, T0],
      [
        "one-owner-per-cluster",
        `soak-a: ${a} and ${b} both report ${CLUSTER_1} (0 ms apart; ${a}: knative_fleet_reconcile_total; ${b}: knative_fleet_reconcile_total)`,
        T0,
      ],
    ]);
    expect(first.calls).toEqual(["/metrics"]);
    expect(observer.counts.ownershipSamples).toBe(1);
  });

  it("lets pass one leader and a follower, each with its own clusters", async () => {
    const { fleet, observer, hooks } = observedFleet();
    withReplicas(fleet, [
      stubProcess(101, () => ok(ownership(1, [CLUSTER_1]))).process,
      stubProcess(102, () => ok(ownership(0, [CLUSTER_2]))).process,
    ]);
    await hooks.sampleReplicas();
    await hooks.sampleReplicas();
    expect(observer.violations).toEqual([]);
    expect(observer.counts.ownershipSamples).toBe(2);
  });

  it("a replica whose /metrics answers 500, one not running, and a slot without a process add no sample", async () => {
    const { fleet, observer, hooks } = observedFleet();
    const claim = ownership(1, [CLUSTER_1]);
    const stopped = stubProcess(103, () => ok(claim), { running: false });
    withReplicas(fleet, [
      stubProcess(101, () => ok(claim)).process,
      stubProcess(102, () => ({ status: 500, body: claim })).process,
      stopped.process,
      undefined,
    ]);
    await hooks.sampleReplicas();
    expect(observer.violations).toEqual([]);
    expect(stopped.calls).toEqual([]);
    expect(observer.counts.ownershipSamples).toBe(1);
  });
});

// ── The replicas' /metrics and /proc: resources ─────────────────────────────────────────────────────────

describe("the observer's resource samples", () => {
  const RESOURCES = [
    `nodejs_heap_size_used_bytes ${1.5 * 2 ** 20}`,
    `nodejs_external_memory_bytes ${0.25 * 2 ** 20}`,
    'nodejs_active_resources{type="Immediate"} 7',
    'nodejs_active_resources{type="Timeout"} 5',
    "nodejs_active_handles_total 6",
  ].join("\n");

  it("spoke watches: counts the proxy's open requests that are watches", async () => {
    vi.useFakeTimers({ now: T0, toFake: ["Date"] });
    const { observer, hooks } = observedFleet({
      openSpokeRequests: () => [
        "GET /api/v1/namespaces/knative-serving/configmaps?watch=1&resourceVersion=5",
        "GET /apis/operator.knative.dev/v1beta1/knativeservings?labelSelector=a%3Db&watch=true",
        "GET /api/v1/configmaps?labelSelector=rewatch=1",
        "GET /api/v1/configmaps?watch=false",
        "GET /api/v1/configmaps",
      ],
    });
    await hooks.sampleResources();
    at(15_000);
    await hooks.sampleResources();
    expect(observer.spokeWatches).toEqual([
      { at: T0, open: 2 },
      { at: T0 + 15_000, open: 2 },
    ]);
  });

  it("a sample per replica process: memory, timers and handles from its /metrics, descriptors from /proc", async () => {
    vi.useFakeTimers({ now: T0, toFake: ["Date"] });
    const { fleet, observer, hooks } = observedFleet();
    const held: { fds: number; sockets: number }[] = [];
    const replica = stubProcess(
      process.pid,
      () => {
        held.push(descriptorsNow());
        return ok(RESOURCES);
      },
      { rssKiB: 3 * 1024 },
    );
    withReplicas(fleet, [replica.process]);
    // A file open under a socket's name is a file, not a socket.
    const dir = mkdtempSync(join(tmpdir(), "soak-observer-"));
    const file = openSync(join(dir, "socket:[1]"), "w");
    try {
      await hooks.sampleResources();
      at(15_000);
      await hooks.sampleResources();
    } finally {
      closeSync(file);
      rmSync(dir, { recursive: true });
    }
    const sample = (ms: number, i: number) => ({
      at: T0 + ms,
      rssMiB: 3,
      heapUsedMiB: 1.5,
      externalMiB: 0.25,
      timers: 5,
      handles: 6,
      ...held[i]!,
      hubConnections: 0,
    });
    expect(held).toHaveLength(2);
    expect([...observer.resources]).toEqual([
      [`soak-a-1 pid ${process.pid}`, [sample(0, 0), sample(15_000, 1)]],
    ]);
    expect(replica.calls).toEqual(["/metrics", "/metrics"]);
  });

  it("no sample from a replica whose /metrics answers 500, one not running, or one gone before /proc is read", async () => {
    const { fleet, observer, hooks } = observedFleet();
    const gone = spawnSync("true").pid;
    withReplicas(fleet, [
      stubProcess(process.pid, () => ({ status: 500, body: RESOURCES })).process,
      stubProcess(process.pid, () => ok(RESOURCES), { running: false }).process,
      stubProcess(gone, () => ok(RESOURCES)).process,
      undefined,
      stubProcess(process.pid, () => ok(RESOURCES)).process,
    ]);
    await hooks.sampleResources();
    expect([...observer.resources.keys()]).toEqual([`soak-a-5 pid ${process.pid}`]);
  });

  it("no sample from a /metrics whose series are ambiguous (two Timeout counts)", async () => {
    const { fleet, observer, hooks } = observedFleet();
    withReplicas(fleet, [
      stubProcess(process.pid, () => ok(`${RESOURCES}\nnodejs_active_resources{type="Timeout"} 9`)).process,
    ]);
    await hooks.sampleResources();
    expect(observer.resources.size).toBe(0);
  });
});

// ── /proc: descriptors and connections to the hub ───────────────────────────────────────────────────────

describe("the observer's descriptors of a replica", () => {
  /** A server on 127.0.0.1, on the first of `ports` that is free (0: any). */
  async function listen(ports: number[]): Promise<{ server: Server; port: number; accepted: Socket[] }> {
    for (const port of ports) {
      const server = createServer();
      const accepted: Socket[] = [];
      server.on("connection", (socket) => accepted.push(socket));
      try {
        server.listen(port, "127.0.0.1");
        await once(server, "listening");
        return { server, port: (server.address() as { port: number }).port, accepted };
      } catch {
        server.close();
      }
    }
    throw new Error("no free port");
  }
  const connect = async (port: number): Promise<Socket> => {
    const socket = createConnection({ port, host: "127.0.0.1", allowHalfOpen: true });
    await once(socket, "connect");
    return socket;
  };

  it("hubConnections: exactly the established connections to the hub's port, from the replica's own sockets", async () => {
    // A port below 0x1000 with letters in hex (/proc writes `0ABC`): padding and case both matter.
    const hub = await listen([0xabc, 0xbad, 0xcab, 0xdab, 0xfab, 0xace, 0xbed, 0xfed, 0xdec, 0xcaf]);
    const other = await listen([0]);
    const clients: Socket[] = [];
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      expect(hub.port).toBeLessThan(0x1000);
      // One the hub closed (CLOSE_WAIT here), two established, one to another port.
      hub.server.once("connection", (socket) => socket.destroy());
      const closing = await connect(hub.port);
      clients.push(closing);
      await once(closing, "end");
      clients.push(await connect(hub.port), await connect(hub.port), await connect(other.port));
      await vi.waitFor(() => expect(hub.accepted.length + other.accepted.length).toBe(4));

      const { fleet, observer, hooks } = observedFleet({ hubPort: hub.port });
      const held: { fds: number; sockets: number }[] = [];
      withReplicas(fleet, [
        stubProcess(process.pid, () => {
          held.push(descriptorsNow());
          return ok("");
        }).process,
        stubProcess(child.pid!, () => ok("")).process,
      ]);
      await hooks.sampleResources();
      const own = observer.resources.get(`soak-a-1 pid ${process.pid}`);
      expect(own).toEqual([expect.objectContaining({ ...held[0], hubConnections: 2 })]);
      // The two servers, the four clients, the three connections the servers hold.
      expect(held[0]!.sockets).toBeGreaterThanOrEqual(9);
      // Another process sees the same connection table, and holds none of them.
      expect(observer.resources.get(`soak-a-2 pid ${child.pid}`)).toEqual([
        expect.objectContaining({ sockets: 0, hubConnections: 0 }),
      ]);
    } finally {
      child.kill();
      for (const socket of [...clients, ...hub.accepted, ...other.accepted]) socket.destroy();
      hub.server.close();
      other.server.close();
    }
  });
});

// ── The wave check with several waves and fleets; convergence of an eventing install ───────────────────

describe("the observer's wave check, larger", () => {
  /**
   * Under `policy` (settled since T0, the rollout state on the hub without baselines), the observer's
   * fleet `a` serves `spokes`; its CR of each is declared.
   */
  function underPolicy(observed: ReturnType<typeof observedFleet>, spokes: string[], policy: RolloutContent) {
    const { hub, fleet, pushed, cr } = observed;
    fleet.files = { ...fleet.files, rollout: policy, serving: new Map(spokes.map((s) => [s, pushed])) };
    fleet.revisions.length = 0;
    fleet.revisions.push({ commit: "c0", at: T0, message: "a push", kind: "rollout", files: fleet.files });
    observed.observer.declare(fleet, "after");
    putRolloutState(hub, fleet, T0, {});
    /** The fleet's hub CR `name` on `spoke` with desired hash `hash`. */
    const content = (name: string, spoke: string, hash: string, healthy: boolean): KubeObject => {
      const object = cr(pushed, healthy);
      return {
        ...object,
        metadata: { ...object.metadata, name, annotations: { [DESIRED_HASH_ANNOTATION]: hash } },
        spec: { ...(object.spec as object), clusterProfileRef: { name: spoke } },
      };
    };
    return { content, key: (name: string) => `KnativeServing ${fleet.layout.namespace}/${name}` };
  }
  const waves = (observer: Observer) =>
    observer.violations.filter((v) => v.invariant === "waves-within-max-unavailable").map((v) => v.evidence);

  it("a percentage of the let-through CR's own wave: four CRs at 50% allow two, not three; the canary's CRs do not count", async () => {
    vi.useFakeTimers({ now: T0, toFake: ["Date"] });
    const observed = observedFleet();
    const { fleet, observer, hooks } = observed;
    const remaining = ["spoke-1", "spoke-2", "spoke-3", "spoke-4"];
    const { content, key } = underPolicy(observed, [...remaining, "spoke-9"], {
      canary: "spoke-9",
      maxUnavailable: "50%",
      soak: "1m",
    });
    at(1_000);
    for (const spoke of remaining)
      await hooks.onHubCr(fleet, "ADDED", content(`serving-${spoke}`, spoke, "h0", true));
    await hooks.onHubCr(fleet, "ADDED", content("serving-spoke-9", "spoke-9", "h0", true));
    await hooks.onHubCr(fleet, "ADDED", content("serving-spoke-9b", "spoke-9", "h0", true));
    at(60_000);
    await hooks.onHubCr(fleet, "MODIFIED", content("serving-spoke-1", "spoke-1", "a1", false));
    await hooks.onHubCr(fleet, "MODIFIED", content("serving-spoke-2", "spoke-2", "a1", false));
    expect(waves(observer)).toEqual([]);
    await hooks.onHubCr(fleet, "MODIFIED", content("serving-spoke-3", "spoke-3", "a1", false));
    const three = ["serving-spoke-1", "serving-spoke-2", "serving-spoke-3"].map(key).join(", ");
    expect(waves(observer)).toEqual([
      `${key("serving-spoke-3")} got new content while 3 changed CRs of wave remaining were unhealthy (maxUnavailable 2): ${three}`,
    ]);
  });

  it("counts the CRs of the let-through CR's fleet only, not another fleet's of a wave of the same name", async () => {
    vi.useFakeTimers({ now: T0, toFake: ["Date"] });
    const a = observedFleet();
    const b = observedFleet({ id: "b" });
    const observer = new Observer({
      hub: a.hub.client,
      fleets: [a.fleet, b.fleet],
      spokes: new Map(),
      hubPort: 0,
      openSpokeRequests: () => [],
      step: () => "a unit test",
    });
    const { onHubCr } = observer as unknown as {
      onHubCr(fleet: SoakFleet, event: string, object: KubeObject): Promise<void>;
    };
    const hear = (fleet: SoakFleet, event: string, object: KubeObject) =>
      onHubCr.call(observer, fleet, event, object);
    const { content, key } = underPolicy({ ...a, observer }, ["spoke-1", "spoke-2"], {
      canary: "spoke-9",
      maxUnavailable: "50%",
      soak: "1m",
    });
    at(1_000);
    for (const spoke of ["spoke-1", "spoke-2"]) {
      const theirs = content(`serving-${spoke}`, spoke, "b1", false);
      await hear(b.fleet, "ADDED", {
        ...theirs,
        metadata: { ...theirs.metadata, namespace: b.fleet.layout.namespace },
      });
    }
    at(60_000);
    await hear(a.fleet, "MODIFIED", content("serving-spoke-1", "spoke-1", "a1", false));
    await hear(a.fleet, "MODIFIED", content("serving-spoke-2", "spoke-2", "a1", false));
    expect(waves(observer)).toEqual([
      `${key("serving-spoke-2")} got new content while 2 changed CRs of wave remaining were unhealthy (maxUnavailable 1): ${key("serving-spoke-1")}, ${key("serving-spoke-2")}`,
    ]);
  });
});

describe("the observer's convergence of an eventing install", () => {
  it("reads the marker of a KnativeEventing's install in knative-eventing, not knative-serving", async () => {
    const { hub, spoke, fleet, observer, pushed, cr } = observedFleet();
    const placement = { version: pushed.version, marker: 7, rings: ["r1"] };
    fleet.files = { ...fleet.files, serving: new Map(), placement };
    const object = cr({ version: pushed.version, marker: 7 });
    hub.put({
      ...object,
      kind: "KnativeEventing",
      metadata: { ...object.metadata, name: `eventing-${SPOKE}` },
    });
    const marker = (namespace: string, value: number) =>
      spoke.put({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "config-observability", namespace },
        data: { [MARKER_KEY]: String(value) },
      });
    marker("knative-serving", 99); // another install's
    marker("knative-eventing", 7);
    expect(await observer.differences(fleet)).toEqual([]);
    marker("knative-eventing", 8);
    expect(await observer.differences(fleet)).toEqual([`${SPOKE} knative-eventing has marker 8, not 7`]);
  });
});

describe("the observer's reading of a hub CR", () => {
  it("spec-from-pushed-revision: a hub CR without a version is named as holding none", async () => {
    const { fleet, observer, hooks, pushed, cr } = observedFleet();
    const object = cr(pushed);
    await hooks.onHubCr(fleet, "ADDED", {
      ...object,
      spec: { ...(object.spec as object), version: undefined },
    });
    expect(observer.violations.map((v) => v.evidence)).toEqual([
      `hub CR KnativeServing ${fleet.layout.namespace}/serving-${SPOKE} holds version , marker ${pushed.marker}, which no push declared for it`,
    ]);
  });
});
