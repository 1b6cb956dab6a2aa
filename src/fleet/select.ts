import { matchesGlob } from "node:path/posix";

/** Which repository files are fleet files. Paths are relative to the repository root, `/`-separated. */
export interface FileSelection {
  /** A glob over repository paths; `**` spans folders, `{a,b}` alternates. */
  pathGlob: string;
  /** The folder the status bot writes to: never read back as desired state, whatever the glob says. */
  statusDir: string;
}

export const DEFAULT_FILE_SELECTION: Readonly<FileSelection> = {
  pathGlob: "clusters/**/*.{yaml,yml}",
  statusDir: "status/",
};

/** Whether the file at `path` (relative to the repository root) holds desired state. */
export function isFleetFile(path: string, selection: FileSelection): boolean {
  const normalized = normalizeRepoPath(path);
  const statusDir = normalizeRepoPath(selection.statusDir).replace(/\/+$/, "");
  if (statusDir !== "" && (normalized === statusDir || normalized.startsWith(`${statusDir}/`))) return false;
  return matchesGlob(normalized, selection.pathGlob);
}

/** `./clusters\a.yaml` -> `clusters/a.yaml`: the one spelling the glob and the diagnostics use. */
export function normalizeRepoPath(path: string): string {
  return path.replaceAll("\\", "/").replace(/^(\.\/)+/, "");
}
