import { describe, expect, it } from "vitest";
import { ManifestParseError, parseManifestFiles, parseManifests } from "../../../src/render/manifest.ts";

// Release files are parsed in a worker thread: the same objects and errors as parseManifests in-process.

const files = [
  {
    origin: "1-crds.yaml",
    text: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  on: yes\n---\n",
  },
  {
    origin: "2-core.yaml",
    text: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\n  namespace: x\n",
  },
];

describe("parseManifestFiles", () => {
  it("gives what parseManifests gives, in file order, deeply frozen", async () => {
    const parsed = await parseManifestFiles(files);
    expect(parsed).toEqual(files.flatMap((f) => parseManifests(f.text, f.origin)));
    expect(parsed.map((m) => m.metadata.name)).toEqual(["a", "b"]);
    expect(Object.isFrozen(parsed[0]) && Object.isFrozen(parsed[0]!.data)).toBe(true);
  });

  it("a file that is not manifests fails with parseManifests' error, naming the file and line", async () => {
    const bad = { origin: "3-bad.yaml", text: "apiVersion: v1\nkind: ConfigMap\n---\n- a list\n" };
    const failure = parseManifestFiles([...files, bad]);
    await expect(failure).rejects.toBeInstanceOf(ManifestParseError);
    await expect(failure).rejects.toThrow(/^3-bad\.yaml:1:1: not a Kubernetes object/);
  });

  it("batches run one at a time and each gets its own answer", async () => {
    const [a, b] = await Promise.all([parseManifestFiles([files[0]!]), parseManifestFiles([files[1]!])]);
    expect(a.map((m) => m.kind)).toEqual(["ConfigMap"]);
    expect(b.map((m) => m.kind)).toEqual(["Deployment"]);
  });
});
