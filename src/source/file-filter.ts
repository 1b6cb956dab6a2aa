import { posix } from "node:path";

export const defaultInclude: readonly string[] = ["clusters/**/*.yaml", "clusters/**/*.yml"];
export const defaultStatusPath = "status/";

/** Which files of a commit make up the fleet: the include globs, minus everything under the status path. */
export interface FleetFileFilter {
  /** A file the snapshot reads. */
  matches(path: string): boolean;
  /** A directory that may hold such files; the tree walk skips the others without reading them. */
  mayContain(dir: string): boolean;
  /** A path the status write-back owns: it never counts as fleet content. */
  isStatus(path: string): boolean;
}

const globChars = /[*?[{]/;

export function createFileFilter(include: readonly string[], statusPath: string): FleetFileFilter {
  const statusDir = statusPath.replace(/^\/+|\/+$/g, "");
  // The literal directories each glob starts with: `clusters/**/*.yaml` can only match under `clusters/`.
  const literalPrefixes = include.map((glob) => {
    const segments = glob.split("/");
    const firstGlob = segments.findIndex((segment) => globChars.test(segment));
    return segments.slice(0, firstGlob === -1 ? -1 : firstGlob).join("/");
  });
  const isStatus = (path: string) =>
    statusDir !== "" && (path === statusDir || path.startsWith(`${statusDir}/`));
  return {
    isStatus,
    matches: (path) => !isStatus(path) && include.some((glob) => posix.matchesGlob(path, glob)),
    mayContain: (dir) =>
      !isStatus(dir) &&
      literalPrefixes.some(
        (prefix) => prefix === "" || `${prefix}/`.startsWith(`${dir}/`) || `${dir}/`.startsWith(`${prefix}/`),
      ),
  };
}
