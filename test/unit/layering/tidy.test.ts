import { existsSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { files, fromSrc, matchesOutside, ROOT, SRC, textOf, withoutComments } from "./support.ts";

// Tidiness that drifts back unless checked: one lookup of the release manifests; scripts and integration
// tests that build on the shared test support, never on a unit test's helpers; no export nobody uses.

/** What a .ts file imports (imports, re-exports, literal dynamic imports), as paths from the repository root. */
const importsOf = (file: string): string[] =>
  [...withoutComments(textOf(file)).matchAll(/\bfrom "(\.[^"]+)"|\bimport\(\s*"(\.[^"]+)"/g)].map((m) =>
    relative(ROOT, join(dirname(file), m[1] ?? m[2]!)),
  );

/** Each import of a file under `dir` outside the folders `allowed` gives for it, as `file -> import`. */
function importsOutside(dir: string, allowed: (file: string) => readonly string[]): string[] {
  return files(join(ROOT, dir)).flatMap((file) => {
    const from = relative(ROOT, file);
    return importsOf(file)
      .filter((target) => !allowed(from).some((folder) => target.startsWith(folder)))
      .map((target) => `${from} -> ${target}`);
  });
}

/** The files `roots` import, and what those import, and so on. */
function reachedFrom(roots: readonly string[]): Set<string> {
  const reached = new Set<string>();
  const visit = (file: string): void => {
    const path = relative(ROOT, file);
    if (reached.has(path) || !existsSync(file)) return;
    reached.add(path);
    for (const target of importsOf(file)) visit(join(ROOT, target));
  };
  for (const root of roots) visit(root);
  return reached;
}

const TEST_HELPERS_OF_ONE_KIND = ["test/unit/", "test/integration/"];

describe("one --kodata lookup", () => {
  it("reads KO_DATA_PATH in commands/kodata.ts alone (findKodata)", () => {
    // `env.KO_DATA_PATH`, `env["KO_DATA_PATH"]`, `{ KO_DATA_PATH } = process.env`: help text may name it.
    const read = /\.KO_DATA_PATH\b|\[\s*["'`]KO_DATA_PATH["'`]\s*\]|\{[^}]*\bKO_DATA_PATH\b[^}]*\}\s*=/g;
    expect(matchesOutside(read, ["commands/kodata.ts"])).toEqual([]);
  });
});

describe("scripts and integration tests build on the shared test support", () => {
  // A script runs outside vitest: a unit test's helper may register a hook or make fixtures on import.
  const SCRIPTS_MAY_IMPORT = ["src/", "test/support/", "test/sandbox/", "scripts/"];
  // Scripts that run a suite living with the tests: the mutation run's safety core, the soak's driver, and
  // the big-fleet run, which checks the soak's invariants with the soak's own checkers.
  const SCRIPT_SUITES: Record<string, readonly string[]> = {
    "scripts/bench-fleet.ts": ["test/soak/checks.ts"],
    "scripts/mutation.ts": ["test/mutation/"],
    "scripts/soak.ts": ["test/soak/"],
    "scripts/soak-upgrade.ts": ["test/soak/"],
  };

  it("scripts/ import only src/, test/support/ and test/sandbox/ (and the suite a script runs)", () => {
    const outside = importsOutside("scripts", (file) => [
      ...SCRIPTS_MAY_IMPORT,
      ...(SCRIPT_SUITES[file] ?? []),
    ]);
    expect(outside).toEqual([]);
  });

  it("nothing a script imports, however indirectly, is a unit or integration test's helper", () => {
    const reached = [...reachedFrom(files(join(ROOT, "scripts")))];
    expect(
      reached.filter((path) => TEST_HELPERS_OF_ONE_KIND.some((folder) => path.startsWith(folder))),
    ).toEqual([]);
  });

  it("no integration test imports test/unit/", () => {
    const intoUnit = files(join(ROOT, "test/integration")).flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith("test/unit/"))
        .map((target) => `${relative(ROOT, file)} -> ${target}`),
    );
    expect(intoUnit).toEqual([]);
  });
});

/** Every .ts file under `dir`, hidden folders (a mutation run's copy of the project) aside. */
const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.name.startsWith(".")
      ? []
      : entry.isDirectory()
        ? sources(join(dir, entry.name))
        : entry.name.endsWith(".ts")
          ? [join(dir, entry.name)]
          : [],
  );

/** What a src file exports: each name, and for a re-export the file it comes from (which names it too). */
function exportsOf(file: string): { name: string; from?: string }[] {
  const code = withoutComments(textOf(file));
  const declared = [
    ...code.matchAll(
      /^export\s+(?:declare\s+)?(?:async\s+)?(?:function\*?|const|let|var|class|abstract\s+class|interface|type|enum)\s+([\w$]+)/gm,
    ),
  ].map((m) => ({ name: m[1]! }));
  const listed = [...code.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}(?:\s*from\s*"([^"]+)")?/gm)].flatMap(
    (m) =>
      m[1]!
        .split(",")
        .map((item) => item.trim().replace(/^type\s+/, ""))
        .filter((item) => item !== "")
        .map((item) => ({
          name: item.split(/\s+as\s+/).pop()!,
          ...(m[2] !== undefined && { from: join(dirname(file), m[2]) }),
        })),
  );
  return [...declared, ...listed];
}

/** Each export of src/ that no other file of src/, test/ or scripts/ names, as `file: name`. */
function unnamedExports(): string[] {
  // This file aside: its allowlist spells the names.
  const everywhere = ["src", "test", "scripts"]
    .flatMap((dir) => sources(join(ROOT, dir)))
    .filter((file) => file !== import.meta.filename);
  const names = new Map(
    everywhere.map((file) => [file, new Set(withoutComments(textOf(file)).match(/[A-Za-z_$][\w$]*/g))]),
  );
  return files(SRC)
    .flatMap((file) =>
      exportsOf(file)
        .filter(({ name, from }) =>
          everywhere.every((other) => other === file || other === from || !names.get(other)!.has(name)),
        )
        .map(({ name }) => `${fromSrc(file)}: ${name}`),
    )
    .sort();
}

describe("unit tests run in worker threads", () => {
  // The mutation runner (scripts/mutation.ts) runs them in vitest's threads pool, where process.chdir
  // throws: one such test fails its first run, and with it CI's mutation check.
  it("no unit test changes the process's working directory", () => {
    const chdirs = files(join(ROOT, "test/unit"))
      .filter((file) => /\bprocess\.chdir\(/.test(withoutComments(textOf(file))))
      .map((file) => relative(ROOT, file));
    expect(chdirs).toEqual([]);
  });
});

describe("no dead export", () => {
  // An export named by no other file: drop the `export`, or the declaration when the file does not use it.
  it("every export of src/ is named by another file of src/, test/ or scripts/", () => {
    expect(unnamedExports()).toEqual([]);
  });
});
