import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { KubeConfig, loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import { scratchDir } from "../access/support.ts";

// The hub kubeconfig as kubectl writes it (the shapes of client-go's clientcmd/api/v1 types): merged
// $KUBECONFIG files, paths relative to the file that names them, the current context's cluster and user.

const config = (overrides: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Config",
  clusters: [
    {
      name: "hub",
      cluster: {
        server: "https://127.0.0.1:6443",
        "certificate-authority": "pki/ca.crt",
        "tls-server-name": "kubernetes.default.svc",
        "proxy-url": "http://127.0.0.1:3128",
      },
    },
  ],
  users: [
    {
      name: "admin",
      user: { "client-certificate": "pki/admin.crt", "client-key-data": "a2V5", tokenFile: "/abs/token" },
    },
  ],
  contexts: [{ name: "hub", context: { cluster: "hub", user: "admin", namespace: "fleet" } }],
  "current-context": "hub",
  ...overrides,
});

const savedKubeconfig = process.env.KUBECONFIG;
afterEach(() => {
  if (savedKubeconfig === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = savedKubeconfig;
});

describe("KubeConfig", () => {
  it("reads the current context's cluster and user; relative paths are the file's directory's", () => {
    const dir = scratchDir();
    const file = join(dir, "config");
    writeFileSync(file, stringify(config()));
    const kc = loadKubeConfig(file);
    expect(kc.getCurrentCluster()).toEqual({
      name: "hub",
      server: "https://127.0.0.1:6443",
      caFile: join(dir, "pki", "ca.crt"),
      tlsServerName: "kubernetes.default.svc",
      proxyUrl: "http://127.0.0.1:3128",
    });
    expect(kc.getCurrentUser()).toEqual({
      name: "admin",
      certFile: join(dir, "pki", "admin.crt"),
      keyData: "a2V5",
      tokenFile: "/abs/token",
    });
    expect(kc.getContextObject(kc.getCurrentContext())?.namespace).toBe("fleet");
  });

  it("merges the files of $KUBECONFIG: the first file naming an entry or the current context wins", () => {
    const dir = scratchDir();
    const first = join(dir, "first");
    const second = join(dir, "second");
    writeFileSync(first, stringify({ ...config(), users: [], "current-context": "other" }));
    writeFileSync(
      second,
      stringify({
        ...config(),
        clusters: [
          { name: "hub", cluster: { server: "https://10.0.0.1" } },
          { name: "other", cluster: { server: "https://127.0.0.2:6443" } },
        ],
        contexts: [{ name: "other", context: { cluster: "other", user: "admin" } }],
        "current-context": "hub",
      }),
    );
    process.env.KUBECONFIG = [first, join(dir, "missing"), second].join(":");
    const kc = loadKubeConfig();
    expect(kc.getCurrentContext()).toBe("other");
    expect(kc.getCurrentCluster()?.server).toBe("https://127.0.0.2:6443");
    expect(kc.clusters.find((c) => c.name === "hub")?.server).toBe("https://127.0.0.1:6443");
    expect(kc.getCurrentUser()?.name).toBe("admin"); // from the second file
  });

  it("marks exec and auth-provider users for client-node, and hands it the current context alone", () => {
    const kc = new KubeConfig();
    const exec = { apiVersion: "client.authentication.k8s.io/v1", command: "gke-gcloud-auth-plugin" };
    kc.loadFromString(stringify(config({ users: [{ name: "admin", user: { exec } }] })));
    expect(kc.getCurrentUser()).toEqual({ name: "admin", delegated: true });
    expect(kc.currentAsObject()).toMatchObject({
      users: [{ name: "admin", user: { exec } }],
      contexts: [{ name: "hub" }],
      "current-context": "hub",
    });
  });

  it("refuses a cluster without a server and a file that is not a mapping, naming the file", () => {
    const dir = scratchDir();
    mkdirSync(join(dir, "d"), { recursive: true });
    const file = join(dir, "d", "config");
    writeFileSync(file, stringify(config({ clusters: [{ name: "hub", cluster: {} }] })));
    expect(() => loadKubeConfig(file)).toThrow(`${file}: cluster hub has no server`);
    writeFileSync(file, "- just a list\n");
    expect(() => loadKubeConfig(file)).toThrow(`${file}: not a kubeconfig`);
  });

  it("uses the context --context names instead of the current one, and names the known ones when it is missing", () => {
    const dir = scratchDir();
    const file = join(dir, "config");
    const contexts = [
      { name: "hub", context: { cluster: "hub", user: "admin" } },
      { name: "staging", context: { cluster: "staging", user: "admin", namespace: "team" } },
    ];
    const clusters = [
      { name: "hub", cluster: { server: "https://127.0.0.1:6443" } },
      { name: "staging", cluster: { server: "https://127.0.0.3:6443" } },
    ];
    writeFileSync(file, stringify(config({ clusters, contexts })));
    const kc = loadKubeConfig(file, "staging");
    expect(kc.getCurrentCluster()?.server).toBe("https://127.0.0.3:6443");
    expect(kc.getContextObject(kc.getCurrentContext())?.namespace).toBe("team");
    expect(() => loadKubeConfig(file, "prod")).toThrow(
      `context "prod" is not in the kubeconfig ${file} (contexts: hub, staging)`,
    );
  });

  it("says so when the current context names no cluster", () => {
    const dir = scratchDir();
    const file = join(dir, "config");
    writeFileSync(file, stringify(config({ "current-context": "nowhere" })));
    expect(() => loadKubeConfig(file)).toThrow(`no current cluster in the kubeconfig ${file}`);
  });
});
