import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { getJson } from "./kube-http.ts";
import { freePort, isRunning, startProcess, stopAll, waitFor } from "./processes.ts";
import type { Sandbox } from "./sandbox.ts";

/**
 * Real nodes for the sandbox hub: a kubelet (built from the Kubernetes module, same version as the
 * apiserver) with its own containerd and runc from Debian's packages, so the chart's pod really runs in a
 * container. Everything stays on loopback: the kubelet serves on 127.0.0.1, the node's address is
 * 127.0.0.1, and pods that must reach the hub use the host network (the test's post-renderer).
 *
 * What this machine allows and what it takes (checked on cgroup v1, root, no systemd): kubelet 1.35
 * refuses cgroup v1 unless failCgroupV1 is false; QoS cgroups and node-allocatable enforcement are off
 * (cgroupsPerQOS: false, enforceNodeAllocatable: []), so each container still gets its own memory cgroup
 * and limit from runc, but no pod-level cgroup. The kubelet sets the kernel tunables it wants
 * (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops) at start: stopNodes puts back the values
 * found before. containerd 1.6 (Debian 12) has no image volumes, so the chart's plugins need
 * `pluginMount: initContainer` here.
 */
export interface RealNode {
  name: string;
  /** containerd's socket, for `ctr`. */
  socket: string;
  dir: string;
}

export interface RealNodeOptions {
  /**
   * Run the node in a network namespace of its own, so that its host-network pods have their own loopback
   * and ports (several replicas of one chart bind the same ports). These loopback ports of the machine (the
   * hub, the spokes, the Git server) are carried into it through Unix sockets (netns-forward.ts).
   */
  ownNetwork?: { ports: readonly number[] };
}

export interface NodeImage {
  name: string;
  reference: string;
  archive: string;
}

const here = dirname(fileURLToPath(import.meta.url));
const FORWARD = join(here, "netns-forward.ts");
/** Every real node carries it, so a pod can be pinned off kwok's fake nodes. */
export const REAL_NODE_LABEL = "sandbox.knative-fleet.dev/real-node";
const CTR_NAMESPACE = "k8s.io";
const KERNEL_TUNABLES = ["vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops"];

/** Builds the kubelet (its own build-tools target) and the images a node needs; cached. */
export function buildNodeTools(binDir: string): { kubelet: string; images: NodeImage[] } {
  const run = (script: string, args: string[]) =>
    execFileSync("bash", [join(here, script), ...args], {
      stdio: ["ignore", "pipe", "inherit"],
      encoding: "utf8",
    }).trim();
  const kubeletDir = run("build-tools.sh", ["kubelet"]).split("\n").at(-1)!;
  const images = run("node-images.sh", [binDir])
    .split("\n")
    .map((line) => {
      const [name = "", reference = "", archive = ""] = line.split(" ");
      return { name, reference, archive };
    });
  return { kubelet: join(kubeletDir, "kubelet"), images };
}

/** `ctr` against a node's containerd, in the namespace the kubelet's pods live in. */
export function ctr(node: RealNode, ...args: string[]): string {
  return execFileSync("ctr", ["--address", node.socket, "--namespace", CTR_NAMESPACE, ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/**
 * Starts containerd and a kubelet registered on the sandbox hub as node `name`, imports the images (the
 * pause image first), and waits until the node is Ready.
 */
export async function startRealNode(
  sandbox: Sandbox,
  name: string,
  kubelet: string,
  images: readonly NodeImage[],
  options: RealNodeOptions = {},
): Promise<RealNode> {
  const { stateDir } = sandbox;
  const dir = join(stateDir, "nodes", name);
  mkdirSync(dir, { recursive: true });
  recordKernelTunables(stateDir);
  // Processes of the node: in its own network namespace if it has one (nsenter: unlike `ip netns exec` it
  // leaves /sys, and the cgroup mounts under it, as they are).
  let inNode = (binary: string, args: string[]): [string, string[]] => [binary, args];
  if (options.ownNetwork) {
    const netns = `kf-${basename(stateDir)}-${name}`;
    execFileSync("ip", ["netns", "add", netns]);
    writeFileSync(join(dir, "netns"), netns);
    execFileSync("ip", ["-n", netns, "link", "set", "lo", "up"]);
    inNode = (binary, args) => ["nsenter", [`--net=/run/netns/${netns}`, "--", binary, ...args]];
    const sockets = join(dir, "forward");
    mkdirSync(sockets, { recursive: true });
    const ports = options.ownNetwork.ports.map(String);
    startProcess(stateDir, `${name}-forward-host`, process.execPath, [FORWARD, "host", sockets, ...ports]);
    const forward = startProcess(
      stateDir,
      `${name}-forward-node`,
      ...inNode(process.execPath, [FORWARD, "node", sockets, ...ports]),
    );
    const log = join(stateDir, "logs", `${name}-forward-node.log`);
    await waitFor(
      `${name}'s forwarded ports listening`,
      async () => {
        if (forward.exited()) throw new Error(`its forward exited; see ${log}`);
        return readFileSync(log, "utf8").includes(`netns-forward ${forward.pid}: listening`);
      },
      30_000,
    );
  }
  const socket = join(dir, "containerd.sock");
  const pause = images.find((image) => image.name === "pause");
  if (!pause) throw new Error("real node: no pause image");
  const cniConf = join(dir, "cni", "conf");
  mkdirSync(cniConf, { recursive: true });
  // Pods here use the host network; the CNI config exists so that containerd reports its network ready.
  // Should a pod without hostNetwork land here, it gets a loopback interface and nothing else.
  writeFileSync(
    join(cniConf, "10-loopback.conflist"),
    JSON.stringify({ cniVersion: "1.0.0", name: "loopback-only", plugins: [{ type: "loopback" }] }),
  );
  const runc = join(dir, "runc-without-oom-protection");
  // Without CAP_SYS_RESOURCE (this machine withholds it even from root) no process may lower its
  // oom_score_adj, and runc fails to start any container the kubelet protects that way (the pod sandbox
  // always gets -998). runc is called through this wrapper, which raises negative adjustments to 0 in
  // the bundle's config.json; nothing else changes.
  writeFileSync(
    runc,
    [
      "#!/bin/sh",
      'bundle=""; prev=""',
      'for arg in "$@"; do [ "$prev" = "--bundle" ] && bundle=$arg; prev=$arg; done',
      'if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then',
      '  sed -i \'s/"oomScoreAdj": *-[0-9]*/"oomScoreAdj":0/\' "$bundle/config.json"',
      "fi",
      'exec runc "$@"',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  const containerdConfig = join(dir, "containerd.toml");
  writeFileSync(
    containerdConfig,
    [
      "version = 2",
      `root = "${join(dir, "containerd", "root")}"`,
      `state = "${join(dir, "containerd", "state")}"`,
      "[grpc]",
      `  address = "${socket}"`,
      "[ttrpc]",
      `  address = "${socket}.ttrpc"`,
      "[debug]",
      `  address = ""`,
      "[metrics]",
      `  address = ""`,
      `[plugins."io.containerd.grpc.v1.cri"]`,
      `  sandbox_image = "${pause.reference}"`,
      "  enable_cdi = false",
      `  [plugins."io.containerd.grpc.v1.cri".containerd]`,
      `    snapshotter = "overlayfs"`,
      `    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
      `      runtime_type = "io.containerd.runc.v2"`,
      `      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
      `        BinaryName = "${runc}"`,
      `  [plugins."io.containerd.grpc.v1.cri".cni]`,
      `    bin_dir = "/usr/lib/cni"`,
      `    conf_dir = "${cniConf}"`,
      `  [plugins."io.containerd.grpc.v1.cri".registry]`,
      `    config_path = "${join(dir, "registry-hosts")}"`,
      "",
    ].join("\n"),
  );
  startProcess(stateDir, `${name}-containerd`, ...inNode("containerd", ["--config", containerdConfig]));
  const node: RealNode = { name, socket, dir };
  await waitFor(`${name} containerd`, async () => existsSync(socket) && tryCtr(node, "version"), 60_000);
  for (const image of images) ctr(node, "images", "import", image.archive);

  const kubeletConfig = join(dir, "kubelet.yaml");
  writeFileSync(
    kubeletConfig,
    stringify({
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      address: "127.0.0.1",
      port: await freePort(),
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      healthzPort: await freePort(),
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: false },
        x509: { clientCAFile: sandbox.hub.caFile },
      },
      authorization: { mode: "AlwaysAllow" },
      containerRuntimeEndpoint: `unix://${socket}`,
      cgroupDriver: "cgroupfs",
      failCgroupV1: false,
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      podLogsDir: join(dir, "pod-logs"),
      volumePluginDir: join(dir, "volume-plugins"),
      resolvConf: "/etc/resolv.conf",
      serializeImagePulls: false,
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      // The sandbox shares the machine: evict only on real exhaustion.
      evictionHard: {
        "memory.available": "100Mi",
        "nodefs.available": "1%",
        "imagefs.available": "1%",
        "nodefs.inodesFree": "1%",
      },
      maxPods: 20,
      nodeStatusReportFrequency: "10s",
    }),
  );
  startProcess(
    stateDir,
    `${name}-kubelet`,
    ...inNode(kubelet, [
      `--config=${kubeletConfig}`,
      `--kubeconfig=${sandbox.hub.adminKubeconfig}`,
      `--root-dir=${join(dir, "kubelet")}`,
      `--cert-dir=${join(dir, "kubelet", "pki")}`,
      `--hostname-override=${name}`,
      `--node-labels=${REAL_NODE_LABEL}=true`,
      "--node-ip=127.0.0.1",
      "--v=1",
    ]),
  );
  const admin = adminEndpoint(sandbox);
  await waitFor(
    `node ${name} Ready`,
    async () => {
      const response = await getJson(admin, `/api/v1/nodes/${name}`).catch(() => undefined);
      const conditions = (
        response as { status?: { conditions?: { type: string; status: string }[] } } | undefined
      )?.status?.conditions;
      return conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
    },
    180_000,
  );
  return node;
}

function tryCtr(node: RealNode, ...args: string[]): boolean {
  try {
    ctr(node, ...args);
    return true;
  } catch {
    return false;
  }
}

function adminEndpoint(sandbox: Sandbox) {
  const dir = dirname(sandbox.hub.adminKubeconfig);
  return {
    server: sandbox.hub.server,
    caFile: sandbox.hub.caFile,
    certFile: join(dir, "admin.crt"),
    keyFile: join(dir, "admin.key"),
  };
}

/** The tunables as found before the first kubelet started, so stopNodes can put them back. */
function recordKernelTunables(stateDir: string): void {
  const file = join(stateDir, "nodes", "kernel-tunables.json");
  if (existsSync(file)) return;
  const values = Object.fromEntries(
    KERNEL_TUNABLES.map((k) => [k, readFileSync(`/proc/sys/${k}`, "utf8").trim()]),
  );
  writeFileSync(file, JSON.stringify(values));
}

/**
 * Kills every container of the state dir's nodes (containerd's shims outlive containerd), stops the
 * kubelets and containerds, unmounts what they left mounted, and restores the kernel tunables. Called by
 * the sandbox's `down`; safe when there are no nodes.
 */
export async function stopNodes(stateDir: string): Promise<void> {
  const nodesDir = join(stateDir, "nodes");
  if (!existsSync(nodesDir)) return;
  const names = readdirSync(nodesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name);
  await stopAll(
    stateDir,
    names.map((name) => `${name}-kubelet`),
  );
  for (const name of names) {
    const node: RealNode = {
      name,
      dir: join(nodesDir, name),
      socket: join(nodesDir, name, "containerd.sock"),
    };
    if (!isRunning(stateDir, `${name}-containerd`)) continue;
    const tasks = tryList(node, "tasks", "list", "--quiet");
    for (const id of tasks) tryCtr(node, "tasks", "kill", "--signal", "SIGKILL", id);
    for (let i = 0; i < 50 && tryList(node, "tasks", "list", "--quiet").length > 0; i++) {
      for (const id of tryList(node, "tasks", "list", "--quiet"))
        tryCtr(node, "tasks", "delete", "--force", id);
      await sleep(100);
    }
  }
  await stopAll(
    stateDir,
    names.flatMap((name) => [`${name}-containerd`, `${name}-forward-host`, `${name}-forward-node`]),
  );
  killLeftoverShims(nodesDir);
  for (const name of names) {
    const netnsFile = join(nodesDir, name, "netns");
    if (!existsSync(netnsFile)) continue;
    try {
      execFileSync("ip", ["netns", "delete", readFileSync(netnsFile, "utf8").trim()], { stdio: "ignore" });
    } catch {
      // already deleted
    }
  }
  // Mounts below the nodes' directories, deepest first (overlay rootfs, shm, the kubelet's volumes).
  const mounts = readFileSync("/proc/mounts", "utf8")
    .split("\n")
    .map((line) => line.split(" ")[1]?.replace(/\\040/g, " ") ?? "")
    .filter((path) => path.startsWith(`${nodesDir}/`))
    .sort((a, b) => b.length - a.length);
  for (const path of mounts) {
    try {
      execFileSync("umount", ["--lazy", path], { stdio: "ignore" });
    } catch {
      // already gone with its parent
    }
  }
  const tunables = join(nodesDir, "kernel-tunables.json");
  if (existsSync(tunables)) {
    for (const [key, value] of Object.entries(
      JSON.parse(readFileSync(tunables, "utf8")) as Record<string, string>,
    ))
      writeFileSync(`/proc/sys/${key}`, value);
  }
}

/**
 * containerd-shim processes outlive containerd when their task could not be deleted (a node stopped mid-test):
 * the ones of these nodes, found by the node's socket path in their command line, are killed.
 */
function killLeftoverShims(nodesDir: string): void {
  for (const pid of readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))) {
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    if (!cmdline.includes("containerd-shim") || !cmdline.includes(`${nodesDir}/`)) continue;
    try {
      process.kill(Number(pid), "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
}

function tryList(node: RealNode, ...args: string[]): string[] {
  try {
    return ctr(node, ...args)
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean);
  } catch {
    return [];
  }
}
