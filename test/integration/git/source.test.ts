import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import git from "isomorphic-git";
import { describe, expect, it } from "vitest";
import { MAX_FLEET_FILE_BYTES } from "../../../src/fleet/file-text.ts";
import { GitSourceError } from "../../../src/source/errors.ts";
import type { GitServer } from "../../support/git-server.ts";
import { bot, fleetFiles, gitServerForTest, sourceForTest } from "./fixtures.ts";

const execFileAsync = promisify(execFile);

describe("GitSource against git http-backend", () => {
  it("clones one branch at depth 1 and reads the fleet files of that commit", async () => {
    const server = await gitServerForTest();
    const first = await server.createRepo("fleet", fleetFiles);
    const second = await server.pushChange("fleet", {
      files: { "clusters/staging.yaml": "name: staging\n" },
      message: "Add staging",
    });
    const dev = await server.pushChange("fleet", {
      files: { "clusters/dev.yaml": "name: dev\n" },
      message: "Dev only",
      branch: "dev",
    });
    const { source, gitdir } = await sourceForTest(server.url("fleet"));

    const snapshot = await source.sync();

    expect(snapshot.commit).toBe(second);
    expect(snapshot.files).toEqual([
      { path: "clusters/eu/west.yml", text: fleetFiles["clusters/eu/west.yml"] },
      { path: "clusters/prod.yaml", text: fleetFiles["clusters/prod.yaml"] },
      { path: "clusters/staging.yaml", text: "name: staging\n" },
    ]);
    // Depth 1: the head is a shallow boundary and its parent was never fetched; nor was the other branch.
    const cache = await gitdir();
    expect((await readFile(join(cache, "shallow"), "utf8")).trim()).toBe(second);
    await expect(git.readCommit({ fs, gitdir: cache, oid: first })).rejects.toThrow();
    await expect(git.readCommit({ fs, gitdir: cache, oid: dev })).rejects.toThrow();
    // Real git agrees: one commit, and the objects isomorphic-git wrote are sound.
    const log = await execFileAsync("git", ["--git-dir", cache, "rev-list", "refs/heads/main"]);
    expect(log.stdout.trim()).toBe(second);
    await execFileAsync("git", ["--git-dir", cache, "fsck", "--no-dangling"]);
  });

  it("reads an earlier commit of the branch it never fetched, deepening the shallow history (a rollout revert)", async () => {
    const server = await gitServerForTest();
    const first = await server.createRepo("fleet", fleetFiles);
    for (let i = 0; i < 55; i++) {
      await server.pushChange("fleet", {
        files: { "clusters/prod.yaml": `name: prod\nrev: ${i}\n` },
        message: `rev ${i}`,
      });
    }
    const unrelated = await server.pushChange("fleet", {
      files: { "clusters/dev.yaml": "name: dev\n" },
      message: "Dev only",
      branch: "dev",
    });
    // A fresh cache (a restarted pod): only the head, at depth 1.
    const { source, gitdir } = await sourceForTest(server.url("fleet"));
    await source.sync();
    await expect(git.readCommit({ fs, gitdir: await gitdir(), oid: first })).rejects.toThrow();

    const earlier = await source.snapshotAt(first);
    expect(earlier.commit).toBe(first);
    expect(earlier.files.find((f) => f.path === "clusters/prod.yaml")?.text).toBe(
      fleetFiles["clusters/prod.yaml"],
    );
    // The next poll still reads the head, and the cache stays sound for real git.
    expect((await source.sync()).files.find((f) => f.path === "clusters/prod.yaml")?.text).toContain(
      "rev: 54",
    );
    await execFileAsync("git", ["--git-dir", await gitdir(), "fsck", "--no-dangling"]);
    // A commit that is not on the branch is refused, by name.
    await expect(source.snapshotAt(unrelated)).rejects.toThrow(/is not in the history of branch "main"/);
  });

  it("fetches what a person pushed: added, changed and deleted files", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const before = await source.sync();

    const pushed = await server.pushChange("fleet", {
      files: {
        "clusters/prod.yaml": "name: prod\nserving: 1.21\n",
        "clusters/eu/west.yml": null,
        "clusters/us.yaml": "name: us\n",
      },
      message: "Upgrade prod, move west to us",
    });
    const after = await source.sync();

    expect(after.commit).toBe(pushed);
    expect(after.files.map((f) => f.path)).toEqual(["clusters/prod.yaml", "clusters/us.yaml"]);
    expect(after.files[0]!.text).toContain("1.21");
    expect(after.digest).not.toBe(before.digest);
    // Each snapshot is read from the object store: the older commit still reads as it was.
    expect(await source.snapshot(before.commit)).toEqual(before);
  });

  it("gives equal digests to commits with equal fleet content", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));
    const before = await source.sync();
    await server.pushChange("fleet", {
      files: { "status/prod.yaml": "ready: false\n", "README.md": "x" },
      message: "s",
    });
    const after = await source.sync();
    expect(after.commit).not.toBe(before.commit);
    expect(after.digest).toBe(before.digest);
  });

  it("reads the head with one ls-refs exchange and no pack", async () => {
    const server = await gitServerForTest();
    const head = await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"));

    server.resetRequests();
    expect(await source.headOf()).toBe(head);
    expect(server.requests.map((r) => [r.method, r.path, r.gitProtocol])).toEqual([
      ["GET", "/info/refs", "version=2"],
      ["POST", "/git-upload-pack", "version=2"],
    ]);

    const moved = await server.pushChange("fleet", { files: { "clusters/a.yaml": "a" }, message: "a" });
    expect(await source.headOf()).toBe(moved);
    expect(await source.headOf("main")).toBe(moved);
  });

  it("types a missing branch or repository as not-found", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source } = await sourceForTest(server.url("fleet"), { branch: "nope" });
    const { source: noRepo } = await sourceForTest(server.url("absent"));

    for (const attempt of [
      () => source.headOf(),
      () => source.sync(),
      () => noRepo.headOf(),
      () => noRepo.sync(),
    ]) {
      await expect(attempt()).rejects.toSatisfy((e) => e instanceof GitSourceError && e.kind === "not-found");
    }
  });

  it("starts the clone afresh when fetches have piled up packs", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source, gitdir } = await sourceForTest(server.url("fleet"), {}, { maxPacks: 2 });
    const packCount = async () =>
      (await readdir(join(await gitdir(), "objects", "pack"))).filter((f) => f.endsWith(".pack")).length;

    const counts: number[] = [];
    for (let i = 0; i < 4; i++) {
      await server.pushChange("fleet", { files: { "clusters/n.yaml": `n: ${i}\n` }, message: `n ${i}` });
      const snapshot = await source.sync();
      expect(snapshot.files.find((f) => f.path === "clusters/n.yaml")?.text).toBe(`n: ${i}\n`);
      counts.push(await packCount());
    }
    expect(counts).toEqual([1, 2, 3, 1]);
  });

  it("recovers from a cache broken by a crash by cloning again", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", fleetFiles);
    const { source, restarted, gitdir } = await sourceForTest(server.url("fleet"));
    await source.sync();
    // As if the process died while writing the cache's config: the remote's refspec is gone.
    await writeFile(join(await gitdir(), "config"), "[core]\n\tbare = true\n");

    const pushed = await server.pushChange("fleet", { files: { "clusters/a.yaml": "a" }, message: "a" });
    const snapshot = await restarted().sync();
    expect(snapshot.commit).toBe(pushed);
    expect(snapshot.files).toHaveLength(3);
  });
});

describe("GitSource memory: blobs no fleet file can be", () => {
  const MiB = 1024 * 1024;
  // Incompressible, so the pack is as large as the blob.
  const asset = randomBytes(6 * MiB).toString("base64");
  const oversized = `# ${"x".repeat(MAX_FLEET_FILE_BYTES)}\n`;
  const files = {
    ...fleetFiles,
    "assets/big.bin": asset,
    "clusters/huge.yaml": oversized,
  };
  const uploadPackBytes = (server: GitServer) =>
    server.requests
      .filter((r) => r.method === "POST" && r.path === "/git-upload-pack")
      .reduce((n, r) => n + r.responseBytes, 0);

  it("asks a server that can filter to leave out blobs over the fleet file limit; an oversized fleet file is that file's problem", async () => {
    const server = await gitServerForTest({ allowFilter: true });
    await server.createRepo("fleet", files);
    const { source, gitdir } = await sourceForTest(server.url("fleet"));

    const snapshot = await source.sync();

    expect(uploadPackBytes(server)).toBeLessThan(MiB);
    expect(snapshot.files.map((f) => [f.path, f.problem?.message])).toEqual([
      ["clusters/eu/west.yml", undefined],
      [
        "clusters/huge.yaml",
        `the file's content was not fetched: fetches leave out blobs over the limit of ${MAX_FLEET_FILE_BYTES} bytes for a fleet file`,
      ],
      ["clusters/prod.yaml", undefined],
    ]);
    // The cache is fit for the write-back: a status commit on top of the filtered head pushes.
    await source.commitAndPush({
      files: new Map([["status/fleet.yaml", "ok\n"]]),
      message: "status",
      author: bot,
    });
    expect(await server.readFile("fleet", "main", "status/fleet.yaml")).toBe("ok\n");
    expect((await readdir(join(await gitdir(), "objects", "pack"))).length).toBeGreaterThan(0);
  });

  it("reads the same files, oversized one included, from a server that cannot filter", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", files);
    const { source } = await sourceForTest(server.url("fleet"));

    const snapshot = await source.sync();

    expect(uploadPackBytes(server)).toBeGreaterThan(6 * MiB);
    expect(snapshot.files.find((f) => f.path === "clusters/huge.yaml")?.problem?.message).toBe(
      `the file is over the limit of ${MAX_FLEET_FILE_BYTES} bytes for a fleet file`,
    );
  });

  it("ends a fetch whose pack grows past maxFetchBytes with an error that says what to do", async () => {
    const server = await gitServerForTest();
    await server.createRepo("fleet", files);
    const { source } = await sourceForTest(server.url("fleet"), { maxFetchBytes: 2 * MiB });

    const failure = await source.sync().catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(GitSourceError);
    expect(failure).toMatchObject({ kind: "too-large", operation: "fetch" });
    expect((failure as Error).message).toMatch(
      /over maxFetchBytes \(2097152 bytes\).*uploadpack\.allowFilter/,
    );
  });
});
