import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import type { KubeClient } from "../../../src/kube/client.ts";
import { KubeApiError, type RestRequest } from "../../../src/kube/rest.ts";
import { type CoreEvent, EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";

/**
 * The slice of the API the recorder uses (create by POST, merge patch), over an in-memory store of core/v1
 * Events. `failNext` makes the next write fail with that status; `expire` deletes Events as the TTL would.
 */
function fakeHub() {
  const events = new Map<string, CoreEvent>();
  const writes: string[] = [];
  let failNext: number | undefined;
  const failIfAsked = (method: string, path: string) => {
    if (failNext === undefined) return;
    const status = failNext;
    failNext = undefined;
    throw new KubeApiError(method, path, status, "Failed", "injected");
  };
  const client = {
    path: async (apiVersion: string, kind: string, namespace?: string, name?: string) => {
      expect([apiVersion, kind]).toEqual(["v1", "Event"]);
      return `/api/v1/namespaces/${namespace}/events${name ? `/${name}` : ""}`;
    },
    rest: {
      request: async (req: RestRequest) => {
        expect(req.method).toBe("POST");
        failIfAsked(req.method, req.path);
        const event = structuredClone(req.body) as CoreEvent;
        const key = `${event.metadata.namespace}/${event.metadata.name}`;
        if (events.has(key)) throw new KubeApiError("POST", req.path, 409, "AlreadyExists", key);
        events.set(key, event);
        writes.push(`create ${key}`);
        return { status: 201, body: event };
      },
    },
    mergePatch: async (apiVersion: string, kind: string, namespace: string, name: string, patch: object) => {
      expect([apiVersion, kind]).toEqual(["v1", "Event"]);
      failIfAsked("PATCH", name);
      const key = `${namespace}/${name}`;
      const event = events.get(key);
      if (!event) throw new KubeApiError("PATCH", key, 404, "NotFound", key);
      Object.assign(event, patch);
      writes.push(`patch ${key}`);
      return event;
    },
  } as unknown as KubeClient;
  return {
    client,
    events,
    writes,
    failNext: (status: number) => {
      failNext = status;
    },
    expire: () => events.clear(),
  };
}

/** A clock the test moves by hand. */
function manualClock(start = Date.parse("2025-05-01T10:00:00.250Z")) {
  let ms = start;
  return { now: () => new Date(ms), advance: (by: number) => (ms += by) };
}

const serving = {
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: { name: "serving", namespace: "team-a", uid: "0b1c" },
};

function recorder(client: KubeClient, now: () => Date) {
  return new EventRecorder({ client, component: "knative-fleet", host: "pod-1", log: silentLogger, now });
}

describe("event recorder", () => {
  it("writes no credential a message carried (a URL's user:password@)", async () => {
    const hub = fakeHub();
    await recorder(hub.client, manualClock().now).record(
      serving,
      "Warning",
      "ReconcileFailed",
      "cannot fetch manifests from https://deploy:s3cret@charts.example/serving.yaml: 401",
    );
    expect([...hub.events.values()].map((e) => e.message)).toEqual([
      "cannot fetch manifests from https://<redacted>@charts.example/serving.yaml: 401",
    ]);
  });

  it("creates a core/v1 Event that kubectl describe lists for the object", async () => {
    const hub = fakeHub();
    const clock = manualClock();
    await recorder(hub.client, clock.now).record(
      serving,
      "Normal",
      "Installed",
      "Knative Serving 1.18 installed",
    );
    expect([...hub.events.values()]).toEqual([
      {
        apiVersion: "v1",
        kind: "Event",
        metadata: {
          name: `serving.${(BigInt(clock.now().getTime()) * 1_000_000n).toString(16)}`,
          namespace: "team-a",
        },
        involvedObject: {
          apiVersion: "operator.knative.dev/v1beta1",
          kind: "KnativeServing",
          name: "serving",
          namespace: "team-a",
          uid: "0b1c",
        },
        type: "Normal",
        reason: "Installed",
        message: "Knative Serving 1.18 installed",
        count: 1,
        firstTimestamp: "2025-05-01T10:00:00Z",
        lastTimestamp: "2025-05-01T10:00:00Z",
        source: { component: "knative-fleet", host: "pod-1" },
        reportingComponent: "knative-fleet",
        reportingInstance: "pod-1",
      },
    ]);
  });

  it("counts a repeat within 10 minutes on the existing Event, and starts a new one after", async () => {
    const hub = fakeHub();
    const clock = manualClock();
    const events = recorder(hub.client, clock.now);
    await events.record(serving, "Warning", "ReconcileFailed", "spoke unreachable");
    clock.advance(9 * 60_000);
    await events.record(serving, "Warning", "ReconcileFailed", "spoke unreachable");
    clock.advance(9 * 60_000); // 18 minutes after the first, 9 after the last: still a repeat
    await events.record(serving, "Warning", "ReconcileFailed", "spoke unreachable");
    expect(hub.events.size).toBe(1);
    const [event] = hub.events.values();
    expect(event).toMatchObject({
      count: 3,
      firstTimestamp: "2025-05-01T10:00:00Z",
      lastTimestamp: "2025-05-01T10:18:00Z",
    });
    clock.advance(10 * 60_000 + 1);
    await events.record(serving, "Warning", "ReconcileFailed", "spoke unreachable");
    expect(hub.events.size).toBe(2);
    expect([...hub.events.values()].map((e) => e.count)).toEqual([3, 1]);
  });

  it("keeps Events apart by object, type, reason and message", async () => {
    const hub = fakeHub();
    const events = recorder(hub.client, manualClock().now);
    const other = { ...serving, metadata: { ...serving.metadata, name: "serving-2", uid: "9f" } };
    await events.record(serving, "Warning", "ReconcileFailed", "a");
    await events.record(serving, "Warning", "ReconcileFailed", "b");
    await events.record(serving, "Normal", "ReconcileFailed", "a");
    await events.record(serving, "Warning", "Other", "a");
    await events.record(other, "Warning", "ReconcileFailed", "a");
    await events.record(serving, "Warning", "ReconcileFailed", "a");
    expect(hub.writes.filter((w) => w.startsWith("create"))).toHaveLength(5);
    expect([...hub.events.values()].map((e) => e.count)).toEqual([2, 1, 1, 1, 1]);
  });

  it("serializes concurrent repeats: one Event, every occurrence counted", async () => {
    const hub = fakeHub();
    const events = recorder(hub.client, manualClock().now);
    await Promise.all(Array.from({ length: 5 }, () => events.record(serving, "Normal", "Synced", "same")));
    expect(hub.events.size).toBe(1);
    expect([...hub.events.values()][0]!.count).toBe(5);
  });

  it("combines the 10th and later distinct messages for one reason into a single Event", async () => {
    const hub = fakeHub();
    const events = recorder(hub.client, manualClock().now);
    for (let i = 1; i <= 14; i++) await events.record(serving, "Warning", "ReconcileFailed", `attempt ${i}`);
    expect(hub.events.size).toBe(10);
    const combined = [...hub.events.values()].filter((e) => e.message.startsWith("(combined"));
    expect(combined).toHaveLength(1);
    expect(combined[0]).toMatchObject({
      count: 5,
      message: "(combined from similar events): attempt 14",
    });
  });

  it("holds what the last ten minutes wrote: a CR failing with a new message every time, for hours, costs no more", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const heapMiB = () => {
      gc();
      return process.memoryUsage().heapUsed / 2 ** 20;
    };
    const hub = fakeHub();
    const clock = manualClock();
    const events = recorder(hub.client, clock.now);
    const padding = "x".repeat(900);
    const before = heapMiB();
    // One CR, a new message every 5 minutes (as often as the spam filter lets one object write) for five
    // weeks: its aggregation window never closes.
    for (let i = 0; i < 10_000; i++) {
      clock.advance(5 * 60_000);
      await events.record(serving, "Warning", "ReconcileFailed", `attempt ${i} ${padding}`);
    }
    const failing = heapMiB() - before;
    // 4,000 CRs with one Event each, then 11 minutes later one more: the first 4,000 are forgotten.
    for (let i = 0; i < 4_000; i++) {
      await events.record(
        { ...serving, metadata: { ...serving.metadata, name: `serving-${i}`, uid: `u${i}` } },
        "Normal",
        "DriftCorrected",
        `restored 1 object(s) ${padding}`,
      );
    }
    const full = heapMiB() - before;
    clock.advance(11 * 60_000);
    await events.record(serving, "Normal", "DriftCorrected", "restored 1 object(s)");
    const after = heapMiB() - before;
    console.log(
      `event recorder heap: +${failing.toFixed(1)} MiB after 10,000 distinct messages of one CR; ` +
        `+${full.toFixed(1)} MiB with 4,000 CRs' Events; +${after.toFixed(1)} MiB once they were 11 minutes old`,
    );
    expect(failing).toBeLessThan(2); // 10,000 messages of ~1 KB kept: 10 MiB or more
    expect(full - after).toBeGreaterThan(3); // the 4,000 Events' entries (~1 KB keys) let go
  });

  it("spam filter (client-go's): an object gets 25 writes at once, then one per 5 minutes; other objects keep theirs", async () => {
    const hub = fakeHub();
    const clock = manualClock();
    const events = recorder(hub.client, clock.now);
    for (let i = 0; i < 40; i++) await events.record(serving, "Warning", "ReconcileFailed", "cannot reach");
    expect(hub.writes).toHaveLength(25);
    expect([...hub.events.values()].map((e) => e.count)).toEqual([25]);
    const other = { ...serving, metadata: { ...serving.metadata, name: "other", uid: "0b1d" } };
    await events.record(other, "Warning", "ReconcileFailed", "cannot reach");
    expect(hub.writes).toHaveLength(26);
    clock.advance(4 * 60_000);
    await events.record(serving, "Warning", "ReconcileFailed", "cannot reach");
    expect(hub.writes).toHaveLength(26); // not a whole token yet
    clock.advance(60_000);
    await events.record(serving, "Warning", "ReconcileFailed", "cannot reach");
    await events.record(serving, "Warning", "ReconcileFailed", "cannot reach");
    expect(hub.writes).toHaveLength(27); // one token in five minutes
    expect([...hub.events.values()].map((e) => e.count)).toEqual([26, 1]);
  });

  it("writes a repeat again, count carried over, when the API server's TTL removed the Event", async () => {
    const hub = fakeHub();
    const clock = manualClock();
    const events = recorder(hub.client, clock.now);
    await events.record(serving, "Normal", "Synced", "same");
    await events.record(serving, "Normal", "Synced", "same");
    const [name] = hub.events.keys();
    hub.expire();
    clock.advance(60_000);
    await events.record(serving, "Normal", "Synced", "same");
    expect([...hub.events.keys()]).toEqual([name]);
    expect(hub.events.get(name!)).toMatchObject({
      count: 3,
      firstTimestamp: "2025-05-01T10:00:00Z",
      lastTimestamp: "2025-05-01T10:01:00Z",
    });
  });

  it("never throws: a failed write is logged, and the next occurrence tries again", async () => {
    const hub = fakeHub();
    const events = recorder(hub.client, manualClock().now);
    hub.failNext(403);
    await expect(events.record(serving, "Normal", "Synced", "same")).resolves.toBeUndefined();
    expect(hub.events.size).toBe(0);
    await events.record(serving, "Normal", "Synced", "same");
    expect([...hub.events.values()][0]!.count).toBe(1);
    hub.failNext(500);
    await expect(events.record(serving, "Normal", "Synced", "same")).resolves.toBeUndefined();
    await events.record(serving, "Normal", "Synced", "same");
    expect([...hub.events.values()][0]!.count).toBe(2);
  });

  it("puts Events on a cluster-scoped object in the default namespace, and cuts long messages", async () => {
    const hub = fakeHub();
    const events = recorder(hub.client, manualClock().now);
    const node = { apiVersion: "v1", kind: "Node", metadata: { name: "node-1" } };
    await events.record(node, "Warning", "Dump", "x".repeat(5000));
    const [event] = hub.events.values();
    expect(event!.metadata.namespace).toBe("default");
    expect(event!.involvedObject).toEqual({ apiVersion: "v1", kind: "Node", name: "node-1" });
    expect(event!.message).toHaveLength(1024);
    expect(event!.message.endsWith("...")).toBe(true);
  });
});
