import { readFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "./client.ts";
import { RestClient } from "./rest.ts";
import { KubeTransport, type RequestCredential } from "./transport.ts";

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
 * A client for the cluster a kubeconfig points at, through the same transport as every spoke
 * (kube/transport.ts). @kubernetes/client-node supplies the credential (token files re-read, exec plugins
 * run by it): the Authorization header, or the client certificate the transport keeps a pool for.
 */
export function clientFromKubeConfig(kc: KubeConfig): KubeClient {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  const transport = new KubeTransport(
    {
      server: cluster.server,
      caData:
        cluster.caData ?? (cluster.caFile ? readFileSync(cluster.caFile).toString("base64") : undefined),
      tlsServerName: cluster.tlsServerName,
      insecureSkipTlsVerify: cluster.skipTLSVerify,
      proxyUrl: cluster.proxyUrl,
    },
    {
      async credential(): Promise<RequestCredential> {
        const scratch: RequestOptions = {};
        await kc.applyToHTTPSOptions(scratch);
        const authorization = (scratch.headers as Record<string, string> | undefined)?.Authorization;
        const basic = scratch.auth ? `Basic ${Buffer.from(scratch.auth).toString("base64")}` : undefined;
        const header = authorization ?? basic;
        const { cert, key } = scratch;
        return {
          headers: header ? { authorization: header } : {},
          clientCertificate: cert && key ? { cert: String(cert), key: String(key) } : undefined,
        };
      },
    },
  );
  return new KubeClient(new RestClient(transport));
}

/** The default namespace of the kubeconfig's current context, or "default". */
export const contextNamespace = (kc: KubeConfig): string =>
  kc.getContextObject(kc.getCurrentContext())?.namespace ?? "default";
