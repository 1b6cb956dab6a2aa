import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../support/shared.ts";

// docs/README.md is the index a new reader starts from: every page of docs/ is linked there, and every
// link there names a page that exists.

const DOCS = join(repoRoot, "docs");
const INDEX = join(DOCS, "README.md");

const linked = (): string[] =>
  existsSync(INDEX)
    ? [...readFileSync(INDEX, "utf8").matchAll(/\]\(([^)#]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!)
    : [];

describe("the docs index", () => {
  it("links every page under docs/", () => {
    const pages = readdirSync(DOCS).filter((name) => name.endsWith(".md") && name !== "README.md");
    expect(pages.filter((page) => !linked().includes(page))).toEqual([]);
  });

  it("links only pages that exist, and is linked from the README", () => {
    expect(linked().filter((target) => !existsSync(join(DOCS, target)))).toEqual([]);
    expect(readFileSync(join(repoRoot, "README.md"), "utf8")).toContain("](docs/README.md)");
  });
});
