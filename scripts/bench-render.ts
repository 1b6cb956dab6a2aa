// Render cost for one KnativeServing (kourier) and one KnativeEventing against the real releases in ../shared:
// the first load (reading and parsing the release, once per process), then render() on the cached release.
// Run: npx node --expose-gc scripts/bench-render.ts [runs]   (--expose-gc: heap figures without garbage)

import { KnativeEventingSchema, KnativeServingSchema } from "../src/api/knative.ts";
import { createKodataSource, type Release, ReleaseLoader, render } from "../src/render/index.ts";
import { knativeReleasesDir } from "../test/support/shared.ts";

const runs = Number(process.argv[2] ?? 50);
const loader = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));

const serving = KnativeServingSchema.parse({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: { name: "knative-serving", namespace: "knative-serving" },
  spec: { ingress: { kourier: { enabled: true } }, "high-availability": { replicas: 2 } },
});
const eventing = KnativeEventingSchema.parse({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeEventing",
  metadata: { name: "knative-eventing", namespace: "knative-eventing" },
  spec: { "high-availability": { replicas: 2 } },
});

const megabytes = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

async function bench(label: string, resource: Parameters<typeof render>[0]): Promise<void> {
  let started = performance.now();
  const release: Release = await loader.load(resource);
  const loadMs = performance.now() - started;
  started = performance.now();
  const objects = render(resource, release).length;
  const firstRenderMs = performance.now() - started;
  const timings: number[] = [];
  for (let run = 0; run < runs; run++) {
    started = performance.now();
    render(resource, release);
    timings.push(performance.now() - started);
  }
  timings.sort((a, b) => a - b);
  const mean = timings.reduce((sum, ms) => sum + ms, 0) / timings.length;
  const p95 = timings[Math.min(timings.length - 1, Math.floor(timings.length * 0.95))]!;
  console.log(
    `${label} ${release.version}: ${release.manifests.length} release objects -> ${objects} rendered; ` +
      `first load ${loadMs.toFixed(0)} ms, first render ${firstRenderMs.toFixed(1)} ms, ` +
      `render mean ${mean.toFixed(1)} ms, p95 ${p95.toFixed(1)} ms (${runs} runs)`,
  );
}

const heapUsed = () => {
  globalThis.gc?.();
  return process.memoryUsage().heapUsed;
};
const heapBefore = heapUsed();
await bench("Serving+kourier", serving);
await bench("Eventing", eventing);
const heapAfter = heapUsed();
console.log(
  `heap used ${megabytes(heapAfter)} MB, of which the two cached releases ${megabytes(heapAfter - heapBefore)} MB` +
    `${globalThis.gc ? "" : " (with uncollected garbage: run with --expose-gc)"}; ` +
    `rss ${megabytes(process.memoryUsage().rss)} MB`,
);
