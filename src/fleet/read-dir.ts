import type { Dirent } from "node:fs";
import { open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { compareStrings } from "./diagnostic.ts";
import { decodeFleetFile, type FleetFile, MAX_FLEET_FILE_BYTES } from "./file-text.ts";
import type { EntryKind, FileSelection } from "./select.ts";
import { type Entry, type ListFolder, walkFleet, walkLeftOut } from "./walk.ts";

/**
 * Reads the fleet files below `dir` (a checkout of the fleet repository), sorted by path, by the rules the
 * Git tree walk (`source/tree.ts`) applies to a commit: regular files only, anything else at a fleet path
 * (a symlink, a submodule checkout, a folder named like a file) is a file with a problem.
 */
export function readFleetDir(dir: string, selection: FileSelection): Promise<FleetFile[]> {
  return walkFleet(dir, folderLister(dir), selection, readBounded);
}

/** The YAML files below `dir` that the selection leaves out (isYamlLeftOut), sorted. */
export async function yamlFilesLeftOut(dir: string, selection: FileSelection): Promise<string[]> {
  const found = await walkLeftOut(dir, folderLister(dir), selection);
  return [...found.keys()].sort(compareStrings);
}

/** A folder's entries, by their paths on disk; the checkout's own `.git` is no entry. */
const folderLister =
  (root: string): ListFolder<string> =>
  async (folder) =>
    (await readdir(folder, { withFileTypes: true }))
      .filter((entry) => !(folder === root && entry.name === ".git"))
      .map(
        (entry): Entry<string> => ({
          name: entry.name,
          at: join(folder, entry.name),
          kind: () => entryKind(folder, entry),
          listable: entry.isDirectory(),
        }),
      );

async function entryKind(folder: string, entry: Dirent): Promise<EntryKind> {
  if (entry.isSymbolicLink()) return "symlink";
  if (entry.isFile()) return "file";
  if (!entry.isDirectory()) return "special";
  // A submodule's checkout has a `.git` file (or folder) of its own; Git does not store its files here.
  const inner: string[] = await readdir(join(folder, entry.name)).catch(() => []);
  return inner.includes(".git") ? "submodule" : "folder";
}

/** At most one byte over the size limit is read, so a huge file (or /dev/zero) costs no memory. */
async function readBounded(file: string, path: string): Promise<FleetFile> {
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(MAX_FLEET_FILE_BYTES + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    return decodeFleetFile(path, buffer.subarray(0, length));
  } finally {
    await handle.close();
  }
}
