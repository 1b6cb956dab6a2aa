import { matchesGlob } from "node:path/posix";

/**
 * Which repository files are fleet files: the one rule the Git source, `plan`, `validate` and the webhook
 * share. Paths are relative to the repository root, `/`-separated.
 */
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

/** A FileSelection compiled for walking a tree. */
export interface FleetFileFilter {
  /** A file that holds desired state. */
  matches(path: string): boolean;
  /** A directory that may hold such files; a tree walk skips the others without reading them. */
  mayContain(dir: string): boolean;
  /** A path the status write-back owns: it never counts as fleet content. */
  isStatus(path: string): boolean;
}

const GLOB_CHARS = /[*?[{]/;

export function createFileFilter(selection: FileSelection): FleetFileFilter {
  const statusDir = normalizeRepoPath(selection.statusDir).replace(/^\/+|\/+$/g, "");
  const glob = normalizeRepoPath(selection.pathGlob);
  // The literal folders the glob starts with: `clusters/**/*.yaml` can only match under `clusters/`.
  const segments = glob.split("/");
  const firstGlob = segments.findIndex((segment) => GLOB_CHARS.test(segment));
  const prefix = segments.slice(0, firstGlob === -1 ? -1 : firstGlob).join("/");
  const isStatus = (path: string) => {
    const normalized = normalizeRepoPath(path);
    return statusDir !== "" && (normalized === statusDir || normalized.startsWith(`${statusDir}/`));
  };
  return {
    isStatus,
    matches: (path) => !isStatus(path) && matchesGlob(normalizeRepoPath(path), glob),
    mayContain: (dir) => {
      const normalized = normalizeRepoPath(dir);
      return (
        !isStatus(normalized) &&
        (prefix === "" ||
          `${prefix}/`.startsWith(`${normalized}/`) ||
          `${normalized}/`.startsWith(`${prefix}/`))
      );
    },
  };
}

/** YAML files' names: what a fleet file is written as, whatever the glob says. */
const YAML_FILE = /\.ya?ml$/i;

/**
 * What a look for fleet files put where the glob does not reach goes through: not hidden files and folders
 * (.git, CI configuration such as .github/workflows), not the status folder.
 */
export const mayHoldLeftOut = (filter: FleetFileFilter, name: string, path: string): boolean =>
  !name.startsWith(".") && !filter.isStatus(path);

/** A YAML file the glob leaves out: read by nobody, and nothing says so unless it is listed. */
export const isYamlLeftOut = (filter: FleetFileFilter, path: string): boolean =>
  YAML_FILE.test(path) && !filter.matches(path);

/** `./clusters\a.yaml` -> `clusters/a.yaml`: the one spelling the glob and the diagnostics use. */
export function normalizeRepoPath(path: string): string {
  return path.replaceAll("\\", "/").replace(/^(\.\/)+/, "");
}

/** What a walk over a checkout or a Git tree finds at a path. */
export type EntryKind = "file" | "folder" | "symlink" | "submodule" | "special";

/** What a walk does with an entry: read it as a fleet file, look inside it, and/or report it. */
interface EntryAction {
  read: boolean;
  descend: boolean;
  /** Set when the path is where a fleet file would be but is none: an error, never a silent skip. */
  problem?: string;
}

/**
 * The one rule the walk (`walk.ts`, over a commit for `source/tree.ts`, a checkout for `read-dir.ts`)
 * applies. Anything at a fleet path that is not a regular file is an error for that path: skipped silently,
 * the CR it declared would be pruned. A symlink or submodule in a fleet folder counts too, as it could
 * stand for files the glob selects.
 */
export function entryAction(filter: FleetFileFilter, path: string, kind: EntryKind): EntryAction {
  const matches = filter.matches(path);
  const inFleetFolder = filter.mayContain(path);
  switch (kind) {
    case "file":
      return { read: matches, descend: false };
    case "folder":
      return {
        read: false,
        descend: inFleetFolder,
        ...(matches && { problem: "a folder is named like a fleet file; fleet files must be regular files" }),
      };
    case "symlink":
      return matches || inFleetFolder
        ? {
            read: false,
            descend: false,
            problem:
              "a symbolic link where fleet files are read; links are not followed: put the file itself here",
          }
        : { read: false, descend: false };
    case "submodule":
      return matches || inFleetFolder
        ? {
            read: false,
            descend: false,
            problem:
              "a Git submodule where fleet files are read; its files are not read: put them in this repository",
          }
        : { read: false, descend: false };
    case "special":
      return matches
        ? { read: false, descend: false, problem: "not a regular file (a device, FIFO or socket)" }
        : { read: false, descend: false };
  }
}
