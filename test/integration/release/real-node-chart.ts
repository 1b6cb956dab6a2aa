import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { onTestFailed } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { Sandbox } from "../../sandbox/index.ts";
import { isRunning } from "../../sandbox/processes.ts";
import {
  buildNodeTools,
  type NodeImage,
  REAL_NODE_LABEL,
  type RealNode,
  type RealNodeOptions,
  startRealNode,
  stopNodes,
} from "../../sandbox/real-node.ts";
import { repoRoot } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";

// What the tests that `helm install` the chart onto the sandbox's real nodes share (real-node.test.ts,
// readme-install.test.ts): the nodes, the test post-renderer that puts the pod on one on loopback, the chart
// values a hub whose runtime has no image volumes needs, the release's pods, and the way a fleet is removed
// afterwards so that the spokes are left as found.

const execFileAsync = promisify(execFile);

/** The test post-renderer (real-node-post-renderer.ts): the pod on a real node's host network, the hub on loopback. */
export const POST_RENDERER = join(repoRoot, "test", "integration", "release", "real-node-post-renderer.ts");

/** helm's flags that pass the render through POST_RENDERER, given the sandbox hub's loopback address. */
export const postRendererFlags = (sandbox: Sandbox): string[] => [
  "--post-renderer",
  POST_RENDERER,
  "--post-renderer-args",
  `127.0.0.1:${new URL(sandbox.hub.server).port}`,
];

/** PATH with this process's Node (24) first: the post-renderer is TypeScript, which Node 24 runs as it is. */
export const pathWithThisNode = (path = process.env.PATH ?? ""): string =>
  `${dirname(process.execPath)}:${path}`;

/** The sandbox's helm (the real one, built by the sandbox tools) on the hub as its admin. */
export function sandboxHelm(sandbox: Sandbox) {
  return (...args: string[]) =>
    execFileAsync(join(sandbox.binDir, "helm"), [...args, "--kubeconfig", sandbox.hub.adminKubeconfig], {
      env: { ...process.env, PATH: pathWithThisNode() },
      maxBuffer: 16 << 20,
    });
}

/** The kubelet and the images every real node imports (pause, busybox, the credential plugins); cached. */
export const nodeTools = (sandbox: Sandbox): { kubelet: string; images: NodeImage[] } =>
  buildNodeTools(sandbox.binDir);

/**
 * The chart's `multicluster` values of a hub whose runtime has no image volumes (Debian's containerd 1.6): the
 * credential plugins copied out of their images by initContainers, the images from the user's own registry
 * (here: the node's, built locally from the plugins' module).
 */
export function pluginCopyValues(images: readonly NodeImage[]) {
  const reference = (name: string) => {
    const image = images.find((i) => i.name === name);
    if (!image) throw new Error(`the real node has no ${name} image`);
    return image.reference;
  };
  return {
    pluginMount: "initContainer",
    pluginCopyImage: reference("busybox"),
    plugins: ["secretreader", "kubeconfig-secretreader"].map((name) => ({
      name,
      image: reference(name),
      mountPath: `/access-plugins/${name}`,
    })),
  };
}

/**
 * Starts real node `name` with `images`. The Node objects of real nodes whose kubelet no longer runs (an
 * earlier test file's) are deleted first: the hub's node controller marks a silent node NotReady only after
 * its 5-minute grace period, and the scheduler would meanwhile bind the chart's pod to a node that is gone.
 */
export async function startChartNode(
  sandbox: Sandbox,
  hub: KubeClient,
  name: string,
  kubelet: string,
  images: readonly NodeImage[],
  options: RealNodeOptions = {},
): Promise<RealNode> {
  const nodes = await hub.list("v1", "Node", { labelSelector: `${REAL_NODE_LABEL}=true` });
  for (const node of nodes.items) {
    if (!isRunning(sandbox.stateDir, `${node.metadata.name}-kubelet`))
      await hub.delete("v1", "Node", undefined, node.metadata.name!);
  }
  return startRealNode(sandbox, name, kubelet, images, options);
}

/** Stops every real node of the sandbox (their containers, kubelets and containerds) and deletes their Nodes. */
export async function stopChartNodes(sandbox: Sandbox, hub: KubeClient): Promise<void> {
  const dir = join(sandbox.stateDir, "nodes");
  const names = existsSync(dir)
    ? readdirSync(dir, { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
    : [];
  await stopNodes(sandbox.stateDir);
  rmSync(dir, { recursive: true, force: true });
  for (const name of names) await hub.delete("v1", "Node", undefined, name).catch(() => {});
}

export interface PodStatus {
  metadata: { name: string; creationTimestamp: string; deletionTimestamp?: string };
  spec: { nodeName?: string };
  status: {
    phase?: string;
    conditions?: { type: string; status: string; lastTransitionTime: string }[];
    containerStatuses?: {
      name: string;
      image?: string;
      imageID?: string;
      containerID?: string;
      ready: boolean;
      restartCount: number;
    }[];
    initContainerStatuses?: { name: string; state: { terminated?: { exitCode: number } } }[];
  };
}

/** The pods of a release of the chart. */
export const releasePods = async (hub: KubeClient, namespace: string, release: string) =>
  (
    await hub.list("v1", "Pod", {
      namespace,
      labelSelector: `app.kubernetes.io/instance=${release}`,
    })
  ).items as unknown as PodStatus[];

/** Ready, and not being deleted. */
export const isReadyPod = (pod: PodStatus): boolean =>
  !pod.metadata.deletionTimestamp &&
  (pod.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false);

/** The pod's knative-fleet container, as the kubelet reports it. */
export const fleetContainer = (pod: PodStatus) =>
  pod.status.containerStatuses?.find((c) => c.name === "knative-fleet");

/** The containerd id of the pod's knative-fleet container. */
export const containerId = (pod: PodStatus): string =>
  fleetContainer(pod)?.containerID?.replace(/^containerd:\/\//, "") ?? "";

/** On the calling test's failure: the tail of every knative-fleet container log the real nodes kept. */
export function printPodLogsOnFailure(sandbox: Sandbox): void {
  onTestFailed(() => {
    const nodes = join(sandbox.stateDir, "nodes");
    const logDirs = existsSync(nodes)
      ? readdirSync(nodes)
          .map((name) => join(nodes, name, "pod-logs"))
          .filter((dir) => existsSync(dir))
      : [];
    for (const file of logDirs.flatMap((logs) =>
      readdirSync(logs, { recursive: true, withFileTypes: true }),
    )) {
      if (file.isFile() && file.parentPath.endsWith("knative-fleet"))
        console.error(
          `--- ${file.parentPath}:\n${readFileSync(join(file.parentPath, file.name), "utf8").slice(-4000)}`,
        );
    }
  });
}

/** A hub CR of the fleet. */
export interface FleetCr {
  kind: string;
  namespace: string;
  name: string;
}

/** Whether the hub CR is Ready=True. */
export async function crReady(hub: KubeClient, cr: FleetCr): Promise<boolean> {
  const live = await hub.get(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name);
  return (
    (live?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.some(
      (c) => c.type === "Ready" && c.status === "True",
    ) ?? false
  );
}

/**
 * Leaves the spokes as found, the way users remove a whole fleet: the reconciler there (`restore`), the fleet
 * files deleted from the repository (`deleteFiles`; an empty fleet never prunes: allowEmpty is false), then
 * the hub CRs deleted by hand, and their finalizers uninstall Knative from the spokes. Should that fail, the
 * reconciler goes first (`uninstall`), so that nothing puts a finalizer back, and the CRs are released by hand.
 */
export async function removeFleet(
  hub: KubeClient,
  crs: readonly FleetCr[],
  steps: {
    restore?: () => Promise<unknown>;
    deleteFiles: () => Promise<unknown>;
    uninstall: () => Promise<unknown>;
  },
): Promise<void> {
  const remaining = async () =>
    (
      await Promise.all(crs.map((cr) => hub.get(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name)))
    ).filter(Boolean);
  if ((await remaining()).length === 0) return;
  try {
    await steps.restore?.();
    await steps.deleteFiles();
    await waitUntil(
      "the fleet's CRs finalized",
      async () => {
        const left = await remaining();
        // Deleted again while a sync of the commit before the removal may still bring one back.
        for (const cr of crs.filter((cr) =>
          left.some((l) => l?.metadata.name === cr.name && !l.metadata.deletionTimestamp),
        ))
          await hub.delete(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name);
        return left.length === 0 ? true : undefined;
      },
      180_000,
    );
  } catch (err) {
    console.error(`cleanup: ${(err as Error).message}; releasing the CRs by hand`);
    await steps.uninstall().catch(() => {});
    for (const cr of crs) {
      await hub
        .mergePatch(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name, { metadata: { finalizers: null } })
        .catch(() => {});
      await hub.delete(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name).catch(() => {});
    }
  }
}
