// Hostile input, measured: peak RSS of a sync whose repository holds a 150 MiB blob outside the fleet
// globs and of one with 1,000 fleet files; peak RSS of manifest locations that never end (/dev/zero, an
// endless HTTP body), and of one CR with 64 locations of 24 MiB under an allowed prefix (each under the
// per-location cap, together far over the per-CR one); time and output size of 2,000 and 5,000 CRs naming
// one ClusterProfile. Each memory case runs in a fresh child process, so its peak RSS is its own.
// Usage: node scripts/bench-input.ts
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { LocationPolicySchema } from "../src/admission/locations.ts";
import { formatDiagnostic } from "../src/fleet/diagnostic.ts";
import { buildFleetModel } from "../src/fleet/model.ts";
import { LocationLoader } from "../src/render/location-loader.ts";
import { GitSource } from "../src/source/git-source.ts";
import { gitSourceSpecSchema } from "../src/source/spec.ts";
import { startGitServer } from "../test/support/git-server.ts";

const MiB = 1024 * 1024;
const cr = (i: number, cluster = `spoke-${i}`) => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: serving-${i}
spec:
  version: "1.21"
  clusterProfileRef: {name: ${cluster}, namespace: fleet-system}
`;

const [mode, arg] = process.argv.slice(2);
if (mode === "sync") {
  // Child: one sync of the repository at `arg`, as the service runs it.
  const cacheDir = await mkdtemp(join(tmpdir(), "knative-fleet-bench-input-"));
  const started = performance.now();
  try {
    const snapshot = await new GitSource(gitSourceSpecSchema.parse({ url: arg }), { cacheDir }).sync();
    const model = buildFleetModel(snapshot.files, { defaultNamespace: "knative-fleet" });
    report({
      outcome: `${snapshot.files.length} files, ${model.resources.length} resources`,
      ms: performance.now() - started,
    });
  } catch (error) {
    report({ outcome: (error as Error).message, ms: performance.now() - started });
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
} else if (mode === "location") {
  // Child: three loads of a location that never ends, under the default caps.
  const policy = LocationPolicySchema.parse(
    arg?.startsWith("http") ? { allowedPrefixes: [arg], allowHttp: true, allowPrivateNetworks: true } : {},
  );
  const loader = new LocationLoader({ policy, kodataDir: tmpdir() });
  const errors = await Promise.all(
    [1, 2, 3].map((i) =>
      loader.load(`${arg}?${i}`).then(
        () => "loaded",
        (error: Error) => error.message,
      ),
    ),
  );
  report({ outcome: errors[0] });
} else if (mode === "many-locations") {
  // Child: one CR's 64 locations under `arg` (an allowed prefix), loaded at once as the release loader does.
  const policy = LocationPolicySchema.parse({
    allowedPrefixes: [arg],
    allowHttp: true,
    allowPrivateNetworks: true,
  });
  const loader = new LocationLoader({ policy, kodataDir: tmpdir() });
  const budget = loader.budget();
  const started = performance.now();
  const results = await Promise.allSettled(
    Array.from({ length: 64 }, (_, i) => loader.load(`${arg}l${i}.yaml`, budget)),
  );
  const refused = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
  report({
    outcome: `${results.length - refused.length} loaded, ${refused.length} refused: ${refused[0]?.reason?.message ?? "-"}`,
    ms: performance.now() - started,
  });
} else {
  await parent();
}

function report(fields: Record<string, unknown>): void {
  // VmHWM, not resourceUsage().maxRSS: Linux carries ru_maxrss across exec, so a child would report the
  // parent's peak (this parent holds the 150 MiB blob it wrote).
  const hwmKiB = Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1]);
  console.log(JSON.stringify({ ...fields, maxRssMiB: Math.round(hwmKiB / 1024) }));
}

async function child(...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await promisify(execFile)(process.execPath, [import.meta.filename, ...args], {
    maxBuffer: 16 * MiB,
  });
  return JSON.parse(stdout.trim().split("\n").pop()!);
}

async function parent(): Promise<void> {
  const server = await startGitServer({ allowFilter: true });
  const plainServer = await startGitServer();
  try {
    const baseline = await child("location", join(tmpdir(), "absent.yaml"));
    console.log(`baseline (a child that loads nothing): peak RSS ${baseline.maxRssMiB} MiB`);

    const small = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`clusters/c${i}.yaml`, cr(i)]));
    await server.createRepo("blob", {
      ...small,
      "assets/big.bin": randomBytes(150 * MiB * 0.75).toString("base64"), // 150 MiB of incompressible text
    });
    const blob = await child("sync", server.url("blob"));
    console.log(
      `sync, 10 fleet files + a 150 MiB blob outside the globs, server filters: peak RSS ${blob.maxRssMiB} MiB (${Math.round(Number(blob.ms))} ms): ${blob.outcome}`,
    );
    await plainServer.createRepo("blob", {
      ...small,
      "assets/big.bin": randomBytes(150 * MiB * 0.75).toString("base64"),
    });
    const unfiltered = await child("sync", plainServer.url("blob"));
    console.log(
      `the same, server cannot filter (maxFetchBytes 32 MiB): peak RSS ${unfiltered.maxRssMiB} MiB (${Math.round(Number(unfiltered.ms))} ms): ${unfiltered.outcome}`,
    );

    const many = Object.fromEntries(
      Array.from({ length: 1000 }, (_, i) => [`clusters/r${i % 10}/c${i}.yaml`, cr(i)]),
    );
    await server.createRepo("many", many);
    const thousand = await child("sync", server.url("many"));
    console.log(
      `sync, 1,000 fleet files: peak RSS ${thousand.maxRssMiB} MiB (${Math.round(Number(thousand.ms))} ms): ${thousand.outcome}`,
    );
  } finally {
    await server.close();
    await plainServer.close();
  }

  const zero = await child("location", "/dev/zero");
  console.log(`3 locations /dev/zero: peak RSS ${zero.maxRssMiB} MiB; ${zero.outcome}`);
  const endless = createServer((_req, res) => {
    const chunk = Buffer.alloc(64 * 1024, "#");
    const write = () => {
      while (res.write(chunk)) {}
    };
    res.on("drain", write);
    write();
  });
  await new Promise<void>((resolve) => endless.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}/endless.yaml`;
    const streamed = await child("location", url);
    console.log(
      `3 endless HTTP locations (cap 32 MiB each): peak RSS ${streamed.maxRssMiB} MiB; ${streamed.outcome}`,
    );
  } finally {
    endless.closeAllConnections();
    endless.close();
  }

  // 24 MiB of manifests (one ConfigMap and a long comment), the same bytes for every location.
  const large = Buffer.from(
    `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: large\n# ${"x".repeat(24 * MiB - 64)}\n`,
  );
  const locations = createServer((_req, res) => {
    res.writeHead(200, { "content-length": large.length });
    res.end(large);
  });
  await new Promise<void>((resolve) => locations.listen(0, "127.0.0.1", resolve));
  try {
    const prefix = `http://127.0.0.1:${(locations.address() as AddressInfo).port}/`;
    const many = await child("many-locations", prefix);
    console.log(
      `one CR, 64 locations of 24 MiB (maxBytesPerResource 64 MiB): peak RSS ${many.maxRssMiB} MiB ` +
        `(${Math.round(Number(many.ms))} ms); ${many.outcome}`,
    );
  } finally {
    locations.closeAllConnections();
    locations.close();
  }

  for (const count of [2000, 5000]) {
    const files = Array.from({ length: count }, (_, i) => ({
      path: `clusters/c${i}.yaml`,
      text: cr(i, "shared"),
    }));
    const started = performance.now();
    const model = buildFleetModel(files, { defaultNamespace: "knative-fleet" });
    const output = model.diagnostics.map(formatDiagnostic).join("\n");
    console.log(
      `${count} CRs naming one ClusterProfile: ${Math.round(performance.now() - started)} ms, ` +
        `${model.diagnostics.length} diagnostics printed (${model.omittedDiagnostics} left out), ${output.length} bytes`,
    );
  }
}
