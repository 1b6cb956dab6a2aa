import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../support/shared.ts";

// A first install follows the README or a guide word for word: a `helm install -n NS` there creates its
// namespace (--create-namespace) unless the page creates it before (`kubectl create namespace NS`).

const PAGES = [
  "README.md",
  "charts/knative-fleet/README.md",
  ...readdirSync(join(repoRoot, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

/** Each `helm install` of a page (inline code or a block, continuation lines joined) and the text before it. */
function helmInstalls(text: string): { command: string; before: string }[] {
  const joined = text.replace(/\\\n\s*/g, " ").replace(/\n(?!\n)/g, " ");
  return [...joined.matchAll(/helm install[^`\n]*/g)].map((m) => ({
    command: m[0],
    before: joined.slice(0, m.index),
  }));
}

describe("the install commands of the README and the guides", () => {
  it("finds the README's helm install", () => {
    expect(helmInstalls(readFileSync(join(repoRoot, "README.md"), "utf8"))).not.toEqual([]);
  });

  it("creates the namespace each helm install installs into", () => {
    const missing = PAGES.flatMap((page) =>
      helmInstalls(readFileSync(join(repoRoot, page), "utf8"))
        .filter(({ command, before }) => {
          const namespace = /(?:-n|--namespace)[ =]("?\$?[\w-]+"?)/.exec(command)?.[1];
          if (namespace === undefined || command.includes("--create-namespace")) return false;
          return !new RegExp(`create (?:namespace|ns) ${namespace.replace(/[$"]/g, "\\$&")}\\b`).test(before);
        })
        .map(({ command }) => `${page}: ${command}`),
    );
    expect(missing).toEqual([]);
  });
});
