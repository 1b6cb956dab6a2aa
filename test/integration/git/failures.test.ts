import { describe, expect, it } from "vitest";
import { GitSourceError } from "../../../src/source/errors.ts";
import type { Snapshot } from "../../../src/source/git-source.ts";
import { Poller, type PollerOptions } from "../../../src/source/poller.ts";
import { bot, fastBackoff, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

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

  it("a fetch or push answered 500 fails typed and leaves nothing uncaught behind it", async () => {
    // isomorphic-git leaves a failed POST's error page unread; ending the operation then destroyed its
    // request after Node had handed the keep-alive socket back, and the abort surfaced on the socket as an
    // uncaught AbortError (found by the soak: "uncaught error; the service goes on" as git began to fail).
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", record).on("unhandledRejection", record);
    try {
      const server = await gitServerForTest();
      await server.createRepo("fleet", fleetFiles);
      const { source } = await sourceForTest(server.url("fleet"));
      await source.sync();
      const pushed = await server.pushChange("fleet", {
        files: { "clusters/a.yaml": "a: 1\n" },
        message: "a",
      });
      for (const service of ["git-upload-pack", "git-receive-pack"])
        server.beforeRequest(
          (request) => request.method === "POST" && request.service === service,
          async () => server.failNext(1, 500),
        );
      await expect(source.sync()).rejects.toMatchObject({ operation: "fetch", message: /HTTP 500/ });
      // The push met its 500 and was tried again (fastBackoff): it lands on the person's commit.
      const status = new Map([["status/prod.yaml", "ready: false\n"]]);
      const result = await source.commitAndPush({ files: status, message: "status", author: bot });
      expect(result).toMatchObject({ pushed: true, attempts: 2 });
      expect((await server.log("fleet"))[1]?.commit).toBe(pushed);
      const failed = server.requests.filter((r) => r.status === 500).map((r) => `${r.method} ${r.service}`);
      expect(failed).toEqual(["POST git-upload-pack", "POST git-receive-pack"]);
      await new Promise((resolve) => setTimeout(resolve, 200)); // an abort's error is emitted a tick later
    } finally {
      process.off("uncaughtException", record).off("unhandledRejection", record);
    }
    expect(uncaught.map(String)).toEqual([]);
  });
});
