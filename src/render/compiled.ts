import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import type { ManifestFile } from "./files.ts";
import { deepFreeze, isManifest, type Manifest, parseManifestFiles } from "./manifest.ts";

/**
 * Compiled releases: the objects of a release folder, parsed once (at image build) and kept as JSON beside the
 * YAML, named by the digest of the YAML they came from. Loading one is a JSON.parse, without the YAML syntax
 * trees that make parsing a release cost tens of MiB of peak RSS and a second or two. The YAML stays the
 * truth: a folder whose files changed has another digest, finds no compiled copy and is parsed as before.
 */

/**
 * The compiled copies' folder, at the kodata root: the upstream operator reads only the component and ingress
 * folders, so the same kodata serves both projects.
 */
export const COMPILED_DIR = ".compiled";

/** The digest of a release folder's files: their names (not where the folder is) and their text. */
function releaseDigest(files: readonly ManifestFile[]): string {
  const hash = createHash("sha256");
  for (const file of files) hash.update(basename(file.origin)).update("\0").update(file.text).update("\0");
  return hash.digest("hex");
}

const compiledPath = (kodataDir: string, files: readonly ManifestFile[]) =>
  join(kodataDir, COMPILED_DIR, `${releaseDigest(files)}.json`);

/**
 * The compiled objects of `files`, deeply frozen; undefined when there is no compiled copy of exactly these
 * files, or it is not a list of Kubernetes objects (the caller then parses the YAML).
 */
export async function readCompiled(
  kodataDir: string,
  files: readonly ManifestFile[],
): Promise<readonly Manifest[] | undefined> {
  let text: string;
  try {
    text = await readFile(compiledPath(kodataDir, files), "utf8");
  } catch {
    return undefined;
  }
  try {
    const value: unknown = JSON.parse(text);
    if (!Array.isArray(value) || !value.every(isManifest)) return undefined;
    return value.map(deepFreeze);
  } catch {
    return undefined;
  }
}

/**
 * Parses `files` and writes their compiled copy under `kodataDir`; returns its size in bytes, or undefined when
 * the objects hold a value JSON cannot carry (a YAML `!!binary`, `.inf`), which leaves the folder to its YAML.
 */
export async function writeCompiled(
  kodataDir: string,
  files: readonly ManifestFile[],
): Promise<number | undefined> {
  const manifests = await parseManifestFiles(files);
  const json = JSON.stringify(manifests);
  if (!isDeepStrictEqual(JSON.parse(json), manifests)) return undefined;
  const path = compiledPath(kodataDir, files);
  await mkdir(join(kodataDir, COMPILED_DIR), { recursive: true });
  // Written aside and renamed, so a reader never meets half a file.
  await writeFile(`${path}.tmp`, json);
  await rename(`${path}.tmp`, path);
  return Buffer.byteLength(json);
}
