#!/usr/bin/env node
// A Helm post-renderer for the sandbox's real nodes only (never for users): the chart's objects pass
// unchanged except the Deployment's pod, which
//  - runs on the host network, since the sandbox keeps every address on loopback and a pod network would
//    need addresses elsewhere;
//  - reaches the hub at the sandbox apiserver's loopback address: KUBERNETES_SERVICE_HOST/PORT are what
//    in-cluster config reads, and the kubelet would otherwise set them to the `kubernetes` Service's
//    cluster IP, which nothing serves here;
//  - is probed on 127.0.0.1: the kubelet refuses a loopback node IP, so the node reports no address and the
//    host-network pod no pod IP for the probes to default to;
//  - is pinned to the real nodes (the sandbox's other nodes are kwok's fakes);
// and the plugins' kubeconfig (a ConfigMap) names the hub by the same loopback address instead of
// kubernetes.default.svc, the in-cluster name that nothing serves here either.
// Usage: helm install ... --post-renderer real-node-post-renderer.ts --post-renderer-args HOST:PORT
import { parseAllDocuments, stringify } from "yaml";
import { REAL_NODE_LABEL } from "../../sandbox/real-node.ts";

type Probe = { httpGet?: { host?: string } } | undefined;
interface PodSpec {
  hostNetwork?: boolean;
  dnsPolicy?: string;
  nodeSelector?: Record<string, string>;
  containers: {
    env?: { name: string; value?: string }[];
    startupProbe?: Probe;
    livenessProbe?: Probe;
    readinessProbe?: Probe;
  }[];
}

/** The rendered manifests with the Deployment's pod moved onto a real node's host network. */
export function postRender(manifests: string, hub: { host: string; port: string }): string {
  const documents = parseAllDocuments(manifests)
    .map(
      (doc) =>
        doc.toJS() as {
          kind?: string;
          data?: Record<string, string>;
          spec?: { template?: { spec?: PodSpec } };
        } | null,
    )
    .filter((object) => object !== null);
  for (const object of documents) {
    if (object.kind === "ConfigMap" && object.data) {
      for (const [key, value] of Object.entries(object.data)) {
        object.data[key] = value.replaceAll(
          "server: https://kubernetes.default.svc",
          `server: https://${hub.host}:${hub.port}`,
        );
      }
    }
    const pod = object.kind === "Deployment" ? object.spec?.template?.spec : undefined;
    if (!pod) continue;
    pod.hostNetwork = true;
    pod.dnsPolicy = "ClusterFirstWithHostNet";
    pod.nodeSelector = { ...pod.nodeSelector, [REAL_NODE_LABEL]: "true" };
    for (const container of pod.containers) {
      const env = (container.env ?? []).filter((e) => !e.name.startsWith("KUBERNETES_SERVICE_"));
      container.env = [
        ...env,
        { name: "KUBERNETES_SERVICE_HOST", value: hub.host },
        { name: "KUBERNETES_SERVICE_PORT", value: hub.port },
      ];
      for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
        if (probe?.httpGet) probe.httpGet.host = "127.0.0.1";
      }
    }
  }
  return documents.map((object) => `---\n${stringify(object)}`).join("");
}

if (import.meta.main) {
  const [host = "", port = ""] = (process.argv[2] ?? "").split(/:(?=\d+$)/);
  if (!/^127\.\d+\.\d+\.\d+$/.test(host) || !/^\d+$/.test(port)) {
    process.stderr.write("real-node-post-renderer: give the hub as 127.x.y.z:PORT (loopback only)\n");
    process.exit(2);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  process.stdout.write(postRender(Buffer.concat(chunks).toString("utf8"), { host, port }));
}
