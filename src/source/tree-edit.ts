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
  const { object, oid } = gitBlob(content);
  if (oid !== existing) {
    await git.writeObject({ ...store, type: "blob", format: "deflated", object: deflateSync(object), oid });
  }
  return oid;
}

/** A blob as git stores it (its header and content) and its id, the sha1 of that. */
function gitBlob(content: Buffer): { object: Buffer; oid: string } {
  const object = Buffer.concat([Buffer.from(`blob ${content.length}\0`), content]);
  return { object, oid: createHash("sha1").update(object).digest("hex") };
}

/** Git's id of a file with this text, as a tree lists it. */
export const blobIdOf = (text: string): string => gitBlob(Buffer.from(text, "utf8")).oid;

/** A commit's files by path, as a write-back reads them to derive its changes. */
export interface FilesAt {
  /** The file's text, or null when there is no such file. */
  readFile(path: string): Promise<string | null>;
  /** The file's blob id, read from its tree without reading the file, or null when there is none. */
  blobId(path: string): Promise<string | null>;
}

/**
 * The files of the tree `rootTree`. Each tree on a path is read once: a status write-back looks up a
 * thousand pages in one folder, and isomorphic-git's lookup by path reads (inflates and parses) every tree
 * on it again each time, in one turn of the event loop when the objects are in a pack already read (at
 * 1,000 clusters, holds of 3-5 s that starved the leader's Lease renewals).
 */
export function filesAt(store: ObjectStore, rootTree: string): FilesAt {
  const trees = new Map<string, Promise<Map<string, TreeEntry>>>();
  const entriesOf = (oid: string) => {
    let entries = trees.get(oid);
    if (!entries) {
      entries = git.readTree({ ...store, oid }).then(({ tree }) => new Map(tree.map((e) => [e.path, e])));
      trees.set(oid, entries);
    }
    return entries;
  };
  const blobAt = async (path: string): Promise<TreeEntry | undefined> => {
    let entries = await entriesOf(rootTree);
    const [last, ...folders] = path.split("/").reverse();
    for (const folder of folders.reverse()) {
      const entry = entries.get(folder);
      if (entry?.type !== "tree") return undefined;
      entries = await entriesOf(entry.oid);
    }
    const entry = entries.get(last!);
    return entry?.type === "blob" ? entry : undefined;
  };
  return {
    async readFile(path) {
      const entry = await blobAt(path);
      if (!entry) return null;
      const { blob } = await git.readBlob({ ...store, oid: entry.oid });
      return new TextDecoder().decode(blob);
    },
    blobId: async (path) => (await blobAt(path))?.oid ?? null,
  };
}

function assertRepositoryPath(path: string): void {
  const segments = path.split("/");
  if (
    segments.some((segment) => segment === "" || segment === "." || segment === ".." || segment === ".git")
  ) {
    throw new Error(`not a repository file path: "${path}"`);
  }
}
