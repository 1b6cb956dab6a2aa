// Measures the git source against a real `git http-backend` on loopback, with a 200-file fleet repository:
// the first clone, a no-op poll (the steady state: the head has not moved), a poll after a person's push,
// and status write-backs (one file; a 1,000-cluster fleet's pages, new and then 10 changed). Prints wall time,
// requests, response bytes and the longest the event loop was held for each (the service's Leases are
// renewed on that loop: a hold longer than the renew deadline, 10 s, costs a replica its Lease).
// Usage: node scripts/bench-git.ts [files=200] [no-op polls=20]
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { GitSource } from "../src/source/git-source.ts";
import { deflateWithoutWebStreams } from "../src/source/index.ts";
import { Poller } from "../src/source/poller.ts";
import { gitSourceSpecSchema } from "../src/source/spec.ts";
import type { StatusFile } from "../src/status/summary.ts";
import { statusChanges } from "../src/status/write-back.ts";
import { type GitServer, startGitServer } from "../test/support/git-server.ts";

const fileCount = Number(process.argv[2] ?? 200);
const noOpPolls = Number(process.argv[3] ?? 20);

/** A cluster file of realistic size (~1.5 KiB). */
function clusterFile(i: number): string {
  const components = ["serving", "eventing", "kourier", "net-istio", "eventing-kafka"];
  return [
    `name: cluster-${i}`,
    `region: region-${i % 7}`,
    "knative:",
    ...components.flatMap((c) => [
      `  ${c}:`,
      `    version: "1.${15 + (i % 5)}.0"`,
      "    config:",
      ...settings(c),
    ]),
    "",
  ].join("\n");
}

function settings(component: string): string[] {
  return Array.from({ length: 8 }, (_, k) => `      ${component}-setting-${k}: "value-${k}"`);
}

async function measure<T>(server: GitServer, run: () => Promise<T>) {
  server.resetRequests();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const started = performance.now();
  const result = await run();
  const ms = performance.now() - started;
  loop.disable();
  const bytes = server.requests.reduce((sum, r) => sum + r.responseBytes, 0);
  return { result, ms, requests: server.requests.length, bytes, heldMs: loop.max / 1e6 };
}

const server = await startGitServer();
const cacheDir = await mkdtemp(join(tmpdir(), "knative-fleet-bench-"));
try {
  const files: Record<string, string> = {};
  for (let i = 0; i < fileCount; i++) files[`clusters/region-${i % 7}/cluster-${i}.yaml`] = clusterFile(i);
  await server.createRepo("fleet", files);
  // As `run` sets isomorphic-git up (src/source/deflate.ts).
  deflateWithoutWebStreams();
  const source = new GitSource(gitSourceSpecSchema.parse({ url: server.url("fleet") }), { cacheDir });
  const poller = new Poller({
    source,
    onSnapshot: () => {},
    onError: (error) => {
      throw error;
    },
  });

  const rows: [string, { ms: number; requests: number; bytes: number; heldMs: number }][] = [];
  const clone = await measure(server, () => poller.syncNow());
  if (clone.result !== "emitted") throw new Error(`first poll: ${clone.result}`);
  rows.push([`clone (first poll, ${fileCount} files)`, clone]);

  const noOps = [];
  for (let i = 0; i < noOpPolls; i++) {
    const noOp = await measure(server, () => poller.syncNow());
    if (noOp.result !== "head-unchanged") throw new Error(`no-op poll: ${noOp.result}`);
    noOps.push(noOp);
  }
  noOps.sort((a, b) => a.ms - b.ms);
  rows.push([`no-op poll (median of ${noOpPolls})`, noOps[Math.floor(noOps.length / 2)]!]);

  await server.pushChange("fleet", {
    files: { "clusters/region-0/cluster-0.yaml": clusterFile(1) },
    message: "m",
  });
  rows.push(["poll after a 1-file push", await measure(server, () => poller.syncNow())]);

  rows.push([
    "status write-back (1 file)",
    await measure(server, () =>
      source.commitAndPush({
        files: new Map([["status/cluster-0.yaml", "ready: true\n"]]),
        message: "Status",
        author: { name: "knative-fleet", email: "knative-fleet@example.com" },
      }),
    ),
  ]);
  rows.push(["poll after the status commit", await measure(server, () => poller.syncNow())]);

  // The status folder of a 1,000-cluster fleet: a page per cluster (status/clusters/<namespace>/<name>.md),
  // each starting as the service writes it, and derived from the branch head as the service derives it
  // (statusChanges: a page is read only when its content changed, and checked to be the service's).
  const pages = (round: number, changed: number): StatusFile[] =>
    Array.from({ length: 1000 }, (_, i) => ({
      name: `clusters/fleet-system/cluster-${i}.md`,
      content: `# Cluster status\n\n**cluster-${i}**\n\n| CR | Ready | version |\n|---|---|---|\n| serving | ${i < changed ? round : 0} | 1.22.1 |\n`,
    }));
  const author = { name: "knative-fleet", email: "knative-fleet@example.com" };
  const writeBack = (on: GitSource, round: number, changed: number) =>
    on.commitAndPush({
      files: (base) => statusChanges(base, "status/", pages(round, changed)),
      message: "Status",
      author,
    });
  for (const [name, round, changed] of [
    ["status write-back (1,000 new pages)", 1, 1000],
    ["status write-back (1,000 pages, 10 changed)", 2, 10],
  ] as const)
    rows.push([name, await measure(server, () => writeBack(source, round, changed))]);
  // A replica started since: its objects came in one pack, read into memory once, where each read of
  // a tree or page settles at once and a write-back's reads run in one turn of the event loop.
  const cloned = new GitSource(gitSourceSpecSchema.parse({ url: server.url("fleet") }), {
    cacheDir: await mkdtemp(join(cacheDir, "cloned-")),
  });
  await cloned.fetch();
  rows.push([
    "status write-back (1,000 pages, 10 changed, fresh clone)",
    await measure(server, () => writeBack(cloned, 3, 10)),
  ]);

  const width = Math.max(...rows.map(([name]) => name.length));
  console.log(
    `${"".padEnd(width)}  ${"time".padStart(9)}  ${"requests".padStart(8)}  ${"bytes".padStart(9)}  ${"loop held".padStart(9)}`,
  );
  for (const [name, { ms, requests, bytes, heldMs }] of rows) {
    console.log(
      `${name.padEnd(width)}  ${`${ms.toFixed(1)} ms`.padStart(9)}  ${String(requests).padStart(8)}  ${String(bytes).padStart(9)}  ${`${heldMs.toFixed(0)} ms`.padStart(9)}`,
    );
  }
} finally {
  await server.close();
  await rm(cacheDir, { recursive: true, force: true });
}
