import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Container, type Deployment, type KubeObject, only } from "../../support/helm.ts";

/** A change made to the rendered pod so that it runs on this machine: which text, from what, to what. */
export interface Rewrite {
  where: string;
  from: string;
  to: string;
}

/** The chart's pod, laid out on this machine as a kubelet would lay it out in a container. */
export interface LocalPod {
  /** The container's args, its mount paths rewritten to the host directories that stand in for them. */
  args: string[];
  /** The container's env, with the downward-API fields (`fieldRef`) resolved. */
  env: Record<string, string>;
  /** The `http-metrics` container port: /healthz, /readyz and /metrics. */
  metricsPort: number;
  /** The paths of the startup, liveness and readiness probes. */
  probePaths: string[];
  /** Every rewrite made, in order. Nothing else of the render was changed. */
  rewrites: Rewrite[];
}

const CONTAINER = "knative-fleet";

/**
 * Lays out the rendered Deployment's `knative-fleet` container in `workDir`: each ConfigMap volume becomes a
 * directory holding the rendered ConfigMap's keys, each emptyDir an empty directory (except `/tmp`, which the
 * host already has writable), and each image volume must already exist at its mountPath (the credential
 * plugins built for the sandbox). The mount paths that moved are then rewritten where they occur as paths:
 * in the args and in the mounted files. The ConfigMaps and the args are otherwise exactly the render.
 */
export function layOutPod(objects: readonly KubeObject[], workDir: string, podName: string): LocalPod {
  const deployment = only<Deployment>(objects, "Deployment");
  const pod = deployment.spec.template.spec;
  const container = pod.containers.find((c) => c.name === CONTAINER);
  if (!container) throw new Error(`the Deployment has no container ${CONTAINER}`);

  const moved: { mountPath: string; hostDir: string }[] = [];
  const files: { where: string; path: string; content: string }[] = [];
  for (const mount of container.volumeMounts ?? []) {
    const volume = pod.volumes.find((v) => v.name === mount.name);
    if (!volume) throw new Error(`volumeMount ${mount.name} names no volume`);
    const hostDir = join(workDir, "volumes", mount.name);
    if (volume.configMap) {
      const configMap = only<KubeObject & { data: Record<string, string> }>(
        objects,
        "ConfigMap",
        volume.configMap.name,
      );
      const items = volume.configMap.items ?? Object.keys(configMap.data).map((key) => ({ key, path: key }));
      for (const { key, path } of items) {
        const content = configMap.data[key];
        if (content === undefined) throw new Error(`ConfigMap ${configMap.metadata.name} has no key ${key}`);
        files.push({
          where: `ConfigMap ${configMap.metadata.name} ${key}`,
          path: join(hostDir, path),
          content,
        });
      }
      moved.push({ mountPath: mount.mountPath, hostDir });
    } else if (volume.emptyDir) {
      if (mount.mountPath === "/tmp") continue;
      mkdirSync(hostDir, { recursive: true });
      moved.push({ mountPath: mount.mountPath, hostDir });
    } else if (volume.image) {
      if (!existsSync(mount.mountPath))
        throw new Error(`image volume ${mount.name}: nothing at ${mount.mountPath} on this machine`);
    } else {
      throw new Error(`volume ${volume.name}: only configMap, emptyDir and image volumes are laid out`);
    }
  }

  const rewrites: Rewrite[] = [];
  // Longest first, so a mount inside another mount's path is rewritten as itself.
  moved.sort((a, b) => b.mountPath.length - a.mountPath.length);
  const relocate = (text: string, where: string): string =>
    moved.reduce(
      (out, { mountPath, hostDir }) =>
        out.replace(pathPattern(mountPath), (match, before: string) => {
          rewrites.push({ where, from: match.slice(before.length), to: hostDir });
          return `${before}${hostDir}`;
        }),
      text,
    );

  const args = (container.args ?? []).map((arg) => relocate(arg, "args"));
  for (const file of files) {
    mkdirSync(join(file.path, ".."), { recursive: true });
    writeFileSync(file.path, relocate(file.content, file.where));
  }
  return {
    args,
    env: podEnv(container, podName, deployment.metadata.namespace ?? "default"),
    metricsPort: metricsPort(container),
    probePaths: [container.startupProbe, container.livenessProbe, container.readinessProbe].map((probe) => {
      if (!probe?.httpGet) throw new Error("the container lacks an HTTP probe");
      return probe.httpGet.path;
    }),
    rewrites,
  };
}

/** `mountPath` where it stands as a path of its own or a path's prefix, after start, space, quote or `=`. */
function pathPattern(mountPath: string): RegExp {
  const escaped = mountPath.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[\\s"'=])${escaped}(?=$|[/\\s"'])`, "gm");
}

function podEnv(container: Container, podName: string, namespace: string): Record<string, string> {
  // A Pod's UID is the API server's to give: here one per laid-out pod, as a new Pod would get.
  const fields: Record<string, string> = {
    "metadata.name": podName,
    "metadata.namespace": namespace,
    "metadata.uid": randomUUID(),
  };
  const env: Record<string, string> = {};
  for (const variable of (container.env ?? []) as {
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath: string } };
  }[]) {
    const fieldPath = variable.valueFrom?.fieldRef?.fieldPath;
    const value = fieldPath === undefined ? variable.value : fields[fieldPath];
    if (value === undefined) throw new Error(`env ${variable.name}: cannot resolve it outside a cluster`);
    env[variable.name] = value;
  }
  return env;
}

function metricsPort(container: Container): number {
  const port = container.ports?.find((p) => p.name === "http-metrics");
  if (!port) throw new Error("the container has no http-metrics port");
  return port.containerPort;
}
