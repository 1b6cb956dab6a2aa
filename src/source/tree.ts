import type * as fs from "node:fs";
import git from "isomorphic-git";
import { decodeFleetFile, type FleetFile, fileProblem, MAX_FLEET_FILE_BYTES } from "../fleet/file-text.ts";
import type { EntryKind, FileSelection } from "../fleet/select.ts";
import { type ListFolder, walkFleet, walkLeftOut } from "../fleet/walk.ts";

/** An isomorphic-git object store. */
interface ObjectStoreRef {
  fs: typeof fs;
  gitdir: string;
  cache: object;
}

const KIND_OF_MODE: Record<string, EntryKind> = {
  "040000": "folder",
  "100644": "file",
  "100755": "file",
  "120000": "symlink",
  "160000": "submodule",
};

/**
 * The fleet files of a commit, sorted by path: the one walk over a Git tree, used by the Git source's
 * snapshot and by `plan`. Only the folders the selection can reach are listed and only the blobs it
 * selects are read, so unrelated blobs cost nothing; entries at fleet paths that are no regular file
 * (symlinks, submodules, folders) come back as files with a problem.
 */
export async function readFleetTree(
  store: ObjectStoreRef,
  commit: string,
  selection: FileSelection,
): Promise<FleetFile[]> {
  return walkFleet(await rootTree(store, commit), treeLister(store), selection, (oid, path) =>
    readFleetBlob(store, path, oid),
  );
}

/**
 * The YAML files of a commit that the selection leaves out (isYamlLeftOut), by path, with their blob ids:
 * the whole tree is listed, no blob is read.
 */
export async function yamlLeftOutOfTree(
  store: ObjectStoreRef,
  commit: string,
  selection: FileSelection,
): Promise<Map<string, string>> {
  return walkLeftOut(await rootTree(store, commit), treeLister(store), selection);
}

async function rootTree(store: ObjectStoreRef, commit: string): Promise<string> {
  const { commit: parsed } = await git.readCommit({ ...store, oid: commit });
  return parsed.tree;
}

/** A tree's entries, by their object ids: a submodule is a commit id, which the store cannot list. */
const treeLister =
  (store: ObjectStoreRef): ListFolder<string> =>
  async (tree) =>
    (await git.readTree({ ...store, oid: tree })).tree.map((entry) => ({
      name: entry.path,
      at: entry.oid,
      kind: async () => KIND_OF_MODE[entry.mode] ?? "special",
      listable: entry.type === "tree",
    }));

/** A blob the tree names but the store lacks was left out by the fetch's size filter (GitSource). */
async function readFleetBlob(store: ObjectStoreRef, path: string, oid: string): Promise<FleetFile> {
  try {
    const { blob } = await git.readBlob({ ...store, oid });
    return decodeFleetFile(path, blob);
  } catch (error) {
    if ((error as { code?: string }).code !== "NotFoundError") throw error;
    return fileProblem(
      path,
      `the file's content was not fetched: fetches leave out blobs over the limit of ${MAX_FLEET_FILE_BYTES} bytes for a fleet file`,
    );
  }
}
