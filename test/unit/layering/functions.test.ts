import ts from "typescript";
import { describe, expect, it } from "vitest";
import { files, fromSrc, SRC, textOf } from "./support.ts";

// Functions short enough to read at once (docs/architecture.md): a phase that grows past 80 lines is a
// room that needs splitting, as gateApplies did. The few that are long by nature are named here.

const MAX_LINES = 80;
const LONG_BY_NATURE: Record<string, string> = {
  // One registry of every metric: a list, not logic.
  createMetrics: "the metric registry",
  // The exec credential protocol end to end (spawn, deadline, output cap, parse).
  spawnPlugin: "the exec plugin protocol",
  // A placement's expansion per selected cluster, overrides in order.
  expandOne: "one placement's expansion",
  // A ClusterProfile's access providers to one endpoint, each provider format in turn.
  spokeEndpoint: "the ClusterProfile access formats",
  // The apply set's ordered passes (CRDs, namespaces, the rest, waits).
  runApplySet: "the apply set's passes",
};

/** A function's name; an anonymous one is named by the function it is written in (its body, in effect). */
function nameOf(node: ts.Node, source: ts.SourceFile): string {
  for (let at: ts.Node | undefined = node; at !== undefined; at = at.parent) {
    if (!ts.isFunctionLike(at)) continue;
    const named = at.name ?? (ts.isVariableDeclaration(at.parent) ? at.parent.name : undefined);
    if (named !== undefined) return named.getText(source);
  }
  return "(anonymous)";
}

/** Every function in src/ longer than MAX_LINES, as `file:line name (lines)`. */
function longFunctions(): { name: string; where: string }[] {
  return files(SRC).flatMap((file) => {
    const source = ts.createSourceFile(file, textOf(file), ts.ScriptTarget.Latest, true);
    const found: { name: string; where: string }[] = [];
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
        const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        if (last - first + 1 > MAX_LINES) {
          const name = nameOf(node, source);
          found.push({ name, where: `${fromSrc(file)}:${first + 1} ${name} (${last - first + 1} lines)` });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    return found;
  });
}

describe("the size of src/'s functions and files", () => {
  it("no file is over 600 lines: a room that grows past it is split along its seams", () => {
    const long = files(SRC)
      .map((file) => ({ file: fromSrc(file), lines: textOf(file).split("\n").length }))
      .filter(({ lines }) => lines > 600);
    expect(long).toEqual([]);
  });

  it(`no function is over ${MAX_LINES} lines, but those long by nature`, () => {
    const long = longFunctions();
    expect(long.filter(({ name }) => !(name in LONG_BY_NATURE)).map(({ where }) => where)).toEqual([]);
    // An allowlisted name that is no longer long leaves the list.
    expect(Object.keys(LONG_BY_NATURE).filter((name) => !long.some((f) => f.name === name))).toEqual([]);
  });

  it("only the service wiring imports the rollout's I/O edge (stage.ts); the sync reads its types in edge.ts", () => {
    const importers = files(SRC)
      .filter((file) => /from "[^"]*rollout\/stage\.ts"|from "\.\/stage\.ts"/.test(textOf(file)))
      .map(fromSrc)
      .filter((path) => !path.startsWith("rollout/"));
    expect(importers).toEqual(["service/service.ts"]);
  });
});
