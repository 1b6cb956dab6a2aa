import { describe, expect, it } from "vitest";
import { GitSourceError } from "../../../src/source/errors.ts";
import type { Snapshot } from "../../../src/source/git-source.ts";
import { Poller, type PollerOptions } from "../../../src/source/poller.ts";
import { fastBackoff, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

/** A poller whose snapshots and errors the test can inspect. */
function recordingPoller(source: PollerOptions["source"]) {
  const snapshots: Snapshot[] = [];
  const errors: unknown[] = [];
  const poller = new Poller({
    source,
    backoff: fastBackoff,
    onSnapshot: (snapshot) => {
      snapshots.push(snapshot);
    },
    onError: (error) => errors.push(error),
  });
  return { poller, snapshots, errors };
}

describe("failures", () => {
  it("retries through a few 500s and then delivers the snapshot", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots, errors } = recordingPoller(source);

    server.failNext(2);
    expect(await poller.syncNow()).toBe("emitted");
    expect(snapshots.map((s) => s.commit)).toEqual([head]);
    expect(errors).toEqual([]);
    expect(server.requests.filter((r) => r.status === 500)).toHaveLength(2);
  });

  it("gives up on a failing server with a typed error and emits nothing, never an empty snapshot", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots, errors } = recordingPoller(source);

    server.failNext(1_000, 503);
    expect(await poller.syncNow()).toBe("failed");
    expect(snapshots).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(GitSourceError);
    expect(errors[0]).toMatchObject({ kind: "network", operation: "head" });
    expect(server.requests).toHaveLength(fastBackoff.attempts);
    await expect(source.sync()).rejects.toMatchObject({ kind: "network", operation: "fetch" });
  });

  it("fails typed while the server is down, keeps the last snapshot, and recovers when it is back", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots, errors } = recordingPoller(source);
    expect(await poller.syncNow()).toBe("emitted");

    await server.stop();
    const pushed = await server.pushChange("fleet", { files: { "clusters/a.yaml": "a: 1\n" }, message: "a" });
    expect(await poller.syncNow()).toBe("failed");
    await expect(source.sync()).rejects.toMatchObject({ kind: "network" });
    expect(errors).toEqual([expect.objectContaining({ kind: "network" })]);
    expect(snapshots.map((s) => s.commit)).toEqual([head]);

    await server.start();
    expect(await poller.syncNow()).toBe("emitted");
    expect(snapshots.map((s) => s.commit)).toEqual([head, pushed]);
  });

  it("times out a server that does not answer within the deadline", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"), { timeoutMs: 200 });
    server.setDelay(1_000);

    const started = Date.now();
    await expect(source.headOf()).rejects.toMatchObject({ kind: "timeout", operation: "head" });
    await expect(source.sync()).rejects.toMatchObject({ kind: "timeout", operation: "fetch" });
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});
