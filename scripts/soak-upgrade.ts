// knative-fleet upgraded under load: `helm upgrade` from the previous release (its chart and its image, built
// from the git history) to this checkout's, while a rollout is in flight and CRs change, on real nodes (the
// sandbox's kubelets and containerd, as test/integration/release/real-node.test.ts runs the chart). Two
// replicas with leader election, three spokes behind a counting proxy, a rollout policy with a canary wave.
// It measures what users ask of an upgrade, from `helm upgrade` until the rollout completed: the writes each
// spoke sees (a spoke whose CR did not change must see none), that the rollout resumes and completes, and
// that no hub CR loses its status or, unchanged, turns unhealthy (every change of every CR is watched).
// Prints the figures and a Markdown table; exits 1 when a spoke saw an unneeded write or a CR lost status.
// Usage: [KNATIVE_FLEET_SANDBOX=<state dir>] node scripts/soak-upgrade.ts [--from <commit>] [--soak 30s]
// --from: the previous release (default b80226c, the main commit before this session's first merge).
// Needs root (buildah, containerd, kubelet), as the real-node test does. Without KNATIVE_FLEET_SANDBOX a
// sandbox of 3 spokes is started and stopped at the end.
import { execFile, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs, promisify } from "node:util";
import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../src/api/knative.ts";
import { DESIRED_HASH_ANNOTATION } from "../src/api/labels.ts";
import { Informer } from "../src/kube/informer.ts";
import type { KubeObject } from "../src/kube/object.ts";
import { ROLLOUT_STATE_CONFIGMAP } from "../src/rollout/state.ts";
import { SANDBOX_ENV } from "../test/sandbox/index.ts";
import { createCa, serverExtensions, signedCert } from "../test/sandbox/pki.ts";
import { freePort } from "../test/sandbox/processes.ts";
import { buildNodeTools, type RealNode, startRealNode, stopNodes } from "../test/sandbox/real-node.ts";
import { down, readSandbox, up } from "../test/sandbox/sandbox.ts";
import { type FleetFiles, type FleetLayout, renderFiles } from "../test/soak/model.ts";
import { isHealthy, notReady } from "../test/soak/observer.ts";
import { startGitServer } from "../test/support/git-server.ts";
import { adminClient, copyClusterProfile, ensureNamespace, installFleetCrds } from "../test/support/hub.ts";
import { startClusterProxy } from "../test/support/loopback-proxies.ts";
import { knativeReleasesDir, repoRoot } from "../test/support/shared.ts";
import { cleanSpokes } from "../test/support/spokes.ts";
import { waitUntil } from "../test/support/wait.ts";

const execFileAsync = promisify(execFile);
const { values } = parseArgs({
  options: { from: { type: "string", default: "b80226c" }, soak: { type: "string", default: "30s" } },
});
const RELEASE = "fleet";
const NAMESPACE = "knative-fleet";
const PROFILES = "upgrade-clusters";
const CREDENTIALS = "upgrade-credentials";
const REPO = "fleet";
const log = (line: string) => console.log(`${new Date().toISOString().slice(11, 19)} ${line}`);

const work = mkdtempSync(join(tmpdir(), "knative-fleet-upgrade-"));
const stateDir = process.env[SANDBOX_ENV];
const sandbox = stateDir
  ? (readSandbox(stateDir) ??
    (() => {
      throw new Error(`no sandbox in ${stateDir}`);
    })())
  : await up({ stateDir: mkdtempSync(join(tmpdir(), "upgrade-sandbox-")), spokes: 3 });
const spokes = sandbox.spokes.slice(0, 3);
const hub = adminClient(sandbox.hub);
const helmBin = join(sandbox.binDir, "helm");
const hubPort = new URL(sandbox.hub.server).port;
const postRenderer = join(repoRoot, "test", "integration", "release", "real-node-post-renderer.ts");
const helm = (...args: string[]) =>
  execFileAsync(helmBin, [...args, "--kubeconfig", sandbox.hub.adminKubeconfig], {
    env: { ...process.env, PATH: `${join(process.execPath, "..")}:${process.env.PATH}` },
    maxBuffer: 16 << 20,
  });

// ── Both releases' images and charts ──────────────────────────────────────────────────────────────────
const previousTree = join(work, "previous");
mkdirSync(previousTree);
execFileSync("sh", ["-c", `git -C '${repoRoot}' archive '${values.from}' | tar -x -C '${previousTree}'`]);
// build-image.sh takes Node from node_modules/.bin: the same Node 24, so the same cached base image.
symlinkSync(join(repoRoot, "node_modules"), join(previousTree, "node_modules"));
const previousCommit = execFileSync("git", ["-C", repoRoot, "rev-parse", "--short=12", values.from], {
  encoding: "utf8",
}).trim();
const currentCommit = execFileSync("git", ["-C", repoRoot, "rev-parse", "--short=12", "HEAD"], {
  encoding: "utf8",
}).trim();
const image = (tree: string, tag: string) => {
  const archive = join(work, `${tag.split(":")[1]}.oci.tar`);
  const started = Date.now();
  execFileSync(
    "bash",
    [
      join(tree, "scripts", "build-image.sh"),
      "--tag",
      tag,
      "--kodata",
      knativeReleasesDir(),
      "--archive",
      archive,
    ],
    {
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  log(`built ${tag} in ${Math.round((Date.now() - started) / 1000)} s`);
  return { tag, archive };
};
const previous = image(previousTree, "localhost/knative-fleet:previous");
const current = image(repoRoot, "localhost/knative-fleet:dev");

// ── The hub: a fleet repository, ClusterProfiles behind the counting proxy, real nodes ────────────────
await cleanSpokes(
  sandbox,
  spokes.map((s) => s.name),
);
const git = await startGitServer({ auth: { username: "fleet-bot", password: "upgrade-token" } });
const pki = join(work, "proxy-pki");
mkdirSync(pki);
createCa(pki, "knative-fleet-upgrade-proxy");
const cert = signedCert(pki, "server", "/CN=upgrade-proxy", serverExtensions(["IP:127.0.0.1"]));
const proxy = await startClusterProxy({
  key: readFileSync(cert.key, "utf8"),
  cert: readFileSync(cert.cert, "utf8"),
  routes: Object.fromEntries(spokes.map((s) => [s.name, s.server])),
  upstreamCa: spokes.map((s) => Buffer.from(s.caData, "base64").toString("utf8")).join("\n"),
});
for (const ns of [NAMESPACE, PROFILES]) await ensureNamespace(hub, ns);
for (const spoke of spokes)
  await copyClusterProfile(
    hub,
    { namespace: sandbox.clusterProfileNamespace, name: spoke.name },
    PROFILES,
    { url: `${proxy.url}/${spoke.name}`, caData: readFileSync(join(pki, "ca.crt")).toString("base64") },
    CREDENTIALS,
  );
await hub.apply({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name: "fleet-repository", namespace: NAMESPACE },
  stringData: { username: "fleet-bot", password: "upgrade-token" },
} as KubeObject);

const layout: FleetLayout = {
  namespace: NAMESPACE,
  profileNamespace: PROFILES,
  spokes: spokes.map((s) => s.name),
};
let marker = 0;
let files: FleetFiles = {
  serving: new Map(layout.spokes.map((s) => [s, { version: "1.21", marker: ++marker }])),
  placement: undefined,
  rollout: { canary: layout.spokes[0]!, maxUnavailable: 1, soak: values.soak! },
  broken: new Map(),
};
await git.createRepo(REPO, Object.fromEntries(renderFiles(layout, files)));
const push = async (next: FleetFiles, message: string) => {
  const before = renderFiles(layout, files);
  const after = renderFiles(layout, next);
  const changes = Object.fromEntries([...after].filter(([path, text]) => before.get(path) !== text));
  files = next;
  const commit = await git.pushChange(REPO, { message, files: changes });
  log(`pushed ${commit.slice(0, 12)}: ${message}`);
};

const { kubelet, images } = buildNodeTools(sandbox.binDir);
const nodeImages = [
  ...images,
  { name: "previous", reference: previous.tag, archive: previous.archive },
  { name: "current", reference: current.tag, archive: current.archive },
];
const ports = [Number(hubPort), Number(new URL(git.url(REPO)).port), proxy.port];
const nodes: RealNode[] = [];
nodes.push(await startRealNode(sandbox, "upgrade-node-1", kubelet, nodeImages));
for (const name of ["upgrade-node-2", "upgrade-node-3"])
  nodes.push(await startRealNode(sandbox, name, kubelet, nodeImages, { ownNetwork: { ports } }));
const plugin = (name: string) => images.find((i) => i.name === name)!.reference;
const metricsPort = await freePort();
const valuesFor = (tag: string) => ({
  image: { repository: tag.split(":")[0], tag: tag.split(":")[1], pullPolicy: "Never" },
  replicas: 2,
  fleet: {
    repository: { url: git.url(REPO), credentialsSecretRef: { name: "fleet-repository" } },
    pollInterval: "*/5 * * * * *",
    rolloutCheckInterval: "2s",
  },
  metrics: { port: metricsPort },
  multicluster: {
    pluginMount: "initContainer",
    credentials: { namespace: CREDENTIALS },
    allowedClusterProfileNamespaces: [PROFILES],
    pluginCopyImage: plugin("busybox"),
    remoteDeploymentsPollInterval: "2s",
    plugins: ["secretreader", "kubeconfig-secretreader"].map((name) => ({
      name,
      image: plugin(name),
      mountPath: `/access-plugins/${name}`,
    })),
  },
});
const helmRelease = async (verb: "install" | "upgrade", chart: string, tag: string) => {
  const file = join(work, `values-${verb}.yaml`);
  writeFileSync(file, stringify(valuesFor(tag)));
  await helm(
    verb,
    RELEASE,
    chart,
    "--namespace",
    NAMESPACE,
    "--values",
    file,
    "--post-renderer",
    postRenderer,
    "--post-renderer-args",
    `127.0.0.1:${hubPort}`,
  );
};

// ── Watching: every hub CR change, and what reaches the spokes ────────────────────────────────────────
interface CrEvent {
  at: number;
  name: string;
  hash: string | undefined;
  healthy: boolean;
  conditions: number;
  version: string | undefined;
  generation: number | undefined;
  observedGeneration: number | undefined;
  why: string;
}
const events: CrEvent[] = [];
await installFleetCrds(hub); // before the watch: on a fresh sandbox it would wait for them forever
const watch = new Informer(hub, OPERATOR_API_VERSION, "KnativeServing", undefined, NAMESPACE);
watch.on((event, cr) => {
  if (event === "DELETED") return;
  const status = cr.status as { conditions?: unknown[]; version?: string } | undefined;
  events.push({
    at: Date.now(),
    name: cr.metadata.name!,
    hash: cr.metadata.annotations?.[DESIRED_HASH_ANNOTATION],
    healthy: isHealthy(cr),
    conditions: status?.conditions?.length ?? 0,
    version: status?.version,
    generation: cr.metadata.generation as number | undefined,
    observedGeneration: (status as { observedGeneration?: number } | undefined)?.observedGeneration,
    why: isHealthy(cr) ? "" : notReady(cr),
  });
});
watch.start();
await watch.hasSynced();
const crs = () => watch.list();
const writesSince = (from: number) => {
  const counts = new Map(layout.spokes.map((s) => [s, [] as string[]]));
  for (const line of proxy.handled.slice(from)) {
    const [method = "", url = ""] = line.split(" ");
    if (method === "GET") continue;
    const spoke = url.split("/")[1] ?? "";
    counts.get(spoke)?.push(`${method} ${url.slice(spoke.length + 1).split("?")[0]}`);
  }
  return counts;
};
const rolloutState = async () => {
  const map = await hub.get("v1", "ConfigMap", NAMESPACE, ROLLOUT_STATE_CONFIGMAP);
  const text = (map?.data as Record<string, string> | undefined)?.state;
  const state = text
    ? (JSON.parse(text) as { schema?: number; phase?: string; waveName?: string })
    : undefined;
  return { state, sealed: (map?.data as Record<string, string> | undefined)?.mac !== undefined };
};
const allReadyOn = (version: string, wantMarker?: (spoke: string) => number) => () =>
  waitUntil(
    `every KnativeServing Ready on ${version}`,
    async () => {
      const list = crs();
      return list.length === layout.spokes.length &&
        list.every((cr) => {
          const spec = cr.spec as {
            version?: string;
            config?: { observability?: Record<string, string> };
            clusterProfileRef?: { name: string };
          };
          const spoke = spec.clusterProfileRef?.name ?? "";
          return (
            spec.version === version &&
            isHealthy(cr) &&
            (wantMarker === undefined ||
              spec.config?.observability?.["soak-marker"] === String(wantMarker(spoke)))
          );
        })
        ? true
        : undefined;
    },
    900_000,
  ).catch((err: Error) => {
    throw new Error(
      `${err.message}: ${crs()
        .map((cr) => `${cr.metadata.name}: ${notReady(cr)}`)
        .join("; ")}`,
    );
  });

const figures: Record<string, string | number> = { previous: previousCommit, current: currentCommit };
try {
  // ── The previous release, its fleet installed and its first rollout complete ─────────────────────
  // The previous chart lets knative-fleet get and patch the rollout state's ConfigMap but not create it, and
  // its server-side apply of a missing one is authorized as a create: a rollout policy never started until
  // someone made the ConfigMap (this session's chart allows the create, by name). Made here as its users had to.
  await hub.apply({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: NAMESPACE },
  } as KubeObject);
  await helmRelease("install", join(previousTree, "charts", "knative-fleet"), previous.tag);
  log(`helm install of ${previousCommit} (${previous.tag}), 2 replicas`);
  await allReadyOn("1.21")();
  await waitUntil(
    "the first rollout complete",
    async () => ((await rolloutState()).state?.phase === "Complete" ? true : undefined),
    600_000,
  );
  log("the fleet runs 1.21 everywhere; the first rollout is complete");

  // ── A rollout in flight: 1.21 -> 1.22, the canary on it and soaking, the others waiting ───────────
  await push(
    {
      ...files,
      serving: new Map([...files.serving.keys()].map((s) => [s, { version: "1.22", marker: ++marker }])),
    },
    "Serving 1.21 -> 1.22 on every spoke",
  );
  const canary = `serving-${layout.spokes[0]}`;
  await waitUntil(
    "the canary Ready on 1.22",
    async () => {
      const cr = crs().find((c) => c.metadata.name === canary);
      return cr && (cr.spec as { version?: string }).version === "1.22" && isHealthy(cr) ? true : undefined;
    },
    600_000,
  );
  const before = await rolloutState();
  figures.stateBefore = `schema ${before.state?.schema ?? "none (the older format)"}, ${before.sealed ? "sealed" : "not sealed"}, phase ${before.state?.phase}, wave ${before.state?.waveName}`;
  const waiting = crs()
    .filter((c) => (c.spec as { version?: string }).version !== "1.22")
    .map((c) => c.metadata.name!);
  figures.inFlight = `canary ${canary} on 1.22 and soaking; ${waiting.join(", ")} still on 1.21`;
  log(`rollout in flight: ${figures.inFlight}`);

  // ── helm upgrade to this checkout, CRDs first (docs/upgrading.md), and a config change meanwhile ─────
  const upgradeStart = Date.now();
  const handledBefore = proxy.handled.length;
  const eventsBefore = events.length;
  const podsBefore = new Set(
    (
      await hub.list("v1", "Pod", {
        namespace: NAMESPACE,
        labelSelector: `app.kubernetes.io/instance=${RELEASE}`,
      })
    ).items.map((p) => p.metadata.name),
  );
  await installFleetCrds(hub);
  const upgraded = helmRelease("upgrade", join(repoRoot, "charts", "knative-fleet"), current.tag);
  const configSpoke = layout.spokes[2]!;
  await push(
    {
      ...files,
      serving: new Map(
        [...files.serving].map(([s, c]) => [s, s === configSpoke ? { ...c, marker: ++marker } : c]),
      ),
    },
    `Serving on ${configSpoke}: observability config changed`,
  );
  await upgraded;
  await waitUntil(
    "both pods replaced and Ready",
    async () => {
      const pods = (
        await hub.list("v1", "Pod", {
          namespace: NAMESPACE,
          labelSelector: `app.kubernetes.io/instance=${RELEASE}`,
        })
      ).items;
      const ready = pods.filter(
        (p) =>
          !podsBefore.has(p.metadata.name) &&
          !p.metadata.deletionTimestamp &&
          (p.status as { conditions?: { type: string; status: string }[] }).conditions?.some(
            (c) => c.type === "Ready" && c.status === "True",
          ),
      );
      return ready.length === 2 && pods.length === 2 ? true : undefined;
    },
    600_000,
  );
  const upgradeEnd = Date.now();
  figures.upgradeSeconds = Math.round((upgradeEnd - upgradeStart) / 1000);
  log(`pods replaced in ${figures.upgradeSeconds} s`);

  // ── The rollout resumes and completes; the state is rewritten in the new format ─────────────────────
  await allReadyOn("1.22", (spoke) => files.serving.get(spoke)!.marker)();
  await waitUntil(
    "the rollout complete again",
    async () => ((await rolloutState()).state?.phase === "Complete" ? true : undefined),
    600_000,
  );
  const after = await rolloutState();
  figures.stateAfter = `schema ${after.state?.schema}, ${after.sealed ? "sealed" : "not sealed"}, phase ${after.state?.phase}`;
  figures.rolloutCompleteSeconds = Math.round((Date.now() - upgradeStart) / 1000);

  // From the upgrade's start until the rollout completed: which CRs got new content (a new spec, so a new
  // generation, or a new desired hash), what each spoke saw, and whether a CR that did not change ever
  // showed itself unhealthy or lost its conditions.
  const settled = Date.now();
  const duringUpgrade = writesSince(handledBefore);
  const content = (e: CrEvent) => `${e.generation}/${e.hash}`;
  const atStart = new Map<string, string>();
  for (const e of events.slice(0, eventsBefore)) atStart.set(e.name, content(e));
  const window = events.slice(eventsBefore).filter((e) => e.at <= settled);
  const changed = new Set(window.filter((e) => atStart.get(e.name) !== content(e)).map((e) => e.name));
  let unneeded = 0;
  for (const [spoke, writes] of duringUpgrade) {
    const needed = changed.has(`serving-${spoke}`);
    if (!needed) unneeded += writes.length;
    figures[`writes ${spoke}`] =
      `${writes.length} (${needed ? "its CR got new content" : "its CR did not change"})${writes.length > 0 && !needed ? `: ${writes.slice(0, 5).join(", ")}` : ""}`;
  }
  figures.unneededWrites = unneeded;
  const describe = (e: CrEvent) =>
    `${e.name} at +${((e.at - upgradeStart) / 1000).toFixed(1)} s (generation ${e.generation}, observed ${e.observedGeneration}): ${e.why}`;
  const hadConditions = new Set(events.filter((e) => e.conditions > 0).map((e) => e.name));
  const statusLost = window.filter((e) => e.conditions === 0 && hadConditions.has(e.name)).map(describe);
  const unhealthyWithoutChange = window.filter((e) => !e.healthy && !changed.has(e.name)).map(describe);
  figures.changedCrs = [...changed].sort().join(", ") || "none";
  figures.statusLost = statusLost.length;
  figures.unhealthyWithoutChange = unhealthyWithoutChange.length;
  for (const line of [...statusLost, ...unhealthyWithoutChange]) log(`evidence: ${line}`);

  console.log("\n| | |\n|---|---|");
  for (const [key, value] of Object.entries(figures)) console.log(`| ${key} | ${value} |`);
  process.exitCode = unneeded === 0 && statusLost.length === 0 && unhealthyWithoutChange.length === 0 ? 0 : 1;
} finally {
  watch.stop();
  // The fleet removed as a person does (docs/upgrading.md), then the release and the nodes.
  await git
    .pushChange(REPO, {
      message: "remove the fleet",
      files: Object.fromEntries([...renderFiles(layout, files).keys()].map((p) => [p, null])),
    })
    .catch(() => {});
  await sleep(10_000);
  const deadline = Date.now() + 300_000;
  for (;;) {
    const left = (
      await hub
        .list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NAMESPACE })
        .catch(() => ({ items: [] }))
    ).items;
    if (left.length === 0 || Date.now() > deadline) break;
    for (const cr of left.filter((c) => !c.metadata.deletionTimestamp))
      await hub.delete(OPERATOR_API_VERSION, cr.kind, NAMESPACE, cr.metadata.name!);
    await sleep(2_000);
  }
  await helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait").catch(() => {});
  for (const cr of (
    await hub
      .list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NAMESPACE })
      .catch(() => ({ items: [] }))
  ).items) {
    await hub
      .mergePatch(OPERATOR_API_VERSION, cr.kind, NAMESPACE, cr.metadata.name!, {
        metadata: { finalizers: null },
      })
      .catch(() => {});
    await hub.delete(OPERATOR_API_VERSION, cr.kind, NAMESPACE, cr.metadata.name!).catch(() => {});
  }
  for (const ns of [PROFILES, CREDENTIALS])
    await hub.delete("v1", "Namespace", undefined, ns).catch(() => {});
  await cleanSpokes(
    sandbox,
    spokes.map((s) => s.name),
  ).catch(() => {});
  await stopNodes(sandbox.stateDir);
  rmSync(join(sandbox.stateDir, "nodes"), { recursive: true, force: true });
  await proxy.close();
  await git.close();
  if (!stateDir) await down(sandbox.stateDir);
  rmSync(work, { recursive: true, force: true });
}
// The hub client's pooled connections would keep the process alive for minutes after everything is done.
process.exit();
