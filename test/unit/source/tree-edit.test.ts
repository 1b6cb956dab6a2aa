import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import git from "isomorphic-git";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { blobIdOf, filesAt, type ObjectStore, writeTreeWithChanges } from "../../../src/source/tree-edit.ts";

/** Lists a tree recursively as path -> content. */
async function readAll(store: ObjectStore, tree: string, dir = ""): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of (await git.readTree({ ...store, oid: tree })).tree) {
    const path = dir ? `${dir}/${entry.path}` : entry.path;
    if (entry.type === "tree") Object.assign(files, await readAll(store, entry.oid, path));
    else files[path] = new TextDecoder().decode((await git.readBlob({ ...store, oid: entry.oid })).blob);
  }
  return files;
}

describe("writeTreeWithChanges", () => {
  let store: ObjectStore;
  beforeEach(async () => {
    const gitdir = await mkdtemp(join(tmpdir(), "tree-edit-"));
    await git.init({ fs, gitdir, bare: true });
    store = { fs, gitdir, cache: {} };
  });
  afterEach(async () => {
    await rm(store.gitdir, { recursive: true, force: true });
  });

  const base = () =>
    writeTreeWithChanges(
      store,
      undefined,
      new Map([
        ["clusters/prod.yaml", "prod\n"],
        ["clusters/eu/west.yaml", "west\n"],
        ["README.md", "fleet\n"],
      ]),
    );

  it("builds nested trees from nothing", async () => {
    expect(await readAll(store, await base())).toEqual({
      "clusters/prod.yaml": "prod\n",
      "clusters/eu/west.yaml": "west\n",
      "README.md": "fleet\n",
    });
  });

  it("adds, replaces and deletes files, keeping the rest", async () => {
    const tree = await writeTreeWithChanges(
      store,
      await base(),
      new Map<string, string | null>([
        ["status/prod.yaml", "ready\n"],
        ["clusters/prod.yaml", "prod v2\n"],
        ["README.md", null],
      ]),
    );
    expect(await readAll(store, tree)).toEqual({
      "clusters/prod.yaml": "prod v2\n",
      "clusters/eu/west.yaml": "west\n",
      "status/prod.yaml": "ready\n",
    });
  });

  it("gives back the same tree when nothing changes", async () => {
    const tree = await base();
    expect(await writeTreeWithChanges(store, tree, new Map([["clusters/prod.yaml", "prod\n"]]))).toBe(tree);
    expect(await writeTreeWithChanges(store, tree, new Map([["status/absent.yaml", null]]))).toBe(tree);
  });

  it("writes objects git itself reads (its own ids, zlib-deflated), and none for a page that did not change", async () => {
    const tree = await base();
    const gitIn = (args: string[], input?: string) =>
      spawnSync("git", args, { env: { ...process.env, GIT_DIR: store.gitdir }, input, encoding: "utf8" });
    // Every object the edit wrote is well-formed: git's own check, and its id of the same content.
    expect(gitIn(["fsck", "--strict", tree]).status).toBe(0);
    const entry = (await git.readTree({ ...store, oid: tree, filepath: "clusters" })).tree.find(
      (e) => e.path === "prod.yaml",
    );
    expect(entry?.oid).toBe(gitIn(["hash-object", "--stdin"], "prod\n").stdout.trim());
    expect(gitIn(["cat-file", "-p", entry!.oid]).stdout).toBe("prod\n");
    // A write-back that leaves a page as it is writes no object for it, also when the page is in a pack
    // (as after a clone), where a write would add a loose copy.
    const commit = gitIn(["commit-tree", tree, "-m", "base"], "").stdout.trim();
    expect(gitIn(["update-ref", "refs/heads/main", commit]).status).toBe(0);
    expect(gitIn(["repack", "-a", "-d"]).status).toBe(0);
    const loose = () => Number(/^count: (\d+)/m.exec(gitIn(["count-objects", "-v"]).stdout)?.[1]);
    expect(loose()).toBe(0);
    const edited = await writeTreeWithChanges(
      store,
      tree,
      new Map([
        ["clusters/prod.yaml", "prod\n"],
        ["clusters/eu/west.yaml", "west v2\n"],
      ]),
    );
    // The new page and the three trees above it (eu, clusters, the root): no copy of prod.yaml.
    expect(loose()).toBe(4);
    expect(gitIn(["fsck", "--strict", edited]).status).toBe(0);
  });

  it("reads a commit's files by path, their blob ids from the trees alone, each tree read once", async () => {
    const tree = await base();
    const readTree = vi.spyOn(git, "readTree");
    const readBlob = vi.spyOn(git, "readBlob");
    const files = filesAt(store, tree);
    expect(await files.readFile("clusters/eu/west.yaml")).toBe("west\n");
    expect(await files.readFile("README.md")).toBe("fleet\n");
    const gitId = spawnSync("git", ["hash-object", "--stdin"], {
      input: "prod\n",
      encoding: "utf8",
    }).stdout.trim();
    expect(await files.blobId("clusters/prod.yaml")).toBe(gitId);
    expect(blobIdOf("prod\n")).toBe(gitId);
    for (const absent of [
      "clusters/missing.yaml",
      "clusters",
      "clusters/eu",
      "README.md/x",
      "nope/prod.yaml",
    ]) {
      expect(await files.readFile(absent), absent).toBeNull();
      expect(await files.blobId(absent), absent).toBeNull();
    }
    // The root, clusters and eu: once each however many lookups went through them; blob ids read no blob.
    expect(readTree).toHaveBeenCalledTimes(3);
    expect(readBlob).toHaveBeenCalledTimes(2);
    readTree.mockRestore();
    readBlob.mockRestore();
  });

  it("drops folders left empty, as git does", async () => {
    const tree = await writeTreeWithChanges(store, await base(), new Map([["clusters/eu/west.yaml", null]]));
    const entries = (await git.readTree({ ...store, oid: tree, filepath: "clusters" })).tree.map(
      (e) => e.path,
    );
    expect(entries).toEqual(["prod.yaml"]);
  });

  it("refuses paths that escape the repository or touch .git", async () => {
    for (const path of ["../x", "/abs", "a//b", ".git/config", "a/./b"]) {
      await expect(writeTreeWithChanges(store, undefined, new Map([[path, "x"]]))).rejects.toThrow(
        "not a repository file path",
      );
    }
  });
});
