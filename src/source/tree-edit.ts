import { createHash } from "node:crypto";
import type * as fs from "node:fs";
import { deflateSync } from "node:zlib";
import git, { type TreeEntry } from "isomorphic-git";

/** A local object store: the git directory plus isomorphic-git's pack cache for it. */
export interface ObjectStore {
  fs: typeof fs;
  gitdir: string;
  cache: object;
}

/** Repository path -> new file content, or null to delete the file. */
export type FileChanges = ReadonlyMap<string, string | null>;

/**
 * Writes the tree of `baseTree` with `changes` applied and returns its id, without a working tree or an
 * index. Only the trees on the changed paths are rewritten; equal content yields the same id as
 * `baseTree`, which is how "nothing to commit" is detected. Folders left empty disappear, as in git.
 */
export async function writeTreeWithChanges(
  store: ObjectStore,
  baseTree: string | undefined,
  changes: FileChanges,
): Promise<string> {
  for (const path of changes.keys()) assertRepositoryPath(path);
  return (await rewriteTree(store, baseTree, changes)) ?? git.writeTree({ ...store, tree: [] });
}

/** Returns the new tree id, or undefined when the tree ends up empty. */
async function rewriteTree(
  store: ObjectStore,
  treeOid: string | undefined,
  changes: ReadonlyMap<string, string | null>,
): Promise<string | undefined> {
  const entries = new Map<string, TreeEntry>();
  if (treeOid) {
    const { tree } = await git.readTree({ ...store, oid: treeOid });
    for (const entry of tree) entries.set(entry.path, entry);
  }
  const fileChanges = new Map<string, string | null>();
  const folderChanges = new Map<string, Map<string, string | null>>();
  for (const [path, content] of changes) {
    const slash = path.indexOf("/");
    if (slash === -1) {
      fileChanges.set(path, content);
      continue;
    }
    const folder = path.slice(0, slash);
    const inner = folderChanges.get(folder) ?? new Map<string, string | null>();
    inner.set(path.slice(slash + 1), content);
    folderChanges.set(folder, inner);
  }

  for (const [name, content] of fileChanges) {
    if (content === null) {
      entries.delete(name);
    } else {
      const oid = await writeBlob(store, Buffer.from(content, "utf8"), entries.get(name)?.oid);
      entries.set(name, { mode: "100644", path: name, oid, type: "blob" });
    }
  }
  for (const [name, inner] of folderChanges) {
    const existing = entries.get(name);
    const oid = await rewriteTree(store, existing?.type === "tree" ? existing.oid : undefined, inner);
    if (oid) entries.set(name, { mode: "040000", path: name, oid, type: "tree" });
    else entries.delete(name);
  }
  if (entries.size === 0) return undefined;
  return git.writeTree({ ...store, tree: [...entries.values()] });
}

/**
 * Writes a blob and returns its id; nothing when the tree already holds that id (a status page that did not
 * change, often in a pack, where a write would add a loose copy). The id is git's (sha1 of the header and
 * content) and the object is deflated here by node:zlib's native code, not by isomorphic-git in JavaScript
 * (pako, see deflate.ts): a status commit may write a thousand pages.
 */
async function writeBlob(store: ObjectStore, content: Buffer, existing: string | undefined): Promise<string> {
  const object = Buffer.concat([Buffer.from(`blob ${content.length}\0`), content]);
  const oid = createHash("sha1").update(object).digest("hex");
  if (oid !== existing) {
    await git.writeObject({ ...store, type: "blob", format: "deflated", object: deflateSync(object), oid });
  }
  return oid;
}

function assertRepositoryPath(path: string): void {
  const segments = path.split("/");
  if (
    segments.some((segment) => segment === "" || segment === "." || segment === ".." || segment === ".git")
  ) {
    throw new Error(`not a repository file path: "${path}"`);
  }
}
