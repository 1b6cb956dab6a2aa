import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { CoreEvent } from "../../../src/observability/events.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { adminClient, ensureNamespace } from "../../support/hub.ts";

// Events on a real namespaced object of the sandbox's hub, read back the way `kubectl describe` finds
// them: by field selector on the involved object.

const NAMESPACE = "events-test";
const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
let target: KubeObject;

beforeAll(async () => {
  await ensureNamespace(hub, NAMESPACE);
  target = await hub.apply({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "events-target", namespace: NAMESPACE },
    data: { purpose: "an object to record Events on" },
  });
});

afterAll(async () => {
  await hub.delete("v1", "Namespace", undefined, NAMESPACE);
});

/** kubectl describe's query: the Events whose involvedObject is the target. */
async function describeEvents(): Promise<CoreEvent[]> {
  const { name, uid } = target.metadata as { name: string; uid: string };
  const fieldSelector = [
    `involvedObject.name=${name}`,
    `involvedObject.namespace=${NAMESPACE}`,
    "involvedObject.kind=ConfigMap",
    `involvedObject.uid=${uid}`,
  ].join(",");
  const res = await hub.rest.request<{ items: CoreEvent[] }>({
    method: "GET",
    path: `/api/v1/namespaces/${NAMESPACE}/events`,
    query: { fieldSelector },
  });
  return res.body.items;
}

const newRecorder = () =>
  new EventRecorder({ client: hub, component: "knative-fleet", host: "replica-a", log: silentLogger });

/** The target as an involved object: what the service passes for a hub CR. */
const targetRef = () => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: target.metadata as { name: string; namespace: string; uid: string },
});

describe("event recorder on the hub", () => {
  it("records the same event twice as one Event with count 2; another message is another Event", async () => {
    const recorder = newRecorder();
    const involved = targetRef();
    await recorder.record(involved, "Warning", "ReconcileFailed", "spoke-1 unreachable");
    await recorder.record(involved, "Warning", "ReconcileFailed", "spoke-1 unreachable");
    await recorder.record(involved, "Normal", "Installed", "Knative Serving installed");

    const events = await describeEvents();
    expect(events).toHaveLength(2);
    const failed = events.find((e) => e.reason === "ReconcileFailed")!;
    expect(failed).toMatchObject({
      type: "Warning",
      message: "spoke-1 unreachable",
      count: 2,
      source: { component: "knative-fleet", host: "replica-a" },
      involvedObject: { apiVersion: "v1", kind: "ConfigMap", name: "events-target", namespace: NAMESPACE },
    });
    expect(failed.metadata.name).toMatch(/^events-target\.[0-9a-f]+$/);
    expect(Date.parse(failed.lastTimestamp)).toBeGreaterThanOrEqual(Date.parse(failed.firstTimestamp));
    expect(events.find((e) => e.reason === "Installed")).toMatchObject({ type: "Normal", count: 1 });
  });

  it("writes a repeat again, count carried over, when its Event was deleted (the API server's TTL)", async () => {
    const recorder = newRecorder();
    const involved = targetRef();
    await recorder.record(involved, "Normal", "Synced", "commit abc123 applied");
    await recorder.record(involved, "Normal", "Synced", "commit abc123 applied");
    const [synced] = (await describeEvents()).filter((e) => e.reason === "Synced");
    await hub.delete("v1", "Event", NAMESPACE, synced!.metadata.name);

    await recorder.record(involved, "Normal", "Synced", "commit abc123 applied");
    const again = (await describeEvents()).filter((e) => e.reason === "Synced");
    expect(again).toHaveLength(1);
    expect(again[0]).toMatchObject({ metadata: { name: synced!.metadata.name }, count: 3 });
  });
});
