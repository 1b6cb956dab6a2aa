import type * as fs from "node:fs";
import git from "isomorphic-git";
import { compareStrings } from "../fleet/diagnostic.ts";
import { decodeFleetFile, type FleetFile, fileProblem, MAX_FLEET_FILE_BYTES } from "../fleet/file-text.ts";
import {
  createFileFilter,
  type EntryKind,
  entryAction,
  type FileSelection,
  isYamlLeftOut,
  mayHoldLeftOut,
} from "../fleet/select.ts";

/** An isomorphic-git object store. */
export interface ObjectStoreRef {
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
  const filter = createFileFilter(selection);
  const files: FleetFile[] = [];
  const visit = async (tree: string, dir: string): Promise<void> => {
    const { tree: entries } = await git.readTree({ ...store, oid: tree });
    for (const entry of entries) {
      const path = dir === "" ? entry.path : `${dir}/${entry.path}`;
      const action = entryAction(filter, path, KIND_OF_MODE[entry.mode] ?? "special");
      if (action.problem !== undefined) files.push(fileProblem(path, action.problem));
      if (action.descend) await visit(entry.oid, path);
      if (action.read) files.push(await readFleetBlob(store, path, entry.oid));
    }
  };
  const { commit: parsed } = await git.readCommit({ ...store, oid: commit });
  await visit(parsed.tree, "");
  return files.sort((a, b) => compareStrings(a.path, b.path));
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
  const filter = createFileFilter(selection);
  const found = new Map<string, string>();
  const visit = async (tree: string, dir: string): Promise<void> => {
    const { tree: entries } = await git.readTree({ ...store, oid: tree });
    for (const entry of entries) {
      const path = dir === "" ? entry.path : `${dir}/${entry.path}`;
      if (!mayHoldLeftOut(filter, entry.path, path)) continue;
      if (entry.type === "tree") await visit(entry.oid, path);
      else if (entry.type === "blob" && isYamlLeftOut(filter, path)) found.set(path, entry.oid);
    }
  };
  const { commit: parsed } = await git.readCommit({ ...store, oid: commit });
  await visit(parsed.tree, "");
  return found;
}

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
