import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

// The source tree as the layering tests read it: every .ts file under a folder, and each file's text.

export const ROOT = join(import.meta.dirname, "../../..");
export const SRC = join(ROOT, "src");

/** Every .ts file under `dir`, as absolute paths. */
export const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? files(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(dir, entry.name)]
        : [],
  );

/** The path of a src file from src/, as the tests' messages and allowlists name it. */
export const fromSrc = (path: string): string => relative(SRC, path);

export const folderOf = (path: string): string => fromSrc(path).split("/")[0]!;

export const textOf = (path: string): string => readFileSync(path, "utf8");

/** A source text without its comments, so a rule is not tripped by prose. */
export const withoutComments = (text: string): string =>
  text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:])\/\/.*$/gm, "$1");

/** Each match of `pattern` in a src file other than the allowed ones, as `file: match`. */
export function matchesOutside(pattern: RegExp, allowed: readonly string[] = []): string[] {
  return files(SRC)
    .filter((file) => !allowed.includes(fromSrc(file)))
    .flatMap((file) =>
      [...withoutComments(textOf(file)).matchAll(pattern)].map((m) => `${fromSrc(file)}: ${m[0]}`),
    );
}
