import { describe, expect, it } from "vitest";
import { ManifestParseError, parseManifestFiles, parseManifests } from "../../../src/render/manifest.ts";

// Release files are parsed one document at a time in slices of the event loop: the same objects and errors as
// parseManifests, and timers keep running meanwhile.

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

  it("gives the event loop back while a large release is parsed", async () => {
    // About 2 MB of YAML, as much as a Serving release and its ingress.
    const big = {
      origin: "2-core.yaml",
      text: Array.from(
        { length: 4000 },
        (_, i) =>
          `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c${i}\ndata:\n  k: "${"v".repeat(400)}"\n`,
      ).join("---\n"),
    };
    let turns = 0;
    let parsed = false;
    const tick = (): void => {
      turns++;
      if (!parsed) setImmediate(tick);
    };
    setImmediate(tick);
    const started = performance.now();
    const manifests = await parseManifestFiles([big]);
    parsed = true;
    const elapsed = performance.now() - started;
    expect(manifests).toHaveLength(4000);
    // At least one turn of the loop per slice of parsing (a slice is 10 ms).
    expect(turns).toBeGreaterThanOrEqual(Math.floor(elapsed / 20));
    expect(turns).toBeGreaterThan(1);
  });

  it("a file with YAML errors fails with all of them, not with the first object", async () => {
    const broken = {
      origin: "4-broken.yaml",
      text: `${files[1]!.text}---\nkey: [unclosed\n---\na: 1\na: 2\n`,
    };
    await expect(parseManifestFiles([broken])).rejects.toThrow(
      /^invalid YAML: 4-broken\.yaml:8:1: flow sequence.*; 4-broken\.yaml:10:1 a: duplicate key/,
    );
  });
});
