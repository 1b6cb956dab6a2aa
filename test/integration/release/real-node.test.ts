import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { freePort } from "../../sandbox/processes.ts";
import { ctr, type RealNode } from "../../sandbox/real-node.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace } from "../../support/hub.ts";
import { knativeReleasesDir, repoRoot } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";
import {
  containerId,
  crReady,
  type FleetCr,
  isReadyPod,
  nodeTools,
  type PodStatus,
  pluginCopyValues,
  postRendererFlags,
  printPodLogsOnFailure,
  releasePods,
  removeFleet,
  sandboxHelm,
  startChartNode,
  stopChartNodes,
} from "./real-node-chart.ts";

const execFileAsync = promisify(execFile);

// `helm install` as users run it, on a real node: the image built from the Dockerfile (scripts/build-image.sh),
// imported into the node's containerd, the chart installed by the real helm with a values file a user would
// write. Only the test post-renderer (real-node-post-renderer.ts) moves the pod onto the host network and
// points in-cluster config at the sandbox hub on loopback. The plugins reach the pod through the chart's
// initContainer copy: Debian's containerd 1.6 has no image volumes (they need containerd 2.1+).

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const spokes = sandbox.spokes.slice(0, 2).map(adminClient);
const RELEASE = "fleet";
/**
 * The release namespace, where the Git credentials live and the fleet's CRs go (fleet.defaultNamespace empty).
 * The spokes' credential Secrets stay in the sandbox's ClusterProfile namespace, a namespace of their own as
 * the chart requires (multicluster.credentials.namespace), never beside the Git token.
 */
const NAMESPACE = "knative-fleet";
const REPO = "fleet";
const NODE = "real-node-1";
const IMAGE = "localhost/knative-fleet:dev";

/** fleet-example's fleet files, path -> text. */
function fleetExample(): Record<string, string> {
  const root = join(repoRoot, "fleet-example");
  const files: Record<string, string> = {};
  for (const entry of readdirSync(join(root, "clusters"), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(root, path)] = readFileSync(path, "utf8");
  }
  return files;
}

const CRS: FleetCr[] = [
  { kind: "KnativeServing", namespace: "knative-fleet", name: "spoke-1-serving" },
  { kind: "KnativeEventing", namespace: "knative-fleet", name: "spoke-2-eventing" },
];

describe("helm install on a real node", () => {
  const work = mkdtempSync(join(tmpdir(), "knative-fleet-real-node-"));
  const figures: Record<string, number | string> = {};
  let node: RealNode;
  let git: GitServer;
  let metricsPort: number;

  const helm = sandboxHelm(sandbox);
  const helmInstall = (verb: "install" | "upgrade", valuesFile: string) =>
    helm(
      verb,
      RELEASE,
      join(repoRoot, "charts", "knative-fleet"),
      "--namespace",
      NAMESPACE,
      "--values",
      valuesFile,
      ...postRendererFlags(sandbox),
    );

  const pods = () => releasePods(hub, NAMESPACE, RELEASE);
  const readyPod = async () => (await pods()).find(isReadyPod);
  const exec = (pod: PodStatus, ...command: string[]) => {
    try {
      return {
        code: 0,
        out: ctr(node, "tasks", "exec", "--exec-id", `t${Date.now()}`, containerId(pod), ...command),
      };
    } catch (err) {
      return { code: 1, out: String((err as { stderr?: string }).stderr ?? err) };
    }
  };
  const printLogsOnFailure = () => printPodLogsOnFailure(sandbox);

  beforeAll(async () => {
    const build = Date.now();
    const archive = join(work, "knative-fleet.oci.tar");
    await execFileAsync(
      "bash",
      [
        join(repoRoot, "scripts", "build-image.sh"),
        "--tag",
        IMAGE,
        "--kodata",
        knativeReleasesDir(),
        "--archive",
        archive,
      ],
      {
        maxBuffer: 16 << 20,
      },
    );
    figures.imageBuildSeconds = Math.round((Date.now() - build) / 1000);
    // One line per tag of the image: readme-install.test.ts tags the same image with the release's version.
    figures.imageSize = (
      await execFileAsync("buildah", ["images", "--format", "{{.Size}}", IMAGE])
    ).stdout.split("\n")[0]!;

    const { kubelet, images } = nodeTools(sandbox);
    const nodeStart = Date.now();
    node = await startChartNode(sandbox, hub, NODE, kubelet, [
      ...images,
      { name: "knative-fleet", reference: IMAGE, archive },
    ]);
    figures.nodeReadySeconds = Math.round((Date.now() - nodeStart) / 1000);

    git = await startGitServer({ auth: { username: "fleet-bot", password: "s3cret-token" } });
    await git.createRepo(REPO, fleetExample());
    await ensureNamespace(hub, NAMESPACE);
    for (const [name, data] of [
      ["fleet-repository", { username: "fleet-bot", password: "s3cret-token" }],
      ["fleet-webhook", { secret: "webhook-hmac-secret" }],
    ] as const) {
      await hub.apply({
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name, namespace: NAMESPACE },
        stringData: data,
      } as never);
    }
    metricsPort = await freePort();
    // What a user of a hub whose runtime has no image volumes writes: the repository, its credentials, the
    // webhook, and the plugin images from their own registry (here: built locally from their module).
    const values = {
      image: { repository: IMAGE.split(":")[0], tag: IMAGE.split(":")[1], pullPolicy: "Never" },
      fleet: {
        repository: { url: git.url(REPO), credentialsSecretRef: { name: "fleet-repository" } },
        pollInterval: "*/5 * * * * *",
      },
      metrics: { port: metricsPort },
      webhook: { enabled: true, port: await freePort(), secretRef: { name: "fleet-webhook" } },
      multicluster: {
        ...pluginCopyValues(images),
        credentials: { namespace: sandbox.clusterProfileNamespace },
        remoteDeploymentsPollInterval: "2s",
      },
    };
    writeFileSync(join(work, "values.yaml"), stringify(values));
    await helmInstall("install", join(work, "values.yaml"));
  }, 900_000);

  afterAll(async () => {
    console.log("real node figures:", JSON.stringify(figures));
    if (git)
      await removeFleet(hub, CRS, {
        restore: () => helmInstall("install", join(work, "values.yaml")),
        deleteFiles: () =>
          git.pushChange(REPO, {
            files: Object.fromEntries(Object.keys(fleetExample()).map((path) => [path, null])),
            message: "remove the fleet",
          }),
        uninstall: () => helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"),
      });
    await helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait").catch(() => {});
    await git?.close();
    await stopChartNodes(sandbox, hub);
    rmSync(work, { recursive: true, force: true });
  });

  it("starts the pod on the real node through the plugin-copy initContainers, and it becomes Ready", async () => {
    printLogsOnFailure();
    const pod = await waitUntil("the pod Ready", readyPod, 300_000);
    expect(pod.spec.nodeName).toBe(NODE);
    expect(pod.status.initContainerStatuses?.map((c) => [c.name, c.state.terminated?.exitCode])).toEqual([
      ["install-plugin-copier", 0],
      ["copy-plugin-secretreader", 0],
      ["copy-plugin-kubeconfig-secretreader", 0],
    ]);
    const ready = pod.status.conditions!.find((c) => c.type === "Ready")!.lastTransitionTime;
    figures.podStartToReadySeconds = (Date.parse(ready) - Date.parse(pod.metadata.creationTimestamp)) / 1000;
    // The plugins the initContainers copied are there, executable, read-only for the service.
    const plugins = exec(pod, "/bin/sh", "-c", "ls -l /access-plugins/*/bin/*").out;
    expect(plugins).toMatch(/^-r-xr-xr-x .* \/access-plugins\/secretreader\/bin\/secretreader-plugin$/m);
    expect(plugins).toMatch(
      /^-r-xr-xr-x .* \/access-plugins\/kubeconfig-secretreader\/bin\/kubeconfig-secretreader-plugin$/m,
    );
  });

  it("reconciles fleet-example onto both spokes and commits their status", async () => {
    printLogsOnFailure();
    const start = Date.now();
    for (const cr of CRS)
      await waitUntil(`${cr.name} Ready`, async () => ((await crReady(hub, cr)) ? true : undefined), 600_000);
    figures.fleetExampleReadySeconds = Math.round((Date.now() - start) / 1000);
    expect(await spokes[0]!.get("apps/v1", "Deployment", "knative-serving", "controller")).toBeDefined();
    expect(
      await spokes[1]!.get("apps/v1", "Deployment", "knative-eventing", "eventing-controller"),
    ).toBeDefined();
    const statusCommit = await waitUntil("a status commit", async () =>
      (await git.log(REPO)).find((entry) => entry.authorName === "knative-fleet"),
    );
    expect(statusCommit.subject).toBeTruthy();
  });

  it("runs as 65532 on a read-only root filesystem, writable only in its mounted cache and tmp", async () => {
    const pod = (await readyPod())!;
    expect(exec(pod, "/usr/bin/id", "-u").out.trim()).toBe("65532");
    const root = exec(pod, "/bin/sh", "-c", "touch /opt/knative-fleet/x");
    expect(root.code).toBe(1);
    expect(root.out).toContain("Read-only file system");
    for (const dir of ["/tmp", "/var/cache/knative-fleet"]) {
      expect(exec(pod, "/bin/sh", "-c", `touch ${dir}/probe && rm ${dir}/probe`).code, dir).toBe(0);
    }
  });

  it("serves its probes and metrics on the configured port", async () => {
    for (const path of ["/healthz", "/readyz"]) {
      expect((await fetch(`http://127.0.0.1:${metricsPort}${path}`)).status, path).toBe(200);
    }
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(/^knative_fleet_leader 1$/m);
  });

  it("stays within the chart's memory limit through the install of both spokes", async () => {
    const pod = (await readyPod())!;
    const info = JSON.parse(ctr(node, "containers", "info", containerId(pod))) as {
      Spec: { linux: { cgroupsPath: string; resources: { memory: { limit: number } } } };
    };
    const cgroup = join("/sys/fs/cgroup/memory", info.Spec.linux.cgroupsPath);
    const peak = Number(readFileSync(join(cgroup, "memory.max_usage_in_bytes"), "utf8"));
    const limit = info.Spec.linux.resources.memory.limit;
    // The node process's own high-water mark (the container's first process is tini).
    const pids = readFileSync(join(cgroup, "cgroup.procs"), "utf8").trim().split("\n");
    const hwm = Math.max(
      ...pids.map((pid) =>
        Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0),
      ),
    );
    figures.peakCgroupMemoryMiB = Math.round(peak / 2 ** 20);
    figures.peakNodeRssMiB = Math.round(hwm / 1024);
    figures.memoryLimitMiB = Math.round(limit / 2 ** 20);
    expect(limit).toBe(2 ** 30);
    expect(peak).toBeLessThan(limit);
  });

  describe("two replicas, each on a node of its own", () => {
    const LEASE = `${RELEASE}-knative-fleet`;
    const leaseHolder = async () =>
      (
        (await hub.get("coordination.k8s.io/v1", "Lease", NAMESPACE, LEASE))?.spec as
          | { holderIdentity?: string }
          | undefined
      )?.holderIdentity;
    /** The pod whose process holds the Lease: identities are "<pod name>_<uuid>", new for every process. */
    const podOf = (identity: string | undefined) => identity?.replace(/_[0-9a-f-]{36}$/, "");
    const readyPods = async () => (await pods()).filter(isReadyPod);
    /** What each running pod's own /metrics says of its leadership, read inside its network namespace. */
    const leaders = async () => {
      const running = (await pods()).filter((p) =>
        p.status.containerStatuses?.some((c) => c.name === "knative-fleet" && c.containerID),
      );
      const script = `fetch("http://127.0.0.1:${metricsPort}/metrics").then((r) => r.text()).then((t) => console.log(/^knative_fleet_leader (\\d)/m.exec(t)?.[1] ?? "-"), () => console.log("-"))`;
      const answers = await Promise.all(
        running.map(async (pod) => {
          const owner = nodes.find((n) => n.name === pod.spec.nodeName);
          if (!owner) return "-";
          const { stdout } = await execFileAsync("ctr", [
            "--address",
            owner.socket,
            "--namespace",
            "k8s.io",
            "tasks",
            "exec",
            "--exec-id",
            `m${Date.now()}${Math.random().toString(36).slice(2, 6)}`,
            containerId(pod),
            "node",
            "-e",
            script,
          ]).catch(() => ({ stdout: "-" }));
          return stdout.trim();
        }),
      );
      return answers.filter((answer) => answer === "1").length;
    };
    let valuesFile: string;
    const nodes: RealNode[] = [];

    beforeAll(async () => {
      nodes.push(node);
      // Host-network pods of one Deployment bind the same ports: the other nodes get network namespaces of
      // their own, reaching the hub, the spokes and the Git server through forwarded loopback ports.
      const ports = [sandbox.hub, ...sandbox.spokes].map((c) => Number(new URL(c.server).port));
      ports.push(Number(new URL(git.url(REPO)).port));
      const { kubelet, images } = nodeTools(sandbox);
      const archive = join(work, "knative-fleet.oci.tar");
      for (const name of ["real-node-2", "real-node-3"]) {
        nodes.push(
          await startChartNode(
            sandbox,
            hub,
            name,
            kubelet,
            [...images, { name: "knative-fleet", reference: IMAGE, archive }],
            {
              ownNetwork: { ports },
            },
          ),
        );
      }
      valuesFile = join(work, "values.yaml");
      const values = parse(readFileSync(valuesFile, "utf8")) as Record<string, unknown>;
      writeFileSync(valuesFile, stringify({ ...values, replicas: 2 }));
      await helmInstall("upgrade", valuesFile);
      await waitUntil(
        "two Ready pods with a leader",
        async () => {
          const [ready, holder] = [await readyPods(), await leaseHolder()];
          return ready.length === 2 && ready.some((p) => p.metadata.name === podOf(holder))
            ? true
            : undefined;
        },
        300_000,
      );
    }, 600_000);

    it("the leader killed once with the container runtime: a new process leads, the dead one's Lease is never renewed", async () => {
      printLogsOnFailure();
      const holder = (await leaseHolder())!;
      const leader = (await readyPods()).find((p) => p.metadata.name === podOf(holder))!;
      expect(leader, "the Lease holder is a Ready pod").toBeDefined();
      const owner = nodes.find((n) => n.name === leader.spec.nodeName)!;
      const killed = Date.now();
      ctr(owner, "tasks", "kill", "--signal", "SIGKILL", containerId(leader));
      // The kubelet restarts the container at once; its new process has a new identity, so it cannot renew
      // the dead process's Lease: the follower or the restarted process takes it once it expires.
      const next = await waitUntil(
        "another process holds the lease",
        async () => {
          const current = await leaseHolder();
          return current && current !== holder ? current : undefined;
        },
        120_000,
      );
      figures.leaderTakeoverSeconds = Math.round((Date.now() - killed) / 100) / 10;
      figures.leaderAfterKill = podOf(next) === leader.metadata.name ? "restarted container" : "other pod";
      await waitUntil("one leader after the take-over", async () =>
        (await leaders()) === 1 ? true : undefined,
      );
    });

    it("helm upgrade with a changed value rolls the pods without two leaders", async () => {
      printLogsOnFailure();
      const before = new Set((await pods()).map((p) => p.metadata.name));
      const values = parse(readFileSync(valuesFile, "utf8")) as { fleet: Record<string, unknown> };
      writeFileSync(
        valuesFile,
        stringify({ ...values, fleet: { ...values.fleet, pollInterval: "*/7 * * * * *" } }),
      );
      await helmInstall("upgrade", valuesFile);
      let samples = 0;
      let mostLeaders = 0;
      await waitUntil(
        "the rollout done",
        async () => {
          mostLeaders = Math.max(mostLeaders, await leaders());
          samples++;
          const current = await pods();
          const ready = await readyPods();
          return current.length === 2 &&
            ready.length === 2 &&
            current.every((p) => !before.has(p.metadata.name))
            ? true
            : undefined;
        },
        300_000,
      );
      figures.rolloutLeaderSamples = samples;
      expect(samples).toBeGreaterThan(1);
      expect(mostLeaders).toBe(1);
      await waitUntil("a leader after the rollout", async () => ((await leaders()) === 1 ? true : undefined));
    });
  });

  it("helm uninstall stops the pod and leaves the spokes and the hub's CRs alone", async () => {
    await helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait");
    await waitUntil("the pod gone", async () => ((await pods()).length === 0 ? true : undefined), 120_000);
    // The CRDs (the chart's crds/) and the CRs stay, with their finalizer: nothing runs it until a
    // reconciler is installed again (or the finalizer is removed by hand). The spokes keep Knative.
    for (const cr of CRS) {
      const live = await hub.get(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name);
      expect(live?.metadata.finalizers, cr.name).toEqual([expect.stringContaining("knative")]);
    }
    expect(await spokes[0]!.get("apps/v1", "Deployment", "knative-serving", "controller")).toBeDefined();
    expect(
      await spokes[1]!.get("apps/v1", "Deployment", "knative-eventing", "eventing-controller"),
    ).toBeDefined();
  });
});
