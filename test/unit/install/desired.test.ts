import { describe, expect, it } from "vitest";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { renderInstall } from "../../../src/install/desired.ts";
import { createKodataSource, ReleaseLoader, render } from "../../../src/render/index.ts";
import { crObject } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// A placement gives hundreds of CRs one spec: renderInstall renders it once and shares the objects, which
// must then be exactly what each CR would have had, and safe to share.

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const serving = (name: string, cluster: string, spec: Record<string, unknown> = {}): KnativeResource =>
  KnativeResourceSchema.parse(
    crObject({
      kind: "KnativeServing",
      name,
      cluster,
      version: "1.22",
      spec: { ...spec, ingress: { kourier: { enabled: true } } },
    }),
  );

describe("renderInstall", () => {
  it("renders a spec once for every CR that has it, whatever their names and clusters; another spec anew", async () => {
    const a = serving("a-serving", "cluster-a");
    const release = await releases.load(a);
    const first = renderInstall(a, release);
    const second = renderInstall(serving("b-serving", "cluster-b"), release);
    expect(second).toBe(first);
    // What a CR of its own would have had.
    expect(first).toEqual(render(serving("c-serving", "cluster-c"), release, "knative-serving"));
    const other = renderInstall(
      serving("a-serving", "cluster-a", { config: { autoscaler: { "stable-window": "70s" } } }),
      release,
    );
    expect(other).not.toBe(first);
    expect(JSON.stringify(other)).toContain('"stable-window":"70s"');
    expect(JSON.stringify(first)).not.toContain('stable-window":"70s');
    // Another install namespace is another rendering.
    expect(renderInstall(a, release, "elsewhere")).not.toBe(first);
  });

  it("shares only what nobody can change: the objects are frozen", async () => {
    const a = serving("a-serving", "cluster-a");
    const [object] = renderInstall(a, await releases.load(a));
    expect(() => {
      object!.metadata.labels = {};
    }).toThrow(TypeError);
    expect(() => {
      (object!.metadata as Record<string, unknown>).name = "x";
    }).toThrow(TypeError);
  });

  it("keeps a few renderings: CRs that each have their own spec do not each hold one", async () => {
    const a = serving("a-serving", "cluster-a");
    const release = await releases.load(a);
    const windowOf = (i: number) =>
      serving("a-serving", "cluster-a", { config: { autoscaler: { "stable-window": `${60 + i}s` } } });
    const first = renderInstall(windowOf(0), release);
    expect(renderInstall(windowOf(0), release)).toBe(first);
    for (let i = 1; i <= 8; i++) renderInstall(windowOf(i), release);
    // Eight newer ones pushed it out: rendered again, equal but not the same.
    const again = renderInstall(windowOf(0), release);
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });
});
