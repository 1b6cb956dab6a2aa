import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { compareStrings } from "./diagnostic.ts";
import type { FleetFile } from "./model.ts";
import { type FileSelection, isFleetFile, normalizeRepoPath } from "./select.ts";

/**
 * Reads the fleet files below `dir` (a checkout of the fleet repository), sorted by path. Only regular
 * files count: Git stores a symlink as its target's path, so the Git source never reads through one either.
 */
export async function readFleetDir(dir: string, selection: FileSelection): Promise<FleetFile[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const paths = entries
    .filter((entry) => entry.isFile())
    .map((entry) => normalizeRepoPath(relative(dir, join(entry.parentPath, entry.name))))
    .filter((path) => isFleetFile(path, selection))
    .sort(compareStrings);
  return Promise.all(paths.map(async (path) => ({ path, text: await readFile(join(dir, path), "utf8") })));
}
