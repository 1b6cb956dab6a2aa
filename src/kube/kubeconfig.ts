import type { RequestOptions } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { Agent, type Dispatcher, ProxyAgent } from "undici";
import { KubeClient } from "./client.ts";
import { RestClient } from "./rest.ts";

/**
 * Loads the hub's kubeconfig: an explicit file, else in-cluster, else $KUBECONFIG / ~/.kube/config
 * (@kubernetes/client-node's loadFromDefault order).
 */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  if (!kc.getCurrentCluster())
    throw new Error(`no current cluster in the kubeconfig${file ? ` ${file}` : ""}`);
  return kc;
}

/**
 * A client for the cluster a kubeconfig points at. @kubernetes/client-node supplies the TLS material and
 * the Authorization header (token files re-read, exec plugins run by it); one pool is kept per client
 * certificate so connections stay alive across requests.
 */
export function clientFromKubeConfig(kc: KubeConfig): KubeClient {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  let pool: { identity: string; dispatcher: Dispatcher } | undefined;
  return new KubeClient(
    new RestClient({
      server: cluster.server,
      async connect() {
        const scratch: RequestOptions = {};
        await kc.applyToHTTPSOptions(scratch);
        const { ca, cert, key, servername, rejectUnauthorized } = scratch;
        const identity = `${String(cert ?? "")}|${String(ca ?? "")}`;
        if (pool?.identity !== identity) {
          const tls = { ca, cert, key, servername, rejectUnauthorized } as Record<string, unknown>;
          const dispatcher = cluster.proxyUrl
            ? new ProxyAgent({ uri: cluster.proxyUrl, requestTls: tls })
            : new Agent({ connect: tls, connections: 32 });
          void pool?.dispatcher.close().catch(() => undefined);
          pool = { identity, dispatcher };
        }
        const authorization = (scratch.headers as Record<string, string> | undefined)?.Authorization;
        const basic = scratch.auth ? `Basic ${Buffer.from(scratch.auth).toString("base64")}` : undefined;
        const header = authorization ?? basic;
        const headers: Record<string, string> = header ? { authorization: header } : {};
        return { dispatcher: pool.dispatcher, headers };
      },
    }),
  );
}

/** The default namespace of the kubeconfig's current context, or "default". */
export const contextNamespace = (kc: KubeConfig): string =>
  kc.getContextObject(kc.getCurrentContext())?.namespace ?? "default";
