import type { Dirent } from "node:fs";
import { open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { compareStrings } from "./diagnostic.ts";
import { decodeFleetFile, type FleetFile, fileProblem, MAX_FLEET_FILE_BYTES } from "./file-text.ts";
import {
  createFileFilter,
  type EntryKind,
  entryAction,
  type FileSelection,
  isYamlLeftOut,
  mayHoldLeftOut,
} from "./select.ts";

/**
 * Reads the fleet files below `dir` (a checkout of the fleet repository), sorted by path, by the rules the
 * Git tree walk (`source/tree.ts`) applies to a commit: regular files only, anything else at a fleet path
 * (a symlink, a submodule checkout, a folder named like a file) is a file with a problem.
 */
export async function readFleetDir(dir: string, selection: FileSelection): Promise<FleetFile[]> {
  const filter = createFileFilter(selection);
  const files: FleetFile[] = [];
  const visit = async (folder: string, relative: string): Promise<void> => {
    const entries = await readdir(folder, { withFileTypes: true });
    for (const entry of entries) {
      const path = relative === "" ? entry.name : `${relative}/${entry.name}`;
      if (relative === "" && entry.name === ".git") continue;
      const kind = await entryKind(folder, entry);
      const action = entryAction(filter, path, kind);
      if (action.problem !== undefined) files.push(fileProblem(path, action.problem));
      if (action.descend) await visit(join(folder, entry.name), path);
      if (action.read) files.push(await readBounded(join(folder, entry.name), path));
    }
  };
  await visit(dir, "");
  return files.sort((a, b) => compareStrings(a.path, b.path));
}

/** The YAML files below `dir` that the selection leaves out (isYamlLeftOut), sorted. */
export async function yamlFilesLeftOut(dir: string, selection: FileSelection): Promise<string[]> {
  const filter = createFileFilter(selection);
  const found: string[] = [];
  const visit = async (folder: string, relative: string): Promise<void> => {
    for (const entry of await readdir(folder, { withFileTypes: true })) {
      const path = relative === "" ? entry.name : `${relative}/${entry.name}`;
      if (!mayHoldLeftOut(filter, entry.name, path)) continue;
      if (entry.isDirectory()) await visit(join(folder, entry.name), path);
      else if (isYamlLeftOut(filter, path)) found.push(path);
    }
  };
  await visit(dir, "");
  return found.sort(compareStrings);
}

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
