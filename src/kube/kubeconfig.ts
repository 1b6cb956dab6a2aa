import { existsSync, readFileSync } from "node:fs";
import type { RequestOptions } from "node:https";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { parse } from "yaml";
import { KubeClient } from "./client.ts";
import { isRecord } from "./object.ts";
import { RestClient } from "./rest.ts";
import { KubeTransport, type RequestCredential } from "./transport.ts";

// The hub's kubeconfig, read here rather than by @kubernetes/client-node: loading that package costs the
// process about 60 MiB (its generated models and API classes load as one module graph) for what is a small
// YAML file. client-node is still used, loaded on demand, for the users only it can serve: exec plugins and
// auth-providers.

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** A token file (projected ServiceAccount tokens rotate) is read again after this long, as client-go does. */
const TOKEN_FILE_TTL_MS = 60_000;

interface KubeConfigCluster {
  name: string;
  server: string;
  caData?: string;
  caFile?: string;
  skipTLSVerify?: boolean;
  tlsServerName?: string;
  proxyUrl?: string;
}

interface KubeConfigUser {
  name: string;
  token?: string;
  tokenFile?: string;
  certData?: string;
  certFile?: string;
  keyData?: string;
  keyFile?: string;
  username?: string;
  password?: string;
  /** An exec plugin or auth-provider: only @kubernetes/client-node serves those (loaded when first needed). */
  delegated?: boolean;
}

interface KubeConfigContext {
  name: string;
  cluster: string;
  user: string;
  namespace?: string;
}

/** A loaded kubeconfig: its clusters, users and contexts, and the current context. */
export class KubeConfig {
  clusters: KubeConfigCluster[] = [];
  users: KubeConfigUser[] = [];
  contexts: KubeConfigContext[] = [];
  currentContext = "";
  /** The merged document as read (for delegating a user to client-node). */
  #raw: Record<string, unknown[]> & { "current-context"?: string } = {
    clusters: [],
    users: [],
    contexts: [],
  };

  /** Reads one kubeconfig file; relative paths in it are relative to its directory. */
  loadFromFile(file: string): void {
    this.#merge(parse(readFileSync(file, "utf8")), dirname(file), file);
  }

  /** Parses kubeconfig YAML text; relative paths are relative to `baseDir` (default: the working directory). */
  loadFromString(text: string, baseDir = process.cwd()): void {
    this.#merge(parse(text), baseDir, "the kubeconfig");
  }

  /**
   * client-go's order: the files of $KUBECONFIG (merged, the first one naming an entry wins), else
   * ~/.kube/config, else the pod's ServiceAccount (in-cluster).
   */
  loadFromDefault(): void {
    const files = (process.env.KUBECONFIG ?? "").split(delimiter).filter((f) => f !== "");
    if (files.length > 0) {
      for (const file of files) if (existsSync(file)) this.loadFromFile(file);
      return;
    }
    const home = join(homedir(), ".kube", "config");
    if (existsSync(home)) this.loadFromFile(home);
    else if (existsSync(join(SERVICE_ACCOUNT_DIR, "token"))) this.loadFromCluster();
    else throw new Error("no kubeconfig: $KUBECONFIG is unset, ~/.kube/config is missing, and not in a pod");
  }

  /** The pod's ServiceAccount: the API server from the environment, its CA and (rotating) token. */
  loadFromCluster(): void {
    const host = process.env.KUBERNETES_SERVICE_HOST;
    const port = process.env.KUBERNETES_SERVICE_PORT;
    if (!host || !port) throw new Error("in-cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
    const namespaceFile = join(SERVICE_ACCOUNT_DIR, "namespace");
    this.clusters.push({
      name: "inCluster",
      server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
      caFile: join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    });
    this.users.push({ name: "inClusterUser", tokenFile: join(SERVICE_ACCOUNT_DIR, "token") });
    this.contexts.push({
      name: "inClusterContext",
      cluster: "inCluster",
      user: "inClusterUser",
      ...(existsSync(namespaceFile) ? { namespace: readFileSync(namespaceFile, "utf8").trim() } : {}),
    });
    this.currentContext = "inClusterContext";
  }

  getCurrentContext(): string {
    return this.currentContext;
  }

  getContextObject(name: string): KubeConfigContext | undefined {
    return this.contexts.find((c) => c.name === name);
  }

  getCurrentCluster(): KubeConfigCluster | undefined {
    const context = this.getContextObject(this.currentContext);
    return context && this.clusters.find((c) => c.name === context.cluster);
  }

  getCurrentUser(): KubeConfigUser | undefined {
    const context = this.getContextObject(this.currentContext);
    return context && this.users.find((u) => u.name === context.user);
  }

  /** The current context alone, as kubeconfig YAML's object form (for client-node). */
  currentAsObject(): object {
    const context = this.getContextObject(this.currentContext);
    const named = (list: unknown[], name: string | undefined) =>
      list.filter((entry) => isRecord(entry) && entry.name === name);
    return {
      apiVersion: "v1",
      kind: "Config",
      clusters: named(this.#raw.clusters!, context?.cluster),
      users: named(this.#raw.users!, context?.user),
      contexts: named(this.#raw.contexts!, context?.name),
      "current-context": this.currentContext,
    };
  }

  #merge(document: unknown, baseDir: string, origin: string): void {
    if (!isRecord(document)) throw new Error(`${origin}: not a kubeconfig (a YAML mapping)`);
    const path = (p: unknown) =>
      typeof p === "string" && p !== "" ? (isAbsolute(p) ? p : join(baseDir, p)) : undefined;
    const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
    const entries = (key: string) =>
      (Array.isArray(document[key]) ? (document[key] as unknown[]) : []).filter(
        (e): e is { name: string } & Record<string, unknown> => isRecord(e) && typeof e.name === "string",
      );
    for (const entry of entries("clusters")) {
      if (this.clusters.some((c) => c.name === entry.name)) continue;
      const c = isRecord(entry.cluster) ? entry.cluster : {};
      const server = str(c.server);
      if (!server) throw new Error(`${origin}: cluster ${entry.name} has no server`);
      this.clusters.push(
        withoutUndefined({
          name: entry.name,
          server,
          caData: str(c["certificate-authority-data"]),
          caFile: path(c["certificate-authority"]),
          skipTLSVerify: c["insecure-skip-tls-verify"] === true ? true : undefined,
          tlsServerName: str(c["tls-server-name"]),
          proxyUrl: str(c["proxy-url"]),
        }),
      );
      this.#raw.clusters!.push({
        ...entry,
        cluster: { ...c, "certificate-authority": path(c["certificate-authority"]) },
      });
    }
    for (const entry of entries("users")) {
      if (this.users.some((u) => u.name === entry.name)) continue;
      const u = isRecord(entry.user) ? entry.user : {};
      this.users.push(
        withoutUndefined({
          name: entry.name,
          token: str(u.token),
          tokenFile: path(u.tokenFile),
          certData: str(u["client-certificate-data"]),
          certFile: path(u["client-certificate"]),
          keyData: str(u["client-key-data"]),
          keyFile: path(u["client-key"]),
          username: str(u.username),
          password: str(u.password),
          delegated: isRecord(u.exec) || isRecord(u["auth-provider"]) ? true : undefined,
        }),
      );
      this.#raw.users!.push(entry);
    }
    for (const entry of entries("contexts")) {
      if (this.contexts.some((c) => c.name === entry.name)) continue;
      const c = isRecord(entry.context) ? entry.context : {};
      this.contexts.push(
        withoutUndefined({
          name: entry.name,
          cluster: str(c.cluster) ?? "",
          user: str(c.user) ?? "",
          namespace: str(c.namespace),
        }),
      );
      this.#raw.contexts!.push(entry);
    }
    if (!this.currentContext) this.currentContext = str(document["current-context"]) ?? "";
  }
}

const withoutUndefined = <T extends object>(value: T): T =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;

/**
 * Loads the hub's kubeconfig: an explicit file, else $KUBECONFIG / ~/.kube/config, else in-cluster
 * (client-go's loadFromDefault order); `context` replaces its current context, as kubectl's --context does.
 */
export function loadKubeConfig(file?: string, context?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  if (context) {
    if (!kc.getContextObject(context)) {
      const known = kc.contexts.map((c) => c.name).join(", ") || "none";
      throw new Error(
        `context "${context}" is not in the kubeconfig${file ? ` ${file}` : ""} (contexts: ${known})`,
      );
    }
    kc.currentContext = context;
  }
  if (!kc.getCurrentCluster())
    throw new Error(`no current cluster in the kubeconfig${file ? ` ${file}` : ""}`);
  return kc;
}

/**
 * A client for the cluster a kubeconfig points at, through the same transport as every spoke
 * (kube/transport.ts): the user's token (a token file re-read every minute), client certificate or basic
 * auth; an exec plugin or auth-provider through @kubernetes/client-node, loaded only for such a user.
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
    { credential: credentialOf(kc) },
  );
  return new KubeClient(new RestClient(transport));
}

function credentialOf(kc: KubeConfig): () => Promise<RequestCredential> {
  const user = kc.getCurrentUser() ?? { name: "" };
  if (user.delegated) return delegatedCredential(kc);
  const pem = (data: string | undefined, file: string | undefined) =>
    data !== undefined
      ? Buffer.from(data, "base64").toString("utf8")
      : file
        ? readFileSync(file, "utf8")
        : undefined;
  const cert = pem(user.certData, user.certFile);
  const key = pem(user.keyData, user.keyFile);
  const clientCertificate = cert && key ? { cert, key } : undefined;
  let fileToken: { value: string; readAt: number } | undefined;
  const token = (): string | undefined => {
    if (user.token) return user.token;
    if (!user.tokenFile) return undefined;
    if (!fileToken || Date.now() - fileToken.readAt > TOKEN_FILE_TTL_MS)
      fileToken = { value: readFileSync(user.tokenFile, "utf8").trim(), readAt: Date.now() };
    return fileToken.value;
  };
  return async () => {
    const bearer = token();
    const authorization = bearer
      ? `Bearer ${bearer}`
      : user.username !== undefined
        ? `Basic ${Buffer.from(`${user.username}:${user.password ?? ""}`).toString("base64")}`
        : undefined;
    const headers: Record<string, string> = authorization ? { authorization } : {};
    return {
      headers,
      clientCertificate,
      // A rejected file token is read again at once (it may just have rotated).
      rejected: user.tokenFile
        ? () => {
            fileToken = undefined;
          }
        : undefined,
    };
  };
}

/** An exec plugin or auth-provider user: @kubernetes/client-node runs it (and caches its credential). */
function delegatedCredential(kc: KubeConfig): () => Promise<RequestCredential> {
  let delegate: Promise<{ applyToHTTPSOptions(options: RequestOptions): Promise<void> }> | undefined;
  return async () => {
    delegate ??= import("@kubernetes/client-node").then(({ KubeConfig: ClientNodeConfig }) => {
      const config = new ClientNodeConfig();
      config.loadFromString(JSON.stringify(kc.currentAsObject()));
      return config;
    });
    const scratch: RequestOptions = {};
    await (await delegate).applyToHTTPSOptions(scratch);
    const authorization = (scratch.headers as Record<string, string> | undefined)?.Authorization;
    const headers: Record<string, string> = authorization ? { authorization } : {};
    const { cert, key } = scratch;
    return {
      headers,
      clientCertificate: cert && key ? { cert: String(cert), key: String(key) } : undefined,
    };
  };
}
