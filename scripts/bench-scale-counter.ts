// Preloaded into the `knative-fleet run` process of scripts/bench-scale.ts (NODE_OPTIONS=--import=...):
// counts every request the process sends, by API server and method, into the file named by
// BENCH_REQUEST_COUNTS, twice a second. The counting is RestClient's own (the figures behind "a no-op
// writes nothing"), summed over every client of the process, hub and spokes. BENCH_REST_MODULE names the
// rest module the process runs (dist/kube/rest.js for the built CLI; src/kube/rest.ts by default).
import { writeFileSync } from "node:fs";

const { RestClient } = (await import(
  process.env.BENCH_REST_MODULE ?? new URL("../src/kube/rest.ts", import.meta.url).href
)) as typeof import("../src/kube/rest.ts");

const file = process.env.BENCH_REQUEST_COUNTS;
if (!file) throw new Error("BENCH_REQUEST_COUNTS must name the file the counts go to");
const counts: Record<string, Record<string, number>> = {};
type Client = InstanceType<typeof RestClient>;
const prototype = RestClient.prototype as unknown as { count(this: Client, method: string): void };
const count = prototype.count;
prototype.count = function (this: Client, method: string) {
  const byMethod = counts[this.server] ?? {};
  counts[this.server] = byMethod;
  byMethod[method] = (byMethod[method] ?? 0) + 1;
  count.call(this, method);
};
setInterval(() => writeFileSync(file, JSON.stringify(counts)), 500).unref();
