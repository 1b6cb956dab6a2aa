import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { COMPILED_DIR } from "../../../src/render/compiled.ts";
import { compileKodata, createKodataSource, parseManifests } from "../../../src/render/index.ts";

// Compiled releases (render/compiled.ts): the image parses its releases once; `run` then loads each with a
// JSON.parse. The YAML stays the truth: changed files, or a compiled copy that is not objects, mean YAML.

const CORE =
  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-features\n  namespace: knative-serving\n" +
  "data:\n  enabled: yes\n  mode: 0755\n---\n" +
  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: activator\n  namespace: knative-serving\n";

let kodata: string;
const servingDir = () => join(kodata, "knative-serving", "1.22.0");

async function write(path: string, text: string): Promise<void> {
  await mkdir(join(path, ".."), { recursive: true });
  writeFileSync(path, text);
}

const compiledFiles = () => readdirSync(join(kodata, COMPILED_DIR)).map((f) => join(kodata, COMPILED_DIR, f));

async function compileAll() {
  const out: { folder: string; bytes: number | undefined }[] = [];
  for await (const entry of compileKodata(kodata)) out.push(entry);
  return out;
}

beforeEach(async () => {
  kodata = mkdtempSync(join(tmpdir(), "kodata-"));
  await write(join(servingDir(), "2-serving-core.yaml"), CORE);
  await write(join(kodata, "ingress", "1.22", "kourier", "kourier.yaml"), CORE.split("---\n")[1]!);
  await write(join(kodata, "ingress", "1.22", "not-an-ingress", "x.yaml"), CORE);
});

describe("compiled releases", () => {
  it("compiles each release folder, and a source loads the same frozen objects the YAML gives", async () => {
    const compiled = await compileAll();
    expect(compiled.map((c) => c.folder)).toEqual([servingDir(), join(kodata, "ingress", "1.22", "kourier")]);
    expect(compiled.every((c) => (c.bytes ?? 0) > 0)).toBe(true);
    const source = createKodataSource({ dir: kodata });
    const manifests = await source.componentManifests("knative-serving", "1.22.0");
    expect(manifests).toEqual(parseManifests(CORE, "core.yaml"));
    expect(manifests[0]!.data).toEqual({ enabled: true, mode: 493 });
    expect(Object.isFrozen(manifests[0]!.data)).toBe(true);
    // The compiled folder is not a release of its own.
    expect(await source.componentVersions("knative-serving")).toEqual(["1.22.0"]);
  });

  it("is what a source reads while the YAML is unchanged, and is ignored once the YAML changes", async () => {
    await compileAll();
    const servingCopy = compiledFiles().find((f) => readFileSync(f, "utf8").includes("config-features"))!;
    writeFileSync(
      servingCopy,
      readFileSync(servingCopy, "utf8").replace('"enabled":true', '"enabled":"compiled"'),
    );
    const read = async () =>
      (await createKodataSource({ dir: kodata }).componentManifests("knative-serving", "1.22.0"))[0]!.data;
    expect(await read()).toEqual({ enabled: "compiled", mode: 493 });

    writeFileSync(join(servingDir(), "2-serving-core.yaml"), CORE.replace("enabled: yes", "enabled: no"));
    expect(await read()).toEqual({ enabled: false, mode: 493 });
  });

  it("a compiled copy that is not Kubernetes objects is ignored: the YAML is parsed", async () => {
    await compileAll();
    for (const [index, text] of ['{"not":"a list"}', '[{"kind":"ConfigMap"}]', "[{", ""].entries()) {
      for (const file of compiledFiles()) writeFileSync(file, text);
      const manifests = await createKodataSource({ dir: kodata }).componentManifests(
        "knative-serving",
        "1.22.0",
      );
      expect(manifests, `case ${index}`).toEqual(parseManifests(CORE, "core.yaml"));
    }
  });

  it("a release with values JSON cannot carry stays with its YAML", async () => {
    await write(
      join(kodata, "knative-eventing", "1.22.0", "1.yaml"),
      `${CORE}---\n` +
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: h\n  namespace: knative-eventing\nspec:\n  maxReplicas: .inf\n",
    );
    const compiled = await compileAll();
    expect(compiled.find((c) => c.folder.includes("knative-eventing"))?.bytes).toBeUndefined();
    expect(compiledFiles()).toHaveLength(2);
    const eventing = await createKodataSource({ dir: kodata }).componentManifests(
      "knative-eventing",
      "1.22.0",
    );
    expect(eventing[2]!.spec).toEqual({ maxReplicas: Number.POSITIVE_INFINITY });
  });
});
