// Measures the CRD Established wait of an apply pass on a real spoke: the watch (src/apply/established.ts)
// against its polling fallback (every 200 ms, one CRD after another: the wait before the watch), in paired
// rounds. Each round deletes the Knative Eventing 1.22 CRDs from the sandbox's second spoke, applies them
// as a pass does (8 at a time, with the set's labels) and times the wait, counting its requests.
// Usage: KNATIVE_FLEET_SANDBOX=<state dir> node scripts/bench-crd-wait.ts [--rounds 3]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseAllDocuments } from "yaml";
import { type OpenCrdCache, waitEstablished } from "../src/apply/established.ts";
import { inParallel } from "../src/apply/parallel.ts";
import { isCrd, type KubeObject, nameOf } from "../src/kube/object.ts";
import { readSandbox } from "../test/sandbox/sandbox.ts";
import { adminClient } from "../test/support/hub.ts";
import { knativeReleasesDir } from "../test/support/shared.ts";
import { waitUntil } from "../test/support/wait.ts";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "3" } } });
const stateDir = process.env.KNATIVE_FLEET_SANDBOX;
const sandbox = stateDir ? readSandbox(stateDir) : undefined;
if (!sandbox || sandbox.spokes.length < 2) {
  console.error("bench-crd-wait: needs KNATIVE_FLEET_SANDBOX naming a sandbox with 2 spokes");
  process.exit(1);
}
const LABELS = { "app.kubernetes.io/managed-by": "knative-fleet", "knative.dev/cr-name": "bench-crd-wait" };
const file = join(knativeReleasesDir(), "knative-eventing", "1.22.2", "1-eventing-crds.yaml");
const crds = parseAllDocuments(readFileSync(file, "utf8"))
  .map((d) => d.toJSON() as KubeObject | null)
  .filter((o): o is KubeObject => o !== null && isCrd(o))
  .map(
    (o): KubeObject => ({ ...o, metadata: { ...o.metadata, labels: { ...o.metadata.labels, ...LABELS } } }),
  );
const names = new Set(crds.map(nameOf));
const client = adminClient(sandbox.spokes[1]!);

/** A watch that fails at once: the wait polls from the start, as it did before the watch. */
const refusedWatch: OpenCrdCache = (_client, _selection, onError) => ({
  on: () => {},
  start: () => setTimeout(() => onError(new Error("polling, for the comparison")), 0),
  stop: () => {},
  hasSynced: () => new Promise(() => {}),
  list: () => [],
});

async function removeCrds(): Promise<void> {
  await waitUntil(
    "the CRDs gone",
    async () => {
      const { items } = await client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition");
      const left = items.filter((c) => names.has(nameOf(c)));
      for (const c of left.filter((c) => !c.metadata.deletionTimestamp))
        await client.delete(c.apiVersion, c.kind, undefined, nameOf(c));
      return left.length === 0 ? true : undefined;
    },
    180_000,
  );
}

console.log(`${crds.length} CRDs of ${file} on ${sandbox.spokes[1]!.name}`);
for (let round = 1; round <= Number(values.rounds); round++) {
  for (const mode of ["poll", "watch"] as const) {
    await removeCrds();
    await inParallel(crds, 8, (o) => client.apply(o));
    const before = new Map(client.rest.requestCounts);
    const started = performance.now();
    await waitEstablished(client, crds, {
      timeoutMs: 60_000,
      labels: LABELS,
      ...(mode === "poll" ? { open: refusedWatch } : {}),
    });
    const ms = performance.now() - started;
    const requests = [...client.rest.requestCounts]
      .map(([method, n]) => [method, n - (before.get(method) ?? 0)] as const)
      .filter(([, n]) => n > 0)
      .map(([method, n]) => `${n} ${method}`)
      .join(", ");
    // Every kind served before the CRDs go: deleting a CRD whose storage is still starting can leave it
    // Terminating for good ("could not list instances: storage is (re)initializing").
    await inParallel(crds, 8, (crd) => {
      const spec = crd.spec as {
        group: string;
        names: { kind: string };
        versions: { name: string; storage: boolean }[];
      };
      const version = spec.versions.find((v) => v.storage)!.name;
      return waitUntil(`${nameOf(crd)} served`, () =>
        client.list(`${spec.group}/${version}`, spec.names.kind).catch(() => undefined),
      );
    });
    console.log(
      `round ${round} ${mode.padEnd(5)}: Established after ${ms.toFixed(0).padStart(5)} ms, ${requests}`,
    );
  }
}
await removeCrds();
process.exit(0);
