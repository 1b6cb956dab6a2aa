import { open, readdir, readFile, stat } from "node:fs/promises";
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
export async function readManifestFiles(
  path: string,
  maxBytes = Number.POSITIVE_INFINITY,
): Promise<ManifestFile[]> {
  const stats = await stat(path);
  let files: string[];
  if (stats.isDirectory()) {
    const entries = await readdir(path, { withFileTypes: true });
    // Plain code-unit order, as Go sorts directory entries (not locale order: `10-` sorts before `2-`).
    files = entries
      .filter((entry) => entry.isFile() && MANIFEST_FILE_NAME.test(entry.name))
      .map((entry) => join(path, entry.name))
      .sort();
  } else if (stats.isFile()) {
    files = [path];
  } else {
    // A device or FIFO (/dev/zero) never ends: only regular files are read.
    throw new Error(`${path} is not a regular file or folder`);
  }
  // Sizes first, so nothing over the limit is read at all; a file growing meanwhile is cut off by readBounded.
  let total = 0;
  for (const file of files) {
    total += (await stat(file)).size;
    if (total > maxBytes) throw new Error(`the manifests are over ${maxBytes} bytes`);
  }
  return Promise.all(files.map(async (file) => ({ origin: file, text: await readBounded(file, maxBytes) })));
}

async function readBounded(file: string, maxBytes: number): Promise<string> {
  if (maxBytes === Number.POSITIVE_INFINITY) return readFile(file, "utf8");
  const handle = await open(file, "r");
  try {
    const buffer = Buffer.alloc(Math.min(maxBytes, (await handle.stat()).size) + 1);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    if (bytesRead > maxBytes) throw new Error(`the manifests are over ${maxBytes} bytes`);
    return buffer.subarray(0, bytesRead).toString("utf8");
  } finally {
    await handle.close();
  }
}

/** The names of the subdirectories of `path`; none when `path` does not exist. */
export async function subdirectories(path: string): Promise<string[]> {
  try {
    const entries = await readdir(path, { withFileTypes: true });
    return entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
  } catch (error) {
    if (isMissingFile(error)) return [];
    throw error;
  }
}

export function isMissingFile(error: unknown): boolean {
  return error instanceof Error && "code" in error && error.code === "ENOENT";
}
