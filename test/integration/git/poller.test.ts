import { describe, expect, it, onTestFinished, vi } from "vitest";
import type { Snapshot } from "../../../src/source/git-source.ts";
import { Poller, type PollerOptions } from "../../../src/source/poller.ts";
import { bot, fastBackoff, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

function recordingPoller(options: Partial<PollerOptions> & Pick<PollerOptions, "source">) {
  const snapshots: Snapshot[] = [];
  const errors: unknown[] = [];
  const poller = new Poller({
    backoff: fastBackoff,
    onSnapshot: (snapshot) => {
      snapshots.push(snapshot);
    },
    onError: (error) => errors.push(error),
    ...options,
  });
  onTestFinished(() => poller.stop());
  return { poller, snapshots, errors };
}

describe("Poller", () => {
  it("emits the first snapshot, then only asks for the head while it has not moved", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots } = recordingPoller({ source });

    expect(await poller.syncNow()).toBe("emitted");
    expect(snapshots.map((s) => s.commit)).toEqual([head]);

    server.resetRequests();
    expect(await poller.syncNow()).toBe("head-unchanged");
    expect(await poller.syncNow()).toBe("head-unchanged");
    // Two ls-refs exchanges (protocol v2) and not one v1 pack negotiation: nothing was fetched.
    expect(server.requests).toHaveLength(4);
    expect(server.requests.every((r) => r.gitProtocol === "version=2")).toBe(true);
    expect(snapshots).toHaveLength(1);
  });

  it("fetches and emits when a person changes the fleet", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots } = recordingPoller({ source });
    await poller.syncNow();

    const pushed = await server.pushChange("fleet", {
      files: { "clusters/us.yaml": "name: us\n" },
      message: "us",
    });
    expect(await poller.syncNow()).toBe("emitted");
    expect(snapshots[1]!.commit).toBe(pushed);
    expect(snapshots[1]!.files.map((f) => f.path)).toContain("clusters/us.yaml");
  });

  it("does not emit for the bot's own status commit", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots } = recordingPoller({ source });
    await poller.syncNow();

    const status = await source.commitAndPush({
      files: new Map([["status/prod.yaml", "ready: false\n"]]),
      message: "Status",
      author: bot,
    });
    expect(status.pushed).toBe(true);
    expect(await poller.syncNow()).toBe("content-unchanged");
    expect(await poller.syncNow()).toBe("head-unchanged");
    expect(snapshots).toHaveLength(1);
  });

  it("names a change by the person's commit, under the status commits that landed on it before the poll", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots } = recordingPoller({ source });
    await poller.syncNow();

    const pushed = await server.pushChange("fleet", {
      files: { "clusters/us.yaml": "name: us\n" },
      message: "us",
    });
    // Two status commits and a README edit on top, all before the next poll: same fleet content.
    for (const [path, text] of [
      ["status/prod.yaml", "ready: false\n"],
      ["status/prod.yaml", "ready: true\n"],
    ] as const) {
      await source.commitAndPush({ files: new Map([[path, text]]), message: "Status", author: bot });
    }
    const head = await server.pushChange("fleet", {
      files: { "docs/notes.md": "a note\n" },
      message: "docs",
    });
    expect(await poller.syncNow()).toBe("emitted");
    expect(snapshots[1]!.commit).toBe(pushed);
    expect(snapshots[1]!.commit).not.toBe(head);
    // A revert to the content of an earlier commit is named by the revert, not the earlier commit.
    const reverted = await server.pushChange("fleet", {
      files: { "clusters/us.yaml": null },
      message: "revert us",
    });
    await source.commitAndPush({
      files: new Map([["status/prod.yaml", "ready: 1\n"]]),
      message: "Status",
      author: bot,
    });
    expect(await poller.syncNow()).toBe("emitted");
    expect(snapshots[2]!.commit).toBe(reverted);
    expect(snapshots[2]!.digest).toBe(snapshots[0]!.digest);
  });

  it("emits a snapshot again when the caller failed to take it", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const onSnapshot = vi
      .fn()
      .mockRejectedValueOnce(new Error("hub unreachable"))
      .mockResolvedValue(undefined);
    const fetches: { durationMs: number; error?: string }[] = [];
    const { poller, errors } = recordingPoller({ source, onSnapshot, onFetched: (f) => fetches.push(f) });

    expect(await poller.syncNow()).toBe("failed");
    expect(errors).toEqual([new Error("hub unreachable")]);
    // The fetch itself succeeded, and is timed as one; the caller's failure is no git error.
    expect(fetches).toEqual([{ durationMs: expect.any(Number) }]);
    expect(fetches[0]!.durationMs).toBeGreaterThan(0);
    expect(await poller.syncNow()).toBe("emitted");
    expect(onSnapshot.mock.calls.map(([s]) => (s as Snapshot).commit)).toEqual([head, head]);
  });

  it("folds triggers that arrive during a poll into one poll right after it, missing no push", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const headOf = vi.spyOn(source, "headOf");
    let pushed = "";
    let triggeredDuringPoll: Promise<unknown>[] = [];
    const snapshots: string[] = [];
    const { poller } = recordingPoller({
      source,
      onSnapshot: async (snapshot) => {
        snapshots.push(snapshot.commit);
        if (triggeredDuringPoll.length > 0) return;
        // A person pushes and three webhooks arrive while the first poll is still busy.
        pushed = await server.pushChange("fleet", { files: { "clusters/a.yaml": "a\n" }, message: "a" });
        triggeredDuringPoll = [poller.syncNow(), poller.syncNow(), poller.syncNow()];
      },
    });

    expect(await poller.syncNow()).toBe("emitted");
    expect(await Promise.all(triggeredDuringPoll)).toEqual(["emitted", "emitted", "emitted"]);
    expect(headOf).toHaveBeenCalledTimes(2);
    expect(snapshots).toEqual([head, pushed]);
  });

  it("polls on its cron schedule once started, and stops", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const { poller, snapshots } = recordingPoller({ source, schedule: "* * * * * *", jitterMs: 0 });

    poller.start();
    await vi.waitFor(() => expect(snapshots.map((s) => s.commit)).toEqual([head]), { timeout: 5_000 });
    const pushed = await server.pushChange("fleet", { files: { "clusters/a.yaml": "a\n" }, message: "a" });
    await vi.waitFor(() => expect(snapshots.map((s) => s.commit)).toEqual([head, pushed]), {
      timeout: 5_000,
    });

    await poller.stop();
    server.resetRequests();
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(server.requests).toEqual([]);
  });

  it("refuses an invalid schedule", () => {
    expect(
      () =>
        new Poller({
          source: {} as PollerOptions["source"],
          schedule: "every minute",
          onSnapshot() {},
          onError() {},
        }),
    ).toThrow('invalid poll schedule "every minute"');
  });
});
