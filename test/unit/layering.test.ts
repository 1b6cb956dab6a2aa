import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { files, folderOf, SRC, textOf, withoutComments } from "./layering/support.ts";

// The layering of src/ (docs/CONVENTIONS.md), checked so it stays true: a folder imports only folders of a
// lower layer, never one of its own layer or above. The reconcile stage is wired only by the service and
// `knative-fleet run`; plan runs the install model and the engine, never the reconcile.

const LAYERS: readonly (readonly string[])[] = [
  ["text"],
  ["api"],
  ["kube"],
  ["observability", "fleet", "apply", "admission"],
  ["source", "render", "access", "mirror", "placement"],
  ["verify", "upgrade", "preflight"],
  ["install", "rollout"],
  ["sync"],
  ["reconcile", "plan", "status"],
  ["service"],
  ["commands"],
  ["cli.ts"],
];
const layerOf = new Map(LAYERS.flatMap((folders, layer) => folders.map((f) => [f, layer] as const)));

/** Every import of a src file that leaves its folder: [importing file, imported folder]. */
function crossImports(): [string, string][] {
  return files(SRC).flatMap((file) => {
    const text = textOf(file);
    return [...text.matchAll(/from "(\.[^"]+)"/g)]
      .map((m) => folderOf(join(file, "..", m[1]!)))
      .filter((target) => target !== folderOf(file))
      .map((target): [string, string] => [relative(SRC, file), target]);
  });
}

/** The files each src file imports (type-only imports included: a circle of types is a circle still). */
function importGraph(): Map<string, string[]> {
  return new Map(
    files(SRC).map((file) => [
      relative(SRC, file),
      [...textOf(file).matchAll(/from "(\.[^"]+)"/g)].map((m) => relative(SRC, join(file, "..", m[1]!))),
    ]),
  );
}

describe("the layering of src/", () => {
  it("no file imports itself through others: no import circle, within a folder either", () => {
    const graph = importGraph();
    const circles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === "done") return;
      if (state.get(file) === "open") {
        circles.push([...path.slice(path.indexOf(file)), file].join(" -> "));
        return;
      }
      state.set(file, "open");
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      state.set(file, "done");
    };
    for (const file of graph.keys()) visit(file, []);
    expect(circles).toEqual([]);
  });

  it("knows every folder", () => {
    const folders = new Set(files(SRC).map(folderOf));
    expect([...folders].filter((f) => !layerOf.has(f))).toEqual([]);
  });

  it("no folder imports one of its own layer or a higher one", () => {
    const upward = crossImports().filter(
      ([file, target]) => layerOf.get(target)! >= layerOf.get(folderOf(join(SRC, file)))!,
    );
    expect(upward.map(([file, target]) => `${file} -> ${target}/`)).toEqual([]);
  });

  it("only the service wiring and `knative-fleet run` import the reconcile stage (its types may be read)", () => {
    const importers = files(SRC)
      .filter(
        (file) =>
          folderOf(file) !== "reconcile" &&
          [...textOf(file).matchAll(/^import (?!type )[^;]*?from "(\.[^"]+)"/gm)].some(
            (m) => folderOf(join(file, "..", m[1]!)) === "reconcile",
          ),
      )
      .map((file) => relative(SRC, file));
    expect([...new Set(importers)].sort()).toEqual(["commands/run.ts", "service/service.ts"]);
  });

  it("no cast between object types: render emits the one KubeObject", () => {
    const casts = files(SRC).flatMap((file) =>
      [...textOf(file).matchAll(/\bas (?:unknown as )?(KubeObject|Manifest|KnativeResource)\b/g)].map(
        (m) => `${relative(SRC, file)}: ${m[0]}`,
      ),
    );
    expect(casts).toEqual([]);
  });

  it("a hub object's identity has one home: fleet/identity.ts types, spells and reads it", () => {
    // A spelling `kind namespace/name` or `kind/namespace/name` (the work queue's old second spelling), and
    // parsing one back into its parts. The spoke object's key (kube/object.ts refKey) is group/kind/….
    // biome-ignore lint/suspicious/noTemplateCurlyInString: refKey's source text, literally.
    const spokeObjectKey = "kube/object.ts: ${r.kind}/${r.namespace}/${r.name}";
    const elsewhere = files(SRC)
      .filter((file) => relative(SRC, file) !== "fleet/identity.ts")
      .flatMap((file) =>
        [
          ...textOf(file).matchAll(
            /\$\{[^}`]*kind[^}`]*\}[ /]\$\{[^}`]*namespace[^}`]*\}\/\$\{[^}`]*name[^}`]*\}|split\([^)]*\) as \[\s*KnativeKind\b|function identityOf\b|interface \w*Identity\b/gi,
          ),
        ].map((m) => `${relative(SRC, file)}: ${m[0]}`),
      )
      .filter((site) => site !== spokeObjectKey);
    expect(elsewhere).toEqual([]);
  });

  it("every label, annotation and extension name is spelt in api/labels.ts alone", () => {
    // A string that reads `<domain>/<key>`, the key slashes and all (`<domain>/exec/additional-args`), an API
    // version (`<group>/v1beta1`) aside; comments do not count.
    const elsewhere = files(SRC)
      .filter((file) => relative(SRC, file) !== "api/labels.ts")
      .flatMap((file) =>
        [...withoutComments(textOf(file)).matchAll(/["`](?:[a-z0-9-]+\.)+[a-z]{2,}\/[a-zA-Z][\w./-]*["`]/g)]
          .map((m) => m[0])
          .filter((name) => !/\/v\d+(?:(?:alpha|beta)\d+)?["`]$/.test(name))
          .map((name) => `${relative(SRC, file)}: ${name}`),
      );
    expect(elsewhere).toEqual([]);
  });
});
