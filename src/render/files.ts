import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

export interface ManifestFile {
  /** Where the text came from, for error messages. */
  origin: string;
  text: string;
}

const MANIFEST_FILE_NAME = /\.(ya?ml|json)$/;

/**
 * The manifest files at `path`: the file itself, or every YAML/JSON file of a directory in file-name order,
 * the order the upstream operator applies a kodata directory in (`NN-` prefixes make it the install order).
 */
export async function readManifestFiles(path: string): Promise<ManifestFile[]> {
  if (!(await stat(path)).isDirectory()) return [{ origin: path, text: await readFile(path, "utf8") }];
  const entries = await readdir(path, { withFileTypes: true });
  // Plain code-unit order, as Go sorts directory entries (not locale order: `10-` sorts before `2-`).
  const names = entries
    .filter((entry) => entry.isFile() && MANIFEST_FILE_NAME.test(entry.name))
    .map((entry) => entry.name)
    .sort();
  return Promise.all(
    names.map(async (name) => ({ origin: join(path, name), text: await readFile(join(path, name), "utf8") })),
  );
}

/** The names of the subdirectories of `path`; none when `path` does not exist. */
export async function subdirectories(path: string): Promise<string[]> {
  try {
    const entries = await readdir(path, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
  } catch (error) {
    if (isNotFound(error)) return [];
    throw error;
  }
}

export function isNotFound(error: unknown): boolean {
  return error instanceof Error && "code" in error && error.code === "ENOENT";
}
