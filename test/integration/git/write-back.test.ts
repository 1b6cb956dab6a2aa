import { describe, expect, it } from "vitest";
import { GitSourceError } from "../../../src/source/errors.ts";
import type { CommitBase } from "../../../src/source/git-source.ts";
import type { RecordedRequest } from "../../support/git-server.ts";
import { bot, fastBackoff, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

const receivePackDiscovery = (r: RecordedRequest) => r.method === "GET" && r.service === "git-receive-pack";
const receivePackUpload = (r: RecordedRequest) => r.method === "POST" && r.service === "git-receive-pack";

describe("commitAndPush", () => {
  it("commits the status on top of the branch head and pushes it", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));

    const result = await source.commitAndPush({
      files: new Map<string, string | null>([
        ["status/prod.yaml", "ready: false\n"],
        ["status/eu/west.yaml", "ready: true\n"],
      ]),
      message: "Status of 2 clusters",
      author: bot,
    });

    expect(result).toMatchObject({ pushed: true, attempts: 1 });
    expect(await server.headOf("fleet")).toBe(result.commit);
    expect((await server.log("fleet")).map((e) => [e.subject, e.authorName])).toEqual([
      ["Status of 2 clusters", bot.name],
      ["Initial fleet", "Ada Operator"],
    ]);
    expect((await server.log("fleet"))[1]!.commit).toBe(head);
    expect(await server.readFile("fleet", "main", "status/eu/west.yaml")).toBe("ready: true\n");
    expect(await server.readFile("fleet", "main", "clusters/prod.yaml")).toBe(
      fleetFiles["clusters/prod.yaml"],
    );
  });

  it("commits nothing when the content is unchanged", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));

    server.resetRequests();
    const result = await source.commitAndPush({
      files: new Map([["status/prod.yaml", fleetFiles["status/prod.yaml"]!]]),
      message: "Status",
      author: bot,
    });
    expect(result).toEqual({ pushed: false, commit: head, attempts: 1 });
    expect(await server.headOf("fleet")).toBe(head);
    expect(server.requests.filter((r) => r.service === "git-receive-pack")).toEqual([]);
  });

  it.each([
    ["before the push starts (refused by the client)", receivePackDiscovery],
    ["while the pack is in flight (refused by the server)", receivePackUpload],
  ])("keeps a person's push that lands %s, and rebuilds on it", async (_when, moment) => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    let human = "";
    server.beforeRequest(moment, async () => {
      human = await server.pushChange("fleet", {
        files: { "clusters/prod.yaml": "name: prod\nserving: 1.21\n" },
        message: "Upgrade prod",
      });
    });

    const bases: { commit: string; prod: string | null }[] = [];
    const result = await source.commitAndPush({
      files: async (base: CommitBase) => {
        const prod = await base.readFile("clusters/prod.yaml");
        bases.push({ commit: base.commit, prod });
        return new Map([["status/prod.yaml", `observed: ${prod?.includes("1.21") ? "1.21" : "1.20"}\n`]]);
      },
      message: "Status",
      author: bot,
    });

    expect(result).toMatchObject({ pushed: true, attempts: 2 });
    expect(bases[1]).toEqual({ commit: human, prod: "name: prod\nserving: 1.21\n" });
    const log = await server.log("fleet");
    expect(log.map((e) => e.subject)).toEqual(["Status", "Upgrade prod", "Initial fleet"]);
    expect(log[1]!.commit).toBe(human);
    expect(await server.readFile("fleet", "main", "status/prod.yaml")).toBe("observed: 1.21\n");
  });

  it("gives up with a typed rejection when every attempt loses the race, losing no one's commit", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    for (let i = 0; i < fastBackoff.attempts; i++) {
      server.beforeRequest(receivePackUpload, async () => {
        await server.pushChange("fleet", {
          files: { [`clusters/c${i}.yaml`]: `n: ${i}\n` },
          message: `c${i}`,
        });
      });
    }

    const error = await source
      .commitAndPush({ files: new Map([["status/prod.yaml", "x\n"]]), message: "Status", author: bot })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GitSourceError);
    expect(error).toMatchObject({ kind: "rejected", operation: "push" });
    expect((await server.log("fleet")).map((e) => e.subject)).toEqual(["c2", "c1", "c0", "Initial fleet"]);
  });

  it("writes to a separate branch, created from the source branch when missing", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));

    const first = await source.commitAndPush({
      files: new Map([["status/prod.yaml", "one\n"]]),
      message: "Status 1",
      author: bot,
      branch: "fleet-status",
    });
    const second = await source.commitAndPush({
      files: new Map([["status/prod.yaml", "two\n"]]),
      message: "Status 2",
      author: bot,
      branch: "fleet-status",
    });

    expect(await server.headOf("fleet", "main")).toBe(head);
    expect(await server.headOf("fleet", "fleet-status")).toBe(second.commit);
    const log = await server.log("fleet", "fleet-status");
    expect(log.map((e) => e.commit)).toEqual([second.commit, first.commit, head]);
    expect(await server.readFile("fleet", "fleet-status", "status/prod.yaml")).toBe("two\n");
  });
});
